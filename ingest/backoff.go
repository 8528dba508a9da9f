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

// retryWrite calls send until it succeeds or ctx ends, with backoff, and keeps
// heliostat_ingest_clickhouse_up in step. Each failure counts as an error of
// kind and logs msg (throttled) with args and the error. send must be safe to
// repeat after an uncertain failure.
func (in *Ingester) retryWrite(ctx context.Context, kind, msg string, send func() error, args ...any) error {
	backoff := newBackoff(100*time.Millisecond, in.cfg.RetryMax)
	for {
		err := send()
		in.clickhouseReport(err)
		if err == nil {
			return nil
		}
		in.m.errors.WithLabelValues(kind).Inc()
		in.warnf(kind, msg, append(args, "err", err)...)
		if !backoff.wait(ctx) {
			return ctx.Err()
		}
	}
}

// clickhouseReport records the outcome of a ClickHouse request in
// heliostat_ingest_clickhouse_up and in the readiness: nil is a success.
func (in *Ingester) clickhouseReport(err error) {
	if err == nil {
		in.m.clickhouseUp.Set(1)
	} else {
		in.m.clickhouseUp.Set(0)
	}
	in.chHealth.Report(err)
}
