package ingest

import (
	"context"
	"time"

	"github.com/heliostat-dev/heliostat/internal/retention"
)

// retentionLoop applies retention at start and then hourly, and prunes the
// ledger at start and then daily.
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
		rules := []retention.Rule{
			{Table: "gpu_samples", Keep: in.cfg.Retention, Daily: true},
			{Table: "gpu_events", Keep: in.cfg.Retention},
			{Table: "gpu_samples_1m", Keep: in.cfg.RollupRetention},
			{Table: "ingest_intents", Keep: intentsKeep, Daily: true},
		}
		for _, r := range rules {
			dropped, err := retention.DropExpired(ctx, in.conn, in.cfg.ClickHouse.Database, r, time.Now())
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				in.m.errors.WithLabelValues("retention").Inc()
				in.warnf("retention", "applying retention failed", "table", r.Table, "err", err)
			}
			if len(dropped) > 0 {
				in.m.retentionDrop.WithLabelValues(r.Table).Add(float64(len(dropped)))
				in.logger.Info("retention dropped partitions", "table", r.Table, "partitions", dropped)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
