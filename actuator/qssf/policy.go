package qssf

import (
	"time"

	"github.com/heliostat-dev/heliostat/collector/sim"
)

// Policy is QSSF as the live simulated cluster's scheduling policy
// (collector/sim.Policy): the queue is put in the order of Config.Order, the
// same code that ranks for the advisory API and the trace replay. The order
// does not depend on the time (scores age at one rate), so the simulator's
// clock is not needed.
type Policy struct {
	Config Config
	// Predict returns a pending job's predicted run time. It is called
	// with the simulator's lock held, so it must not call back into the
	// simulator. Nil predicts each job's time limit (0 when it has none,
	// which leaves such jobs in order of submission).
	Predict func(j *sim.PendingJob) time.Duration

	jobs []Job
	tmp  []sim.PendingJob
}

var _ sim.Policy = (*Policy)(nil)

// Name returns "qssf".
func (*Policy) Name() string { return "qssf" }

// Order sorts jobs, in place, in QSSF order. Jobs that compare equal keep
// the simulator's order (of arrival).
func (p *Policy) Order(jobs []sim.PendingJob) {
	p.jobs = p.jobs[:0]
	for i := range jobs {
		j := &jobs[i]
		pred := j.TimeLimit
		if p.Predict != nil {
			pred = p.Predict(j)
		}
		p.jobs = append(p.jobs, Job{ID: j.ID, User: j.User, VC: j.VC, GPUs: j.GPUs, Submit: j.Submit, Predicted: pred})
	}
	p.tmp = append(p.tmp[:0], jobs...)
	for k, i := range p.Config.Order(p.jobs) {
		jobs[k] = p.tmp[i]
	}
}
