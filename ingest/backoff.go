package ingest

import (
	"context"
	"fmt"
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

// retryWrite calls send until it succeeds or ctx ends (not at all when ctx
// has ended), with backoff, and keeps heliostat_ingest_clickhouse_up in
// step. Each failure counts as an error of kind and logs msg (throttled)
// with args and the error. send must be safe to repeat after an uncertain
// failure.
func (in *Ingester) retryWrite(ctx context.Context, kind, msg string, send func() error, args ...any) error {
	backoff := newBackoff(100*time.Millisecond, in.cfg.RetryMax)
	for {
		if ctx.Err() != nil {
			// Nothing begun once the generation ended (see rebalance.go).
			return ctx.Err()
		}
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

// idleCheckLoop pings ClickHouse whenever no request has reported to
// the readiness for IdleCheck. A failed ping makes ingest not ready; a
// successful one clears only a failure a ping reported, not one of a write
// still being retried.
func (in *Ingester) idleCheckLoop(ctx context.Context) {
	t := time.NewTicker(in.cfg.IdleCheck / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		in.chMu.Lock()
		idle := time.Since(in.chLast) >= in.cfg.IdleCheck
		in.chMu.Unlock()
		if !idle {
			continue
		}
		// A slow answer is not a lost server: the timeout is never under 5s.
		pctx, cancel := context.WithTimeout(ctx, max(in.cfg.IdleCheck, 5*time.Second))
		err := in.conn.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		in.chMu.Lock()
		if err != nil {
			in.chLast, in.chByPing = time.Now(), true
			in.chReport(fmt.Errorf("ping (idle for %s): %w", in.cfg.IdleCheck, err))
		} else if in.chByPing {
			in.chLast, in.chByPing = time.Now(), false
			in.chReport(nil)
		}
		in.chMu.Unlock()
	}
}

// clickhouseReport records the outcome of a ClickHouse request in
// heliostat_ingest_clickhouse_up and in the readiness: nil is a success.
func (in *Ingester) clickhouseReport(err error) {
	in.chMu.Lock()
	in.chLast, in.chByPing = time.Now(), false
	in.chMu.Unlock()
	in.chReport(err)
}

func (in *Ingester) chReport(err error) {
	if err == nil {
		in.m.clickhouseUp.Set(1)
	} else {
		in.m.clickhouseUp.Set(0)
	}
	in.chHealth.Report(err)
}
