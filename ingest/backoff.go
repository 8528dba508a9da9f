package ingest

import (
	"context"
	"time"
)

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
