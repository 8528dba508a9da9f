// Package logthrottle limits recurring log lines. Per-message and per-poll
// paths count every failure in a metric; the log only needs to say, now and
// then, that something keeps happening and how often. Every component that
// logs on such a path (collector, publisher, ingest, the Slurm source, the
// attributor, the simulator) uses one Throttle keyed by what went wrong.
package logthrottle

import (
	"sync"
	"time"
)

// Throttle lets through at most one line per key per Every. The zero value
// lets everything through; it is safe for concurrent use.
type Throttle struct {
	Every time.Duration
	mu    sync.Mutex
	keys  map[string]*entry
}

type entry struct {
	last time.Time
	n    int // occurrences since the last line
}

// Note records n occurrences of key at now. When a line is due it returns true
// and the number of occurrences the line stands for, those held back since the
// previous line included.
func (t *Throttle) Note(key string, now time.Time, n int) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.keys == nil {
		t.keys = map[string]*entry{}
	}
	e := t.keys[key]
	if e == nil {
		e = &entry{}
		t.keys[key] = e
	}
	e.n += n
	if !e.last.IsZero() && now.Sub(e.last) < t.Every {
		return 0, false
	}
	n, e.n, e.last = e.n, 0, now
	return n, true
}

// Held returns the occurrences of key held back since its last line and
// forgets them: for a final line at shutdown, so that a failure that stopped
// recurring is still in the log.
func (t *Throttle) Held(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.keys[key]
	if e == nil {
		return 0
	}
	n := e.n
	e.n = 0
	return n
}
