package sim

import (
	"slices"
	"time"
)

// Pending returns the jobs waiting to start, in order of submission, as a
// Policy sees them (Submit in simulated time), for actuators that set
// priorities.
func (s *Sim) Pending() []PendingJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catchUp()
	out := make([]PendingJob, 0, len(s.pending))
	for _, j := range s.pending {
		v := j.view()
		v.Submit = v.Submit.In(s.cfg.Start.Location())
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b PendingJob) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	return out
}

// view is what a Policy sees of the pending job j.
func (j *job) view() PendingJob {
	return PendingJob{
		ID: j.id, Name: j.spec.Name, User: j.spec.User, VC: j.spec.VC, GPUs: j.spec.GPUs, GPUType: j.spec.GPUType,
		Submit: time.Unix(j.submit, 0), TimeLimit: j.spec.TimeLimit, Priority: j.priority, Seq: j.seq,
	}
}
