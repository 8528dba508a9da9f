package schemas

import (
	"fmt"
	"time"
)

// JobEventType is what happened to a job.
type JobEventType uint8

// Job event types. The numbering is part of the wire format; the order is also
// the tie-break when two events of one job carry the same timestamp (a later
// type wins in the jobs table).
const (
	JobSubmit JobEventType = iota + 1
	JobUpdate              // priority, limit or other change while pending or running
	JobStart
	JobEnd

	numJobEventTypes = iota + 1
)

var jobEventTypeNames = [numJobEventTypes]string{
	JobSubmit: "SUBMIT",
	JobUpdate: "UPDATE",
	JobStart:  "START",
	JobEnd:    "END",
}

func (t JobEventType) String() string {
	if t == 0 || int(t) >= len(jobEventTypeNames) {
		return fmt.Sprintf("job_event_type(%d)", uint8(t))
	}
	return jobEventTypeNames[t]
}

// JobState is a job's state after an event, in Slurm's vocabulary.
type JobState uint8

// Job states. The numbering is part of the wire format.
const (
	StatePending JobState = iota + 1
	StateRunning
	StateCompleted
	StateFailed
	StateCancelled
	StateTimeout
	StateNodeFail
	StatePreempted
	StateOutOfMemory
	// StateUnknown: the job ended but its source does not say how (SWF
	// status -1 with a known run time). Final, so that the job does not stay
	// RUNNING for ever; never a guess of COMPLETED or FAILED.
	StateUnknown

	numJobStates = iota + 1
)

var jobStateNames = [numJobStates]string{
	StatePending:     "PENDING",
	StateRunning:     "RUNNING",
	StateCompleted:   "COMPLETED",
	StateFailed:      "FAILED",
	StateCancelled:   "CANCELLED",
	StateTimeout:     "TIMEOUT",
	StateNodeFail:    "NODE_FAIL",
	StatePreempted:   "PREEMPTED",
	StateOutOfMemory: "OUT_OF_MEMORY",
	StateUnknown:     "UNKNOWN",
}

func (s JobState) String() string {
	if s == 0 || int(s) >= len(jobStateNames) {
		return fmt.Sprintf("job_state(%d)", uint8(s))
	}
	return jobStateNames[s]
}

// Final reports whether s is a state a job ends in.
func (s JobState) Final() bool { return s >= StateCompleted && s < numJobStates }

// ParseJobState maps a state name (Slurm's spelling, case-sensitive, as in
// squeue and the job-completion log) to a JobState. Slurm's "CANCELLED by N"
// and its short forms are the caller's to normalise.
func ParseJobState(name string) (JobState, bool) {
	for i, n := range jobStateNames {
		if i > 0 && n == name {
			return JobState(i), true
		}
	}
	return 0, false
}

// JobSource says where job events came from.
type JobSource uint8

// Job event sources. The numbering is part of the wire format.
const (
	SourceSlurm JobSource = iota + 1
	SourceK8s
	SourceTrace
	SourceSim

	numJobSources = iota + 1
)

var jobSourceNames = [numJobSources]string{
	SourceSlurm: "slurm",
	SourceK8s:   "k8s",
	SourceTrace: "trace",
	SourceSim:   "sim",
}

func (s JobSource) String() string {
	if s == 0 || int(s) >= len(jobSourceNames) {
		return fmt.Sprintf("job_source(%d)", uint8(s))
	}
	return jobSourceNames[s]
}

// Unknown marks an integer job field the source does not know; it is stored as
// NULL. Times use 0 (the zero Unix time) for unknown instead.
const Unknown = -1

// JobEvent is one state change of one job. Every event carries the whole job
// record as known at EventMillis, so the latest event alone gives the job's
// current state.
type JobEvent struct {
	Type        JobEventType
	EventMillis int64 // when the change happened (or was observed), Unix ms

	JobID       string // unique within the cluster (Slurm: "1234", array task "1234_7" is its own job id)
	ArrayJobID  string // "" for a job outside an array
	ArrayTaskID int64  // Unknown outside an array
	Name        string
	User        string
	UID         int64 // Unknown when not known
	Group       string
	Account     string
	Partition   string // Slurm partition, or the virtual cluster of a trace
	QOS         string
	State       JobState
	ExitCode    int64 // Unknown until the job ends (or when the source cannot tell)
	Priority    int64 // scheduler priority; Unknown when not known

	SubmitMillis   int64 // always known
	EligibleMillis int64 // 0 when unknown
	StartMillis    int64 // 0 until started
	EndMillis      int64 // 0 until ended

	TimeLimitS  int64    // Unknown when unlimited or not known
	NodeCount   int64    // Unknown when not known
	Nodes       []string // host names, expanded ("gpu[1-2]" → "gpu1", "gpu2"); empty until allocated
	CPUs        int64    // Unknown when not known
	GPUs        int64    // GPUs requested/allocated in all; Unknown when not known
	GPUType     string   // "a100"; "" when untyped or not known; a mix sorted and joined by ',' ("a100,v100")
	MemReqBytes int64    // Unknown when not known
	CommandHash string   // hex hash of the submit script or command line; "" when unknown
	WorkDir     string
}

// Submit, Start and End return the job's times; the zero time when unknown.
func (e *JobEvent) Submit() time.Time { return msTime(e.SubmitMillis) }
func (e *JobEvent) Start() time.Time  { return msTime(e.StartMillis) }
func (e *JobEvent) End() time.Time    { return msTime(e.EndMillis) }

func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// JobEventBatch is one Kafka message on TopicJobEvents: events of one cluster
// from one source. Producers key it with JobKey when it holds one job's events,
// so that a job's events stay in order on one partition.
type JobEventBatch struct {
	Cluster string
	Source  JobSource
	Events  []JobEvent
}

// JobKey is the Kafka key of a message holding the events of one job.
func JobKey(cluster, jobID string) []byte { return []byte(cluster + "/" + jobID) }

// AllocSource says how a GPU was attributed to a job.
type AllocSource uint8

// Allocation sources. The numbering is part of the wire format.
const (
	AllocCgroup   AllocSource = iota + 1 // /proc/PID/cgroup holds Slurm's job_<id>
	AllocEnviron                         // /proc/PID/environ holds SLURM_JOB_ID
	AllocProlog                          // written by a scheduler prolog/epilog
	AllocScontrol                        // the scheduler's own record (squeue/scontrol GRES index)
	AllocSim                             // the simulated cluster
	AllocTrace                           // an imported trace

	numAllocSources = iota + 1
)

var allocSourceNames = [numAllocSources]string{
	AllocCgroup:   "cgroup",
	AllocEnviron:  "environ",
	AllocProlog:   "prolog",
	AllocScontrol: "scontrol",
	AllocSim:      "sim",
	AllocTrace:    "trace",
}

func (s AllocSource) String() string {
	if s == 0 || int(s) >= len(allocSourceNames) {
		return fmt.Sprintf("alloc_source(%d)", uint8(s))
	}
	return allocSourceNames[s]
}

// Alloc is one GPU held by one job for an interval. A source publishes an
// interval when it opens (EndMillis 0) and again when it closes; the closing
// record replaces the open one in ClickHouse (same key: cluster, host, GPU,
// job, start, source).
type Alloc struct {
	Host        string
	GPUIndex    int64  // device index on the host; Unknown when only the UUID is known
	GPUUUID     string // "" when only the index is known (scheduler records)
	MIGUUID     string // "" for a whole GPU
	JobID       string
	User        string
	StartMillis int64 // Unix ms
	EndMillis   int64 // Unix ms; 0 while the job still holds the GPU
	Source      AllocSource
}

// AllocBatch is one Kafka message on TopicAllocations. Producers key it by host
// (node attribution) or with JobKey (scheduler records).
type AllocBatch struct {
	Cluster string
	Allocs  []Alloc
}
