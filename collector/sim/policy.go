package sim

import (
	"slices"
	"time"
)

// PendingJob is what a Policy sees of a job waiting to start.
type PendingJob struct {
	ID        string
	Name      string
	User      string
	VC        string
	GPUs      int
	GPUType   string    // the GPU type asked for; "" for any (JobSpec.GPUType)
	Submit    time.Time // simulated time
	TimeLimit time.Duration
	Priority  int64
	// Seq numbers jobs in order of submission, from 1.
	Seq int64
}

// Policy orders the queue of pending jobs. The scheduler then starts jobs
// in that order, higher Priority first (a stable sort on top of the
// policy's order), without backfilling: a job that does not fit holds back
// the jobs after it in its virtual cluster.
type Policy interface {
	// Name identifies the policy in logs, e.g. "fifo".
	Name() string
	// Order sorts jobs, in place, into the order in which they should
	// start. It must only reorder the slice.
	Order(jobs []PendingJob)
}

// FIFO is first in, first out: in order of submission.
type FIFO struct{}

// Name returns "fifo".
func (FIFO) Name() string { return "fifo" }

// Order sorts jobs by submission.
func (FIFO) Order(jobs []PendingJob) {
	slices.SortFunc(jobs, func(a, b PendingJob) int {
		if c := a.Submit.Compare(b.Submit); c != 0 {
			return c
		}
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
}
