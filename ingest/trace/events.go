package trace

import (
	"strconv"
	"strings"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// EventState maps a trace job state (Job.State) to the schemas state it names.
// ok is false when the trace does not say ("") or says something schemas has no
// state for; such a state is never guessed. Slurm's sacct truncates long names
// with "+" ("OUT_OF_ME+", "CANCELLED+"): a truncation that names exactly one
// state is that state.
func EventState(s string) (st schemas.JobState, ok bool) {
	if s == "" {
		return 0, false
	}
	if st, ok := schemas.ParseJobState(s); ok {
		return st, true
	}
	prefix, truncated := strings.CutSuffix(s, "+")
	if !truncated || prefix == "" {
		return 0, false
	}
	for _, v := range allStates {
		if strings.HasPrefix(v.String(), prefix) {
			if ok { // two states share the prefix: it names neither
				return 0, false
			}
			st, ok = v, true
		}
	}
	return st, ok
}

var allStates = [...]schemas.JobState{
	schemas.StatePending, schemas.StateRunning, schemas.StateCompleted, schemas.StateFailed, schemas.StateCancelled,
	schemas.StateTimeout, schemas.StateNodeFail, schemas.StatePreempted, schemas.StateOutOfMemory,
	schemas.StateUnknown,
}

// EventStats counts what a Converter produced and what the traces could not
// tell it.
type EventStats struct {
	Jobs   int `json:"jobs"`
	Events int `json:"events"`
	// NoStart counts jobs without a START event: the trace gives no start time.
	NoStart int `json:"no_start"`
	// NoEnd counts jobs without an END event: the trace gives neither a final
	// state nor an end time, or a state that is not final (PENDING, RUNNING).
	NoEnd int `json:"no_end"`
	// EndStateUnknown counts END events in state UNKNOWN: the trace gives the
	// end time but not the outcome (SWF status -1).
	EndStateUnknown int `json:"end_state_unknown"`
	// EndTimeUnknown counts END events that carry no end time: the trace gives
	// the outcome but not when (the Venus slice: submit time and duration).
	EndTimeUnknown int `json:"end_time_unknown"`
	// UnmappedStates counts jobs by a trace state that names no schemas state;
	// "" is a trace that does not say.
	UnmappedStates map[string]int `json:"unmapped_states"`
	// DuplicateIDs counts jobs whose id an earlier job of the same file had
	// (SWF writes each part of a checkpointed job as its own line with the
	// job's number); they are renamed ID#2, ID#3, … in file order.
	DuplicateIDs int `json:"duplicate_ids"`
}

// Converter turns the jobs of one trace file into job events. It remembers the
// ids it has seen, so use one Converter per file and feed it the jobs in file
// order. The output depends on the jobs alone — no clock is read — so importing
// a file twice gives byte-identical events, which the ReplacingMergeTree tables
// downstream collapse.
type Converter struct {
	Stats EventStats
	seen  map[string]int
}

// NewConverter returns a Converter for one file.
func NewConverter() *Converter {
	return &Converter{Stats: EventStats{UnmappedStates: map[string]int{}}, seen: map[string]int{}}
}

// Append appends the events of j to dst and returns the extended slice:
//
//   - SUBMIT at the submit time, state PENDING;
//   - START at the start time, state RUNNING, when the trace gives a start time;
//   - END with the final state (EventState of j.State) when the trace gives
//     one: at the end time when known; otherwise at the latest time the trace
//     does give (start, else submit), with EndMillis 0 (unknown), so the event
//     time is a lower bound of when the job ended.
//
// A job whose final state the trace does not give but whose end time it does
// (HPC2N's status -1 jobs) ends in schemas.StateUnknown: inventing COMPLETED
// or FAILED would falsify the completion rates, and no END at all would leave
// it RUNNING for ever. Stats.EndStateUnknown counts them. A job with neither
// gets no END event; Stats.NoEnd counts those.
//
// Every event carries the whole record, as schemas.JobEvent asks, with what
// the trace lacks left unknown: Name is the SWF executable number or the
// Helios job name, User and Group the trace's ids (SWF user numbers are not
// Unix uids, so UID stays Unknown), Partition the SWF queue ("queue/partition")
// or Helios VC, CPUs the allocated processors (else the requested ones),
// TimeLimitS the requested time; ExitCode, Priority, MemReqBytes, ArrayTaskID
// are Unknown, times the trace lacks are 0.
func (c *Converter) Append(dst []schemas.JobEvent, j *Job) []schemas.JobEvent {
	id := j.ID
	if n := c.seen[id]; n > 0 {
		c.seen[id] = n + 1
		id += "#" + strconv.Itoa(n+1)
		c.Stats.DuplicateIDs++
	} else {
		c.seen[id] = 1
	}
	cpus := j.Procs
	if cpus < 0 {
		cpus = j.ReqProcs
	}
	limit := int64(schemas.Unknown)
	if j.ReqTime >= 0 {
		limit = int64(j.ReqTime / time.Second)
	}
	base := schemas.JobEvent{
		Type:         schemas.JobSubmit,
		EventMillis:  j.Submit.UnixMilli(),
		JobID:        id,
		ArrayTaskID:  schemas.Unknown,
		Name:         j.Executable,
		User:         j.User,
		UID:          schemas.Unknown,
		Group:        j.Group,
		Partition:    j.Queue,
		State:        schemas.StatePending,
		ExitCode:     schemas.Unknown,
		Priority:     schemas.Unknown,
		SubmitMillis: j.Submit.UnixMilli(),
		TimeLimitS:   limit,
		NodeCount:    count(j.Nodes),
		CPUs:         count(cpus),
		GPUs:         count(j.GPUs),
		MemReqBytes:  schemas.Unknown,
	}
	c.Stats.Jobs++
	dst = append(dst, base)
	c.Stats.Events++

	last := base.EventMillis
	if !j.Start.IsZero() {
		e := base
		e.Type, e.State = schemas.JobStart, schemas.StateRunning
		e.StartMillis = j.Start.UnixMilli()
		e.EventMillis = e.StartMillis
		base.StartMillis, last = e.StartMillis, e.StartMillis
		dst = append(dst, e)
		c.Stats.Events++
	} else {
		c.Stats.NoStart++
	}

	st, ok := EventState(j.State)
	if !ok {
		c.Stats.UnmappedStates[j.State]++
	}
	if !ok && !j.End.IsZero() {
		st, ok = schemas.StateUnknown, true
		c.Stats.EndStateUnknown++
	}
	if !ok || !st.Final() {
		c.Stats.NoEnd++
		return dst
	}
	e := base
	e.Type, e.State = schemas.JobEnd, st
	if !j.End.IsZero() {
		e.EndMillis = j.End.UnixMilli()
		e.EventMillis = e.EndMillis
	} else {
		e.EventMillis = last
		c.Stats.EndTimeUnknown++
	}
	c.Stats.Events++
	return append(dst, e)
}

// count maps a trace count (-1 unknown) to a schemas one.
func count(n int) int64 {
	if n < 0 {
		return schemas.Unknown
	}
	return int64(n)
}
