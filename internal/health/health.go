// Package health tracks whether a component can do its work, from the
// outcomes its parts report, for the /-/ready probe: each Cond is one thing
// the component depends on (a broker, a database, its last pass), failing
// from its first failure until its next success.
package health

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Status is the readiness of one component: ready once every condition
// has succeeded and none is failing now. The zero value is not usable; use
// New. A nil *Status reports ready and hands out nil conditions, which
// ignore what they are told, so code that reports health runs without one.
type Status struct {
	now   func() time.Time
	mu    sync.Mutex
	conds []*Cond
}

// New returns an empty Status reading time from now.
func New(now func() time.Time) *Status { return &Status{now: now} }

// Cond is one condition of a Status.
type Cond struct {
	s       *Status
	name    string
	waiting string        // why it is not ready before its first outcome
	ttl     time.Duration // a failure not repeated within ttl is over; 0: until the next success
	seen    bool          // an outcome was reported
	err     error         // the last failure, nil while it holds
	since   time.Time     // when the current run of failures began
	last    time.Time     // when the last failure was reported
}

// Add adds a condition named name (what it depends on: "kafka",
// "clickhouse"). Until its first outcome it is not ready, for the reason
// waiting ("joining consumer group heliostat-ingest"); an empty waiting
// makes it ready until it fails.
func (s *Status) Add(name, waiting string) *Cond {
	return s.add(name, waiting, 0)
}

// AddExpiring is Add for a condition whose callers report failures as they
// happen but may have nothing to report once it recovers (a reader of an
// idle topic): a failure not reported again within ttl is taken as over.
func (s *Status) AddExpiring(name string, ttl time.Duration) *Cond {
	return s.add(name, "", ttl)
}

func (s *Status) add(name, waiting string, ttl time.Duration) *Cond {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &Cond{s: s, name: name, waiting: waiting, ttl: ttl, seen: waiting == ""}
	s.conds = append(s.conds, c)
	return c
}

// OK records a success: the condition holds.
func (c *Cond) OK() {
	if c == nil {
		return
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.seen, c.err = true, nil
}

// Report records the outcome of one attempt: a failure, or a success
// when err is nil.
func (c *Cond) Report(err error) {
	if c == nil {
		return
	}
	if err == nil {
		c.OK()
		return
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	now := c.s.now()
	if c.err == nil || c.expired(now) {
		c.since = now
	}
	c.seen, c.err, c.last = true, err, now
}

func (c *Cond) expired(now time.Time) bool {
	return c.ttl > 0 && now.Sub(c.last) > c.ttl
}

// Err returns nil when the component is ready, and otherwise an error
// naming each condition that is not, since when and why:
// "clickhouse: failing for 42s (since 12:00:01Z): dial tcp …: connection refused".
func (s *Status) Err() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var errs []error
	for _, c := range s.conds {
		switch {
		case !c.seen:
			errs = append(errs, fmt.Errorf("%s: %s", c.name, c.waiting))
		case c.err == nil, c.expired(now):
		default:
			errs = append(errs, fmt.Errorf("%s: failing for %s (since %s): %w", c.name,
				now.Sub(c.since).Round(time.Second), c.since.UTC().Format(time.RFC3339), c.err))
		}
	}
	return errors.Join(errs...)
}

// Gauge returns the heliostat_ready gauge of a component whose readiness
// ready reports (what its /-/ready or /readyz answers): 1 while ready returns
// nil, 0 otherwise, asked at every scrape. Prometheus does not probe
// /-/ready itself, so this is what an alert on a component that stays
// unready (HeliostatNotReady) reads.
func Gauge(ready func() error) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "heliostat_ready",
		Help: "1 while the component's readiness probe (/-/ready, the actuator's /readyz) answers 200, 0 while it answers 503; the probe's body says why.",
	}, func() float64 {
		if ready() != nil {
			return 0
		}
		return 1
	})
}

// StartWaiting returns heliostat_start_waiting, by dependency: 1 while a
// part, starting, waits for a dependency it cannot run without, 0 once it
// has it. The parts that wait for ClickHouse register it
// (HeliostatWaitingForClickHouse reads it).
func StartWaiting() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "heliostat_start_waiting",
		Help: "1 while this part, starting, waits for a dependency it cannot run without (clickhouse: reachable, and the schema migrated); 0 once it has it. The readiness probe says why.",
	}, []string{"dependency"})
}
