// Package qssf orders pending jobs by Quasi-Shortest-Service-First (Helios,
// SC'21): the job with the smallest predicted GPU service time — predicted
// run time × GPUs — goes first, so that many small jobs do not wait behind a
// few large ones.
//
// Pure shortest-first starves a large job while smaller ones keep arriving,
// so the order ages jobs: a job's score is its service time minus AgingRate
// × the time it has waited, smallest first. Since every job's score falls at
// the same rate, the order of two pending jobs never changes with time, and
// a job K submitted after J goes ahead of J only if
//
//	K.Submit − J.Submit < (service(J) − service(K)) / AgingRate ≤ service(J) / AgingRate.
//
// That is the bound: J is overtaken only by jobs submitted less than
// service(J)/AgingRate after it (its "overtaking window"); every later
// arrival queues behind it. Ahead of J there is then a finite set of jobs,
// each of which starts in turn, so J starts.
//
// A hard wait limit that sends old jobs to the front in order of submission
// is the other common rule; under a blocking queue it was tried and
// collapses into FIFO on loaded traces (the aged jobs block the queue, more
// jobs age), so it is not used.
//
// The same ordering serves the trace replay (actuator/replay, through Queue),
// the live simulated cluster (Policy) and the advisory API (Config.Rank).
package qssf

import (
	"cmp"
	"flag"
	"fmt"
	"math"
	"slices"
	"time"
)

// DefaultAgingRate is the default Config.AgingRate, in GPU·seconds of
// service per second of waiting.
const DefaultAgingRate = 0.1

// Bounds of Config.AgingRate.
const (
	minAgingRate = 1e-6
	maxAgingRate = 1e9
)

// Config is the QSSF policy's configuration.
type Config struct {
	// AgingRate is how much a second of waiting is worth in GPU·seconds
	// of predicted service: a job's score is service − AgingRate × wait.
	// A job is overtaken only by jobs submitted less than its service /
	// AgingRate after it. Default 0.1: a 1-GPU job predicted to run an
	// hour is overtaken only by jobs submitted within 10 hours after it,
	// an 8-GPU one of a day only within 80 days — the bound grows with
	// the job, which is what lets QSSF keep wide jobs from blocking the
	// queue. Between 1e-6 and 1e9. (On the Venus, CTC and HPC2N replays,
	// rates of 0.01–0.1 gave the best average JCT; from 0.2 on Venus and
	// 1 on CTC aged wide jobs block the queue and it rises sharply.)
	AgingRate float64
}

// RegisterFlags registers --qssf.aging-rate on fs, with the default filled
// in.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Float64Var(&c.AgingRate, "qssf.aging-rate", DefaultAgingRate,
		"QSSF aging: GPU-seconds of predicted service that one second of waiting is worth; a job is overtaken only by jobs submitted less than its service / rate after it")
}

// Validate reports an invalid field, named by its flag. Zero means the
// default.
func (c Config) Validate() error {
	r := c.AgingRate
	if math.IsNaN(r) || r != 0 && (r < minAgingRate || r > maxAgingRate) {
		return fmt.Errorf("qssf: --qssf.aging-rate: %v is not between %g and %g", r, minAgingRate, maxAgingRate)
	}
	return nil
}

func (c Config) rate() float64 {
	if c.AgingRate == 0 {
		return DefaultAgingRate
	}
	return c.AgingRate
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

// epoch is the origin of keys: scores at a fixed time, so that they do not
// change as time passes.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Key returns j's time-invariant sort key: its score at the epoch,
// service + AgingRate × (submit − 2000-01-01) in seconds. Smaller goes
// first; the score at time now is Key − AgingRate × (now − epoch).
func (c Config) Key(j *Job) float64 {
	return j.Service() + c.rate()*j.Submit.Sub(epoch).Seconds()
}

// Window returns how long after j's submission later jobs may still be
// ranked ahead of it: service(j) / AgingRate (saturating).
func (c Config) Window(j *Job) time.Duration {
	return durationOf(j.Service() / c.rate())
}

// Compare orders a and b: negative when a goes first. By Key, then
// submission; jobs equal in both compare 0 (Rank keeps their input order).
// The order does not depend on the time.
func (c Config) Compare(a, b *Job) int { return compareKeyed(c.Key(a), c.Key(b), a, b) }

// compareKeyed is Compare with a's and b's keys given (ka, kb).
func compareKeyed(ka, kb float64, a, b *Job) int {
	if r := cmp.Compare(ka, kb); r != 0 {
		return r
	}
	return a.Submit.Compare(b.Submit)
}

// Ranked is a Job with its place in the QSSF order.
type Ranked struct {
	Job
	// Rank is the job's place in the order, from 1.
	Rank int
	// ServiceTime is Job.Service() as a duration of GPU time (saturating
	// at the largest Duration).
	ServiceTime time.Duration
	// Score is service − AgingRate × waited, in GPU·seconds: the order is
	// by Score, smallest first.
	Score float64
	// Waited is how long the job has been pending (negative if submitted
	// after now).
	Waited time.Duration
	// Window is how long after its submission other jobs may still be
	// ranked ahead of it (Config.Window).
	Window time.Duration
}

// Order returns the indexes of jobs in QSSF order: jobs[Order[0]] goes
// first. Jobs that compare equal keep their input order.
func (c Config) Order(jobs []Job) []int {
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	// Compare's order, each key computed once rather than at every
	// comparison.
	keys := make([]float64, len(jobs))
	for i := range jobs {
		keys[i] = c.Key(&jobs[i])
	}
	slices.SortStableFunc(idx, func(a, b int) int { return compareKeyed(keys[a], keys[b], &jobs[a], &jobs[b]) })
	return idx
}

// Rank returns jobs in QSSF order (Order), ranked from 1, with their scores
// at time now. jobs is not modified.
func (c Config) Rank(now time.Time, jobs []Job) []Ranked {
	out := make([]Ranked, 0, len(jobs))
	for k, i := range c.Order(jobs) {
		j := jobs[i]
		r := Ranked{Job: j, Rank: k + 1, Waited: now.Sub(j.Submit), Window: c.Window(&j)}
		svc := j.Service()
		r.ServiceTime = durationOf(svc)
		r.Score = svc - c.rate()*r.Waited.Seconds()
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
