package sim

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// stopFlushTimeout bounds the publishing of what is left when Run returns.
const stopFlushTimeout = 5 * time.Second

// Run simulates until ctx ends, or until Config.Duration of simulated time
// has passed, or, at Speedup 0 without a Duration, until the workload is done
// and no job is left running. The simulated clock runs Speedup times as fast
// as now, the real clock; at Speedup 0 it runs as fast as the machine goes.
// Run publishes as it goes, at least once a real second. When it returns,
// the simulated cluster goes away: running jobs end as NODE_FAIL, pending
// ones as CANCELLED (unless Config.KeepJobs: then they stay open, for
// Snapshot), and what is left is published with up to 5s for it.
// A failed publish is counted and logged, and Run goes on; Run returns nil
// unless it is already running (ErrRunning).
func (s *Sim) Run(ctx context.Context) error {
	if !s.runMu.TryLock() {
		return ErrRunning
	}
	defer s.runMu.Unlock()
	// A publish must not be cut short by shutdown: publish.Publisher would
	// spool a message whose write was cancelled and send it again.
	pctx := context.WithoutCancel(ctx)
	fast := s.cfg.Speedup == 0
	s.mu.Lock()
	endT := int64(math.MaxInt64)
	if s.cfg.Duration > 0 {
		endT = s.t0 + int64(math.Ceil(s.cfg.Duration.Seconds()))
	}
	if !fast {
		s.live, s.realStart, s.realBase, s.endT = true, s.now(), s.t, endT
	}
	start := s.t
	s.mu.Unlock()
	s.logger.Info("sim started", "cluster", s.cfg.Cluster, "nodes", len(s.nodes), "gpus_per_node", s.cfg.GPUsPerNode,
		"vcs", s.cfg.VCs, "speedup", s.cfg.Speedup, "policy", s.pol.Name(), "sim_time", time.Unix(start, 0).UTC())

	timer := time.NewTimer(flushPeriod)
	defer timer.Stop()
	for {
		s.mu.Lock()
		var reached, finished bool
		if fast {
			reached = s.advance(endT, s.cfg.Duration == 0)
			finished = reached
		} else {
			reached = s.advance(min(s.vnow(), endT), false)
			finished = reached && s.t >= endT
		}
		s.mu.Unlock()
		s.flush(pctx)
		if finished || ctx.Err() != nil {
			break
		}
		if !reached {
			continue
		}
		timer.Reset(flushPeriod)
		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-timer.C:
		}
	}

	s.mu.Lock()
	s.catchUp()
	s.live = false
	s.stop()
	st, submitted, finished := s.t, s.submitted, s.finished
	s.mu.Unlock()
	fctx, cancel := context.WithTimeout(pctx, stopFlushTimeout)
	defer cancel()
	s.flush(fctx)
	s.logger.Info("sim stopped", "sim_time", time.Unix(st, 0).UTC(), "submitted", submitted, "finished", finished)
	return nil
}

// Advance runs the simulation up to the simulated time until, as fast as
// it goes whatever the Speedup, publishes what happened, and returns. Tests
// and replays drive the clock with it. Unlike Run it leaves jobs running,
// so that it can be called again to go on. It returns ctx's error if ctx
// ends first, and ErrRunning while Run or another Advance runs.
func (s *Sim) Advance(ctx context.Context, until time.Time) error {
	if !s.runMu.TryLock() {
		return ErrRunning
	}
	defer s.runMu.Unlock()
	target := until.Unix()
	pctx := context.WithoutCancel(ctx)
	for {
		s.mu.Lock()
		reached := s.advance(target, false)
		s.mu.Unlock()
		s.flush(pctx)
		if reached {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// vnow returns the simulated time that the real clock says it is.
func (s *Sim) vnow() int64 {
	el := s.now().Sub(s.realStart).Seconds() * s.cfg.Speedup
	return max(s.t, s.realBase+int64(el))
}

// catchUp brings the simulation up to the real clock's simulated time, but
// not past the end of Run's --sim.duration, so that an action takes effect
// when it is made; without Run's real-time clock, it takes effect at the
// time reached. The outbox may grow past its bounds; flush splits what it
// holds.
func (s *Sim) catchUp() {
	if !s.live {
		return
	}
	target := min(s.vnow(), s.endT)
	for !s.advance(target, false) {
	}
}

// poke wakes Run to publish what an action produced.
func (s *Sim) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// flush publishes everything in the outbox: each job's events as one
// message, each job's allocation records as one message, and each node's
// samples in messages of at most maxSamplesPerMessage. A message the
// publisher refuses is counted and logged and not retried (the publisher
// spools while the brokers are down and refuses only when its spool is full).
func (s *Sim) flush(ctx context.Context) {
	s.mu.Lock()
	s.out, s.spare = s.spare, s.out
	s.mu.Unlock()
	o := s.spare
	defer o.reset()

	groupByJob(o.jobs, func(e schemas.JobEvent) string { return e.JobID }, func(evs []schemas.JobEvent) {
		s.count(schemas.TopicJobEvents, s.jp.PublishJob(ctx, evs))
	})
	groupByJob(o.allocs, func(a schemas.Alloc) string { return a.JobID }, func(as []schemas.Alloc) {
		s.count(schemas.TopicAllocations, s.jp.PublishAllocs(ctx, string(schemas.JobKey(s.cfg.Cluster, as[0].JobID)), as))
	})
	for i := range o.samples {
		b := &o.samples[i]
		for lo := 0; lo < len(b.Samples); lo += maxSamplesPerMessage {
			chunk := schemas.SampleBatch{Cluster: b.Cluster, Host: b.Host, GPUs: b.GPUs,
				Samples: b.Samples[lo:min(lo+maxSamplesPerMessage, len(b.Samples))]}
			var err error
			if s.buf, err = schemas.AppendSampleBatch(s.buf[:0], &chunk); err == nil {
				err = s.pub.Publish(ctx, schemas.TopicGPUSamples, []byte(b.Host), s.buf)
			}
			s.count(schemas.TopicGPUSamples, err)
		}
	}
}

// count counts a publish and logs a failure, throttled.
func (s *Sim) count(topic string, err error) {
	if err == nil {
		s.m.messages.WithLabelValues(topic, outcomePublished).Inc()
		return
	}
	s.m.messages.WithLabelValues(topic, outcomeFailed).Inc()
	if n, ok := s.logs.Note("publish", s.now(), 1); ok {
		s.logger.Warn("publish failed, message dropped", "topic", topic, "err", err, "messages", n)
	}
}

// groupByJob calls fn with the items of each job, jobs in order of their
// first item, items in order. It reorders items.
func groupByJob[T any](items []T, id func(T) string, fn func([]T)) {
	if len(items) == 0 {
		return
	}
	first := make(map[string]int)
	for _, it := range items {
		if _, ok := first[id(it)]; !ok {
			first[id(it)] = len(first)
		}
	}
	slices.SortStableFunc(items, func(a, b T) int { return first[id(a)] - first[id(b)] })
	lo := 0
	for i := 1; i <= len(items); i++ {
		if i == len(items) || id(items[i]) != id(items[lo]) {
			fn(items[lo:i])
			lo = i
		}
	}
}
