package trace

import (
	"fmt"
	"math"
	"math/bits"
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
	// job's number); they are renamed ID#2, ID#3, … in file order, skipping
	// any such id an earlier job has (its own or by renaming), so that no
	// two jobs of a file share an id.
	DuplicateIDs int `json:"duplicate_ids"`
}

// Converter turns the jobs of one trace file into job events. It remembers the
// ids it has seen, so use one Converter per file and feed it the jobs in file
// order. The output depends on the jobs alone — no clock is read — so importing
// a file twice gives byte-identical events, which the ReplacingMergeTree tables
// downstream collapse.
type Converter struct {
	Stats EventStats
	// seen holds every id given out so far, with the last N of the ID#N
	// renamings of that id (1 when it was never renamed).
	seen map[string]int
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
// TimeLimitS the requested time, MemReqBytes the SWF requested memory (KB per
// processor) times 1024 times CPUs; ExitCode, Priority, ArrayTaskID are
// Unknown, times the trace lacks are 0; a start or end time at the epoch
// itself is 1 ms (see knownMillis).
func (c *Converter) Append(dst []schemas.JobEvent, j *Job) []schemas.JobEvent {
	dst, _ = c.append(dst, j, false)
	return dst
}

// AppendChecked is Append for events bound for the encoder and job_events:
// when schemas.CheckJobEvent refuses one of j's events, or one holds a time
// limit or count above 4294967295 (what job_events stores), it returns dst
// as it was
// and a *LineError with reason "bad_event" that names j's line, id and the
// field, and the Converter is as if it had never seen j.
func (c *Converter) AppendChecked(dst []schemas.JobEvent, j *Job) ([]schemas.JobEvent, error) {
	dst, le := c.append(dst, j, true)
	if le != nil {
		return dst, le
	}
	return dst, nil
}

// newID returns the id j's events get and the renaming count to record
// for its id (0: not renamed), without recording either.
func (c *Converter) newID(id string) (string, int) {
	n := c.seen[id]
	if n == 0 {
		return id, 0
	}
	for {
		n++
		// A file may hold "5", "5" and "5#2": the second 5 is 5#3.
		if renamed := id + "#" + strconv.Itoa(n); c.seen[renamed] == 0 {
			return renamed, n
		}
	}
}

func (c *Converter) append(dst []schemas.JobEvent, j *Job, check bool) ([]schemas.JobEvent, *LineError) {
	id, renamed := c.newID(j.ID)
	first := len(dst)
	var noStart, noEnd, endStateUnknown, endTimeUnknown, unmapped bool
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
	memOver := false
	if j.ReqMem >= 0 && cpus >= 0 {
		// A JobEvent holds up to MaxInt64 bytes.
		hi, kb := bits.Mul64(uint64(j.ReqMem), uint64(cpus))
		if memOver = hi != 0 || kb > math.MaxInt64/1024; !memOver {
			base.MemReqBytes = int64(kb * 1024)
		}
	}
	dst = append(dst, base)

	last := base.EventMillis
	if !j.Start.IsZero() {
		e := base
		e.Type, e.State = schemas.JobStart, schemas.StateRunning
		e.StartMillis = knownMillis(j.Start)
		e.EventMillis = j.Start.UnixMilli()
		base.StartMillis, last = e.StartMillis, e.EventMillis
		dst = append(dst, e)
	} else {
		noStart = true
	}

	st, ok := EventState(j.State)
	unmapped = !ok
	if !ok && !j.End.IsZero() {
		st, ok = schemas.StateUnknown, true
		endStateUnknown = true
	}
	if !ok || !st.Final() {
		noEnd = true
	} else {
		e := base
		e.Type, e.State = schemas.JobEnd, st
		if !j.End.IsZero() {
			e.EndMillis = knownMillis(j.End)
			e.EventMillis = j.End.UnixMilli()
		} else {
			e.EventMillis = last
			endTimeUnknown = true
		}
		dst = append(dst, e)
	}

	if check {
		if memOver {
			clear(dst[first:])
			return dst[:first], &LineError{Line: j.Line, Reason: "bad_event",
				Detail: fmt.Sprintf("job %.40q: requested memory %d KB per processor × %d cpus: more bytes than a job event holds", j.ID, j.ReqMem, cpus)}
		}
		// What job_events holds in 32 bits (ingest stores a larger value
		// as unknown); the same in every event of the job.
		for _, f := range [...]struct {
			name string
			v    int64
		}{{"time limit", base.TimeLimitS}, {"node count", base.NodeCount}, {"cpus", base.CPUs}, {"gpus", base.GPUs}} {
			if f.v > maxValue {
				clear(dst[first:])
				return dst[:first], &LineError{Line: j.Line, Reason: "bad_event",
					Detail: fmt.Sprintf("job %.40q: %s %d: more than %d, the most a job event holds", j.ID, f.name, f.v, maxValue)}
			}
		}
		for i := first; i < len(dst); i++ {
			if err := schemas.CheckJobEvent(&dst[i]); err != nil {
				clear(dst[first:])
				return dst[:first], &LineError{Line: j.Line, Reason: "bad_event",
					Detail: fmt.Sprintf("job %.40q: %s event: %v", j.ID, dst[i].Type, err)}
			}
		}
	}

	// The job is converted: record it.
	if renamed > 0 {
		c.seen[j.ID] = renamed
		c.Stats.DuplicateIDs++
	}
	c.seen[id] = max(c.seen[id], 1)
	s := &c.Stats
	s.Jobs++
	s.Events += len(dst) - first
	for _, f := range [...]struct {
		on bool
		n  *int
	}{{noStart, &s.NoStart}, {noEnd, &s.NoEnd}, {endStateUnknown, &s.EndStateUnknown}, {endTimeUnknown, &s.EndTimeUnknown}} {
		if f.on {
			*f.n++
		}
	}
	if unmapped {
		s.UnmappedStates[j.State]++
	}
	return dst, nil
}

// knownMillis returns the Unix milliseconds of t, a time the trace gives,
// for a JobEvent's start or end time, where 0 means unknown: the epoch
// itself (a trace without UnixStartTime whose first job starts at once)
// is 1 ms, which job_events, holding seconds, stores as the epoch. Before,
// such a job was stored as never started.
func knownMillis(t time.Time) int64 {
	if ms := t.UnixMilli(); ms != 0 {
		return ms
	}
	return 1
}

// count maps a trace count (-1 unknown) to a schemas one.
func count(n int) int64 {
	if n < 0 {
		return schemas.Unknown
	}
	return int64(n)
}

// RejectUnencodable rejects every job that a Converter would turn into an
// event AppendChecked refuses (one schemas.CheckJobEvent refuses, or with a
// value job_events cannot store), as reason "bad_event" with its line and the
// field, and returns how many it rejected. The readers refuse what
// they can see is wrong; this is the check at the border, for a caller about
// to encode the events (after RejectTimesOutside, which names a time out of
// range more plainly): such a job is counted and named, and the import goes
// on without it, instead of stopping at it. A Converter fed the jobs kept
// gives every one of them the id it had here. The kept errors stay in line
// order.
func (t *Trace) RejectUnencodable() int {
	c := NewConverter()
	var buf []schemas.JobEvent
	kept := t.Jobs[:0]
	n := 0
	for i := range t.Jobs {
		j := &t.Jobs[i]
		var le *LineError
		if buf, le = c.append(buf[:0], j, true); le == nil {
			kept = append(kept, *j)
			continue
		}
		n++
		t.reject(le.Line, le.Reason, func() string { return le.Detail })
	}
	clear(t.Jobs[len(kept):])
	t.Jobs = kept
	return n
}
