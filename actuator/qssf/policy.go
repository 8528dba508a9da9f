package qssf

import (
	"time"

	"github.com/heliostat-dev/heliostat/collector/sim"
)

// Policy is QSSF as the live simulated cluster's scheduling policy
// (collector/sim.TimedPolicy): the simulator calls OrderAt with its
// simulated time, and the queue is put in the order of Config.Order.
type Policy struct {
	Config Config
	// Predict returns a pending job's predicted run time. It is called
	// with the simulator's lock held, so it must not call back into the
	// simulator. Nil predicts each job's time limit (0 when it has none,
	// which makes QSSF order by submission among jobs without one).
	Predict func(j *sim.PendingJob) time.Duration
	// Now is the clock of Order, for callers other than the simulator;
	// nil means time.Now.
	Now func() time.Time

	jobs []Job
	tmp  []sim.PendingJob
}

// Name returns "qssf".
func (*Policy) Name() string { return "qssf" }

// Order sorts jobs in QSSF order at p.Now().
func (p *Policy) Order(jobs []sim.PendingJob) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	p.OrderAt(now(), jobs)
}

// OrderAt sorts jobs, in place, in QSSF order at now. Jobs that compare
// equal keep the simulator's order (of arrival).
func (p *Policy) OrderAt(now time.Time, jobs []sim.PendingJob) {
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
	for k, i := range p.Config.Order(now, p.jobs) {
		jobs[k] = p.tmp[i]
	}
}

var _ sim.TimedPolicy = (*Policy)(nil)
