package ingest

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// throttle logs each kind of warning at most once per period, with the number
// of occurrences it swallowed since the last line. Per-message paths count in
// metrics; the log only says that something is going on.
type throttle struct {
	every time.Duration
	mu    sync.Mutex
	last  map[string]time.Time
	count map[string]int
}

func (t *throttle) log(logger *slog.Logger, kind, msg string, args ...any) {
	t.mu.Lock()
	if t.last == nil {
		t.last, t.count = map[string]time.Time{}, map[string]int{}
	}
	now := time.Now()
	if now.Sub(t.last[kind]) < t.every {
		t.count[kind]++
		t.mu.Unlock()
		return
	}
	suppressed := t.count[kind]
	t.last[kind], t.count[kind] = now, 0
	t.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	logger.Warn(msg, args...)
}

// backoff waits exponentially longer between retries.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max, cur: min} }

func (b *backoff) reset() { b.cur = b.min }

// wait sleeps for the current delay and doubles it; false when ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.cur)
	defer t.Stop()
	b.cur = min(b.cur*2, b.max)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
