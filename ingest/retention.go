package ingest

import (
	"context"
	"errors"
	"time"

	"github.com/heliostat-dev/heliostat/internal/retention"
)

// retentionLoop applies retention at start and then hourly, and prunes the
// ledger at start and then daily. The sample tables' retention
// (Config.Retention, Config.RollupRetention) runs on the wall clock here;
// see RetainSamples for samples timestamped by another clock.
func (in *Ingester) retentionLoop(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	var pruned time.Time
	for {
		if time.Since(pruned) >= ledgerPruneEvery {
			dropped, err := in.pruneLedger(ctx)
			switch {
			case err != nil && ctx.Err() != nil:
				return
			case err != nil:
				in.m.errors.WithLabelValues("retention").Inc()
				in.warnf("retention", "pruning the ingest ledger failed; trying again in an hour", "err", err)
			default:
				pruned = time.Now()
			}
			if len(dropped) > 0 {
				in.m.retentionDrop.WithLabelValues("ingest_ledger").Add(float64(len(dropped)))
				in.logger.Info("dropped ingest ledger partitions whose offsets kafka no longer holds", "partitions", dropped)
			}
		}
		// Intents are stamped with the wall clock when they are written.
		rules := append(sampleRules(in.cfg.Retention, in.cfg.RollupRetention),
			retention.Rule{Table: "ingest_intents", Keep: intentsKeep, Daily: true})
		if !in.applyRetention(ctx, rules, time.Now()) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sampleRules returns the retention rules of the tables whose rows carry
// the time of their sample or event: raw samples and GPU events keep
// keep, the 1-minute rollup keeps rollupKeep.
func sampleRules(keep, rollupKeep time.Duration) []retention.Rule {
	return []retention.Rule{
		{Table: "gpu_samples", Keep: keep, Daily: true},
		{Table: "gpu_events", Keep: keep},
		{Table: "gpu_samples_1m", Keep: rollupKeep},
	}
}

// applyRetention drops the partitions that rules expire at now, counting
// and logging what it dropped and what failed. It returns false once ctx
// has ended.
func (in *Ingester) applyRetention(ctx context.Context, rules []retention.Rule, now time.Time) bool {
	for _, r := range rules {
		dropped, err := retention.DropExpired(ctx, in.conn, in.cfg.ClickHouse.Database, r, now)
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			in.m.errors.WithLabelValues("retention").Inc()
			in.warnf("retention", "applying retention failed", "table", r.Table, "err", err)
		}
		if len(dropped) > 0 {
			in.m.retentionDrop.WithLabelValues(r.Table).Add(float64(len(dropped)))
			in.logger.Info("retention dropped partitions", "table", r.Table, "partitions", dropped)
		}
	}
	return true
}

// SampleRetention says how RetainSamples keeps the sample tables.
type SampleRetention struct {
	// Keep drops raw-sample (gpu_samples) and GPU-event partitions older
	// than this; 0 keeps them all.
	Keep time.Duration
	// RollupKeep drops 1-minute rollup (gpu_samples_1m) partitions older
	// than this; 0 keeps them all.
	RollupKeep time.Duration
	// Now is the clock the samples are timestamped by. Required.
	Now func() time.Time
	// Every is how often, in wall time, the retention is applied. Default
	// an hour.
	Every time.Duration
}

// RetainSamples applies r's retention to the sample tables at start and
// then every r.Every until ctx ends, comparing their partitions with
// r.Now. Run applies Config.Retention and Config.RollupRetention by the
// wall clock; a caller whose samples carry another clock's time (heliostat
// up's simulated cluster runs ahead of the wall clock) sets both to 0 and
// runs RetainSamples with that clock. Failures are counted and logged as
// Run's are (heliostat_ingest_errors_total{kind="retention"}) and tried
// again at the next pass. It returns nil when ctx ends.
func (in *Ingester) RetainSamples(ctx context.Context, r SampleRetention) error {
	if r.Now == nil {
		return errors.New("ingest: SampleRetention.Now is nil")
	}
	if r.Every <= 0 {
		r.Every = time.Hour
	}
	rules := sampleRules(r.Keep, r.RollupKeep)
	t := time.NewTicker(r.Every)
	defer t.Stop()
	for {
		if !in.applyRetention(ctx, rules, r.Now()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
