package loop

import (
	"cmp"
	"slices"
	"sync/atomic"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/ces"
	"github.com/heliostat-dev/heliostat/actuator/qssf"
)

// View is what the latest pass saw and decided, for the advisory API. It is
// immutable once published.
type View struct {
	// At is the scheduler's time of the pass.
	At      time.Time `json:"at"`
	Adapter string    `json:"adapter"`
	// Apply is false in a dry run.
	Apply bool `json:"apply"`
	// Queue is the pending queue in QSSF order (held jobs left out).
	Queue []QueueEntry `json:"queue"`
	// Plans are the power plans, one per partition, in name order; a last
	// entry with an empty partition lists the nodes in several partitions
	// (or none), which no plan touches.
	Plans []PoolPlan `json:"plans"`
	// QSSF is the policy the queue was ranked with.
	QSSF qssf.Config `json:"-"`
	// keys are the queue's QSSF keys with their submission times, in
	// qssf.Compare's order, for ranking a new job.
	keys []rankKey
}

// rankKey is what qssf.Compare orders a job by: its key, then its
// submission.
type rankKey struct {
	key    float64
	submit time.Time
}

func compareRankKeys(a, b rankKey) int {
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c
	}
	return a.submit.Compare(b.submit)
}

// QueueEntry is one pending job in the ranked queue.
type QueueEntry struct {
	Rank         int       `json:"rank"`
	JobID        string    `json:"job_id"`
	User         string    `json:"user"`
	Partition    string    `json:"partition"` // comma-separated when the job was submitted to several
	GPUs         int       `json:"gpus"`
	Submit       time.Time `json:"submit_time"`
	PredictedS   float64   `json:"predicted_s"`
	LowerS       float64   `json:"lower_s"`
	UpperS       float64   `json:"upper_s"`
	Source       string    `json:"source"`
	ModelVersion uint64    `json:"model_version"`
	GPUServiceS  float64   `json:"gpu_service_s"`
	// Score is service − aging × wait at the pass: the order is by Score.
	Score float64 `json:"score"`
	// Priority is the job's priority in the scheduler; TargetPriority the
	// one QSSF maps it to (see Priority).
	Priority       int64 `json:"priority"`
	TargetPriority int64 `json:"target_priority"`
	// Managed: the job's partition is allowlisted, so its priority is set.
	Managed bool `json:"managed"`
}

// PoolPlan is one partition's power plan.
type PoolPlan struct {
	Partition string `json:"partition"`
	// Managed: the partition is allowlisted, so the plan is acted on.
	Managed bool `json:"managed"`
	// Nodes counts the partition's nodes.
	Nodes int `json:"nodes"`
	// Unusable are nodes down, drained or failed for reasons other than
	// power saving; Transitioning are nodes going down or in a state the
	// adapter does not know. Plans leave both alone.
	Unusable      []string `json:"unusable,omitempty"`
	Transitioning []string `json:"transitioning,omitempty"`
	// Fixed are nodes the plan counts as they stand but may not power:
	// the scheduler's power saving excludes them (Slurm's SuspendExcNodes,
	// SuspendExcParts, SuspendExcStates), or, in a managed partition,
	// --actuator.nodes does not allow them.
	Fixed []string `json:"fixed,omitempty"`
	// UnreadableJobs are the pending jobs submitted to the partition (or
	// naming none) that the adapter could not read in full
	// (adapter.Job.Unreadable) and that are neither held nor Ineligible:
	// while any waits, the guard refuses the plan's power-downs.
	UnreadableJobs []string `json:"unreadable_jobs,omitempty"`
	// Excluded are nodes in several partitions (or none); only in the last
	// entry, whose Partition is "".
	Excluded []string `json:"excluded,omitempty"`
	// ForecastKind says which forecast the plan read (the demand model or
	// the watched peak, and why not the model).
	ForecastKind string `json:"forecast_kind,omitempty"`
	// KindUse is, where the partition's nodes are of several kinds, each
	// kind's recent use in nodes (busy, incoming or needed; ces.Input.KindUse),
	// by which the plan spreads the idle nodes it keeps.
	KindUse map[string]float64 `json:"kind_use,omitempty"`
	// Plan is nil when it could not be made; Error says why.
	Plan  *ces.Plan `json:"plan,omitempty"`
	Error string    `json:"error,omitempty"`
}

func (v *View) sortKeys() {
	v.keys = make([]rankKey, len(v.Queue))
	for i, q := range v.Queue {
		j := qssf.Job{GPUs: q.GPUs, Submit: q.Submit, Predicted: time.Duration(q.PredictedS * float64(time.Second))}
		v.keys[i] = rankKey{v.QSSF.Key(&j), q.Submit}
	}
	slices.SortFunc(v.keys, compareRankKeys)
}

// RankOf returns the place a job j would take in the queue (from 1) and the
// queue's length: one plus the jobs ranked strictly ahead of it, by key
// and, among equal keys, by submission (qssf.Compare).
func (v *View) RankOf(j *qssf.Job) (rank, of int) {
	n, _ := slices.BinarySearchFunc(v.keys, rankKey{v.QSSF.Key(j), j.Submit}, compareRankKeys)
	return n + 1, len(v.keys) + 1
}

// NewView returns a View of a ranked queue and plans, e.g. for tests and
// benchmarks of the API; the loop builds its own.
func NewView(at time.Time, adapter string, apply bool, c qssf.Config, queue []QueueEntry, plans []PoolPlan) *View {
	v := &View{At: at, Adapter: adapter, Apply: apply, QSSF: c, Queue: queue, Plans: plans}
	v.sortKeys()
	return v
}

type viewBox struct{ p atomic.Pointer[View] }

func (b *viewBox) store(v *View) { b.p.Store(v) }
func (b *viewBox) load() *View   { return b.p.Load() }
