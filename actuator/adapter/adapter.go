// Package adapter is what the actuator needs from a scheduler — the pending
// jobs, the nodes with their power and allocation state, and three actions:
// set a job's priority, power a node down, power it up — and the Guard that
// stands between the actuator and any scheduler: dry-run unless told to
// apply, an allowlist of partitions and nodes, rate limits, and a fresh
// look at a node right before it is powered down.
//
// Implementations: actuator/slurmadapter (scontrol, squeue, sinfo) and
// actuator/simadapter (the simulated cluster of collector/sim).
package adapter

import (
	"context"
	"errors"
	"iter"
	"time"
)

// Scheduler is a cluster scheduler the actuator may act on. Implementations
// are safe for concurrent use.
type Scheduler interface {
	// Name identifies the scheduler kind in logs and the audit table
	// ("slurm", "sim").
	Name() string
	// Snapshot lists the pending jobs and every node.
	Snapshot(ctx context.Context) (Snapshot, error)
	// SetPriority sets a pending job's priority; higher starts first.
	SetPriority(ctx context.Context, jobID string, priority int64) error
	// PowerDown powers an idle node down. Implementations refuse, with an
	// error wrapping ErrNodeBusy, where the scheduler itself can tell the
	// node is busy at that moment.
	PowerDown(ctx context.Context, node string) error
	// PowerUp powers a node up; it takes jobs once it has woken.
	// Implementations that can tell the node is on or waking already send
	// nothing and return an error wrapping ErrAlreadyPowered.
	PowerUp(ctx context.Context, node string) error
}

// Snapshot is the scheduler's state at one moment.
type Snapshot struct {
	At    time.Time
	Jobs  []Job  // pending jobs, in the scheduler's order of submission
	Nodes []Node // every node, by name
}

// Job is a pending job.
type Job struct {
	ID   string
	Name string
	User string
	// Partition is the partition the job was submitted to; a job
	// submitted to several has them comma-separated, as Slurm reports them
	// ("gpu,other"). Partitions splits it.
	Partition string
	// GPUs are the GPUs the job asks for in all, on all its nodes.
	GPUs int
	// NodeCount is the number of nodes the job asks for; 0 when unknown.
	NodeCount int
	Submit    time.Time
	// TimeLimit is the job's limit; 0 when it has none.
	TimeLimit time.Duration
	// Priority is the job's current priority in the scheduler.
	Priority int64
	// Held: the job is held (Slurm: priority 0, or held by a user or an
	// admin). The actuator never changes a held job's priority (Slurm
	// refuses it) and does not count it as demand.
	Held bool
	// Ineligible: the job cannot start however many nodes are up — it
	// waits for a dependency, a begin time, or a QOS, association or
	// job-array limit; its partition is down or inactive, or its size or
	// time limit is over the partition's; its constraints cannot be met; or
	// it waits for a node it is bound for that is down or drained. The
	// actuator ranks it and sets its priority, but does not count it as
	// demand.
	Ineligible bool
	// Reason is the scheduler's word for why the job waits (Slurm's
	// state_reason: "Resources", "JobHeldUser", "Dependency",
	// "PartitionDown", …), by which the actuator counts the Held and
	// Ineligible jobs it leaves out of demand; "" when it gives none.
	Reason string
	// ArrayTasks is, for a pending job array whose tasks the scheduler has
	// not split into jobs of their own, the number of tasks this one job
	// stands for that may start (a throttle, --array=…%N, less the tasks
	// running, caps it); GPUs and NodeCount are each task's. 0 for any other
	// job, which is one task. PendingTasks reads it.
	ArrayTasks int
	// Nodes are nodes the job is bound for: required by the job or already
	// picked for it by the scheduler. They count as about to receive a job.
	Nodes []string
	// GPUType is the type of GPU the job asks for (Slurm's
	// --gres=gpu:a100:2 or --gpus=a100:2); "" for any.
	GPUType string
	// Constraint is the node features the job requires, in the
	// scheduler's syntax (Slurm's --constraint: "a100", "ib&nvme",
	// "a100|h100"); "" for none. Fits reads it.
	Constraint string
	// Unreadable says what of the job's record the adapter could not read
	// (its GPU request, the nodes it is bound for, its array's tasks); ""
	// when it read it all. What such a job needs and where it may start
	// are unknown, so the actuator guesses neither: it leaves the job's
	// priority alone, does not count it as demand (it counts it apart,
	// reason "unreadable"), and, unless the job is held or Ineligible
	// (its state reason, which is read apart, says it cannot start yet),
	// the Guard powers down no node of the partitions it was submitted to
	// (of any, when it names none) while it waits (ErrUnreadableJob). The
	// other jobs are ranked and planned for as usual.
	Unreadable string
}

// PendingTasks returns the tasks j stands for: ArrayTasks, at least 1.
func (j *Job) PendingTasks() int { return max(j.ArrayTasks, 1) }

// Partitions returns the partitions j was submitted to: Partition split on
// commas, spaces trimmed, empty names left out.
func (j *Job) Partitions() []string { return SplitPartitions(j.Partition) }

// PartitionSeq yields what Partitions returns without building a slice,
// for a pass over a long queue.
func (j *Job) PartitionSeq() iter.Seq[string] { return listSeq(j.Partition) }

// SplitPartitions splits a comma-separated list of partitions, as Slurm
// reports a job submitted to several, trimming spaces and leaving out empty
// names.
func SplitPartitions(s string) []string { return splitList(s) }

// Power is a node's power state.
type Power uint8

// Power states.
const (
	PowerUnknown   Power = iota
	PowerOn              // powered and ready
	PowerWaking          // powered up, not ready yet
	PowerGoingDown       // told to power down, not off yet
	PowerOff             // powered down
)

func (p Power) String() string {
	switch p {
	case PowerOn:
		return "on"
	case PowerWaking:
		return "waking"
	case PowerGoingDown:
		return "going_down"
	case PowerOff:
		return "off"
	}
	return "unknown"
}

// Powered reports whether a node in state p is on or on its way up: it
// counts as powered in a plan.
func (p Power) Powered() bool { return p == PowerOn || p == PowerWaking }

// Node is one node.
type Node struct {
	Name       string
	Partitions []string
	Power      Power
	// Busy: the node runs a job, has one allocated or is completing one.
	Busy bool
	// Unusable: down, drained, failed or otherwise not taking jobs for a
	// reason other than power saving; never touched.
	Unusable bool
	GPUs     int
	// FreeGPUs are the GPUs a new job could take now.
	FreeGPUs int
	// Jobs are the ids of the jobs that hold it — running, suspended,
	// completing or being configured — where the scheduler says. A node
	// with jobs is never powered down, even when its counters read idle (a
	// suspended job's CPUs are free, but the job still holds the node).
	Jobs []string
	// PowerSaveExcluded: the scheduler's own power saving must leave the
	// node on (Slurm's SuspendExcNodes, SuspendExcParts, SuspendExcStates),
	// e.g. because it has no working BMC to wake it. It is never powered
	// down; as it stands, it counts as powered capacity in a plan.
	PowerSaveExcluded bool
	// State is the scheduler's own word for the node's state, for reasons
	// and the audit table (e.g. "idle", "mixed+POWERING_DOWN", "down").
	State string
	// WakeAt is when a waking node is expected to be ready; zero when
	// unknown.
	WakeAt time.Time
	// GPUTypes are the node's GPUs by type, as the scheduler names them:
	// gres "gpu:a100:4,gpu:v100:2" is {a100: 4, v100: 2}, GPUs given
	// without a type are under ""; nil when the node has no GPU.
	GPUTypes map[string]int
	// FreeGPUTypes are FreeGPUs by type where the scheduler says which
	// type is in use (Slurm's gres_used, "gpu:a100:1(IDX:0),gpu:v100:0"),
	// under the names of GPUTypes; nil when it does not: a job of a type
	// then counts at most min(FreeGPUs, GPUTypes[type]) free.
	FreeGPUTypes map[string]int
	// Features are the node's active features (Slurm's active_features),
	// which a job's Constraint is matched against.
	Features []string
}

// Errors of schedulers and of the Guard. Check them with errors.Is.
var (
	// ErrNodeBusy: the node runs, has allocated or is about to receive a
	// job, so it is not powered down.
	ErrNodeBusy = errors.New("adapter: node is busy or about to receive a job")
	// ErrUnknownNode: the scheduler has no node of that name.
	ErrUnknownNode = errors.New("adapter: unknown node")
	// ErrUnknownJob: the scheduler has no pending job of that id; for a job
	// read from its queue, the job has started or ended since.
	ErrUnknownJob = errors.New("adapter: no pending job with that id")
	// ErrHeld: the job is held; its priority is never set (Slurm refuses
	// it, and a scheduler that took it might release the job).
	ErrHeld = errors.New("adapter: job is held")
	// ErrNotAllowed: the target is outside the allowlist.
	ErrNotAllowed = errors.New("adapter: target is not allowlisted")
	// ErrRateLimited: the action's rate limit is spent.
	ErrRateLimited = errors.New("adapter: rate limit reached")
	// ErrUnusable: the node is down, drained or failed for a reason other
	// than power saving.
	ErrUnusable = errors.New("adapter: node is not usable")
	// ErrPowerSaveExcluded: the scheduler's configuration excludes the node
	// from power saving (Node.PowerSaveExcluded), so it is not powered
	// down.
	ErrPowerSaveExcluded = errors.New("adapter: node is excluded from power saving by the scheduler's configuration")
	// ErrAlreadyPowered: a power-up found the node on or waking already
	// (it woke since the plan read it, e.g. the scheduler woke it for a
	// job), so nothing was sent.
	ErrAlreadyPowered = errors.New("adapter: node is already on or waking")
	// ErrUnreadableJob: a pending job that may start on the node has a
	// record the adapter could not read in full (Job.Unreadable), so
	// whether it needs the node is unknown and the node is not powered
	// down.
	ErrUnreadableJob = errors.New("adapter: a pending job the node may run could not be read")
)
