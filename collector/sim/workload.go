package sim

import (
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// JobSpec is one job to run on the simulated cluster: what a user submits and
// how it will turn out. The cmd layer converts imported traces into JobSpecs.
type JobSpec struct {
	// ID identifies the job; "" lets the simulator number it. An ID that is
	// already pending or running is rejected.
	ID string
	// Name is the job's name (Helios: jobs with similar names recur with
	// similar run times).
	Name string
	// User submits the job.
	User string
	// VC is the virtual cluster the job runs in (its partition); "" means any
	// node of the cluster.
	VC string
	// GPUs is how many GPUs the job uses, at least 1. A job of at most one
	// node's GPUs runs on one node; a larger one on whole nodes.
	GPUs int
	// GPUType is the GPU type the job asks for (Slurm's
	// --gres=gpu:a100:2): it runs only on its VC's nodes of that type.
	// "" runs on any node of its VC, in a VC that mixes GPU types on
	// nodes of more than one.
	GPUType string
	// Submit is when the job is submitted, after the simulation's start.
	Submit time.Duration
	// Duration is how long the job runs once started, rounded up to whole
	// seconds.
	Duration time.Duration
	// TimeLimit is the job's limit; 0 means none. A job whose Duration
	// exceeds it ends at the limit with state TIMEOUT.
	TimeLimit time.Duration
	// State is the state the job ends in (COMPLETED, FAILED, CANCELLED, …);
	// 0 means COMPLETED. As in Helios traces, a failed or cancelled job
	// still runs for its Duration before it ends.
	State schemas.JobState
	// Priority is the job's initial priority; higher starts first.
	Priority int64
}

// Workload yields jobs in order of submission.
type Workload interface {
	// Next returns the next job, and false once there are no more. Submit
	// times must not decrease from one job to the next; a job that goes
	// back in time is submitted at the time of the one before it.
	Next() (JobSpec, bool)
}

// Jobs returns a Workload of the given jobs, in order of submission (ties in
// the order given). It copies jobs.
func Jobs(jobs []JobSpec) Workload {
	l := &jobList{jobs: slices.Clone(jobs)}
	slices.SortStableFunc(l.jobs, func(a, b JobSpec) int {
		switch {
		case a.Submit < b.Submit:
			return -1
		case a.Submit > b.Submit:
			return 1
		}
		return 0
	})
	return l
}

type jobList struct {
	jobs []JobSpec
	i    int
	fp   string // fingerprint, once computed
}

// fingerprint identifies the list by its jobs' ids and submit times, so
// that Restore continues only the replay of the same list. It is computed
// once: a trace's list holds up to hundreds of thousands of jobs, and every
// state snapshot asks.
func (l *jobList) fingerprint() string {
	if l.fp == "" {
		l.fp = l.computeFingerprint()
	}
	return l.fp
}

func (l *jobList) computeFingerprint() string {
	h := fnv.New64a()
	for _, j := range l.jobs {
		fmt.Fprintf(h, "%s\x00%d\x00", j.ID, j.Submit)
	}
	return fmt.Sprintf("jobs/%d/%016x", len(l.jobs), h.Sum64())
}

func (l *jobList) Next() (JobSpec, bool) {
	if l.i >= len(l.jobs) {
		return JobSpec{}, false
	}
	l.i++
	return l.jobs[l.i-1], true
}
