// Package qssf orders pending jobs by Quasi-Shortest-Service-First (Helios,
// SC'21): the job with the smallest predicted GPU service time — predicted
// run time × GPUs — goes first, so that many small jobs do not wait behind a
// few large ones.
//
// Pure shortest-first starves a large job while smaller ones keep arriving,
// so the order has an aging rule with a stated bound: a job that has waited
// at least MaxWait is "aged" and goes ahead of every job that is not; aged
// jobs go in order of submission. Hence once a job has waited MaxWait, no job
// submitted after it is ranked ahead of it again: it is overtaken only by
// jobs submitted before it, or less than MaxWait after it.
//
// The same ordering serves the trace replay (actuator/replay, through Queue),
// the live simulated cluster (Policy) and the advisory API (Config.Rank).
package qssf

import (
	"flag"
	"fmt"
	"math"
	"slices"
	"time"
)

// DefaultMaxWait is the default Config.MaxWait.
const DefaultMaxWait = 24 * time.Hour

// Bounds of Config.MaxWait.
const (
	minMaxWait = time.Minute
	maxMaxWait = 366 * 24 * time.Hour
)

// Config is the QSSF policy's configuration.
type Config struct {
	// MaxWait is the aging bound: a job that has waited at least this long
	// goes ahead of every job that has waited less. Default 24h; between
	// 1m and 366 days.
	MaxWait time.Duration
}

// RegisterFlags registers --qssf.max-wait on fs, with the default filled in.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.MaxWait, "qssf.max-wait", DefaultMaxWait,
		"aging bound of QSSF: a job pending this long goes ahead of every job pending less, in order of submission")
}

// Validate reports an invalid field, named by its flag. Zero means the
// default.
func (c Config) Validate() error {
	if c.MaxWait != 0 && (c.MaxWait < minMaxWait || c.MaxWait > maxMaxWait) {
		return fmt.Errorf("qssf: --qssf.max-wait: %v is not between %v and %v", c.MaxWait, minMaxWait, maxMaxWait)
	}
	return nil
}

func (c Config) maxWait() time.Duration {
	if c.MaxWait == 0 {
		return DefaultMaxWait
	}
	return c.MaxWait
}

// Job is a pending job as QSSF sees it.
type Job struct {
	ID   string
	User string
	VC   string
	// GPUs is the job's GPUs (or processors); below 1 counts as 1.
	GPUs   int
	Submit time.Time
	// Predicted is the job's predicted run time; below 0 counts as 0.
	Predicted time.Duration
}

// Service returns j's predicted GPU service time in GPU·seconds: predicted
// run time × max(GPUs, 1).
func (j *Job) Service() float64 {
	return ServiceSeconds(j.Predicted, j.GPUs)
}

// ServiceSeconds returns predicted × max(gpus, 1) in GPU·seconds, predicted
// below 0 counting as 0.
func ServiceSeconds(predicted time.Duration, gpus int) float64 {
	return math.Max(0, predicted.Seconds()) * float64(max(gpus, 1))
}

// Ranked is a Job with its place in the QSSF order.
type Ranked struct {
	Job
	// Rank is the job's place in the order, from 1.
	Rank int
	// ServiceTime is Job.Service() as a duration of GPU time (saturating
	// at the largest Duration).
	ServiceTime time.Duration
	// Score is the sort key within the job's class: GPU·seconds of
	// service time, smallest first, for a job that is not aged; for an
	// aged one the seconds it has waited, largest first.
	Score float64
	// Waited is how long the job has been pending (0 if submitted after
	// now).
	Waited time.Duration
	// Aged reports that the job has waited MaxWait or more and so goes
	// ahead of every job that has not.
	Aged bool
}

// Aged reports whether a job submitted at submit is aged at now.
func (c Config) Aged(now, submit time.Time) bool {
	return now.Sub(submit) >= c.maxWait()
}

// Compare orders a and b at time now: negative when a goes first. Aged
// jobs go first, oldest submission first; the others by service time,
// then submission. Jobs equal in all of these compare 0 (Rank then keeps
// their input order).
func (c Config) Compare(now time.Time, a, b *Job) int {
	aa, ab := c.Aged(now, a.Submit), c.Aged(now, b.Submit)
	switch {
	case aa && !ab:
		return -1
	case ab && !aa:
		return 1
	case !aa:
		sa, sb := a.Service(), b.Service()
		if sa < sb {
			return -1
		}
		if sa > sb {
			return 1
		}
	}
	return a.Submit.Compare(b.Submit)
}

// Order returns the indexes of jobs in QSSF order at time now: jobs[Order[0]]
// goes first. Jobs that compare equal keep their input order.
func (c Config) Order(now time.Time, jobs []Job) []int {
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return c.Compare(now, &jobs[a], &jobs[b]) })
	return idx
}

// Rank returns jobs in QSSF order at time now (Order), ranked from 1. jobs
// is not modified.
func (c Config) Rank(now time.Time, jobs []Job) []Ranked {
	out := make([]Ranked, 0, len(jobs))
	for k, i := range c.Order(now, jobs) {
		j := jobs[i]
		r := Ranked{Job: j, Rank: k + 1, Aged: c.Aged(now, j.Submit)}
		if w := now.Sub(j.Submit); w > 0 {
			r.Waited = w
		}
		svc := j.Service()
		r.ServiceTime = durationOf(svc)
		r.Score = svc
		if r.Aged {
			r.Score = r.Waited.Seconds()
		}
		out = append(out, r)
	}
	return out
}

// durationOf converts seconds to a Duration, saturating.
func durationOf(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}
