package analytics_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestLastSuccessWallClock: heliostat_analytics_last_success_timestamp_seconds
// is the wall clock of the last good run, whatever the runner's data clock:
// under `heliostat up` the data clock is the simulated cluster's, which runs
// ahead of the wall clock, and HeliostatAnalyticsStale (time() − the gauge >
// an hour) could never fire on a gauge stamped in the future.
func TestLastSuccessWallClock(t *testing.T) {
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	day := time.Date(2031, 5, 4, 0, 0, 0, 0, time.UTC) // a simulated cluster years ahead
	if err := analytics.SyntheticJobs(ctx, conn, cfg.Database, "sim-1", 200, day, 1); err != nil {
		t.Fatal(err)
	}
	now := day.Add(13 * time.Hour)
	reg := prometheus.NewRegistry()
	r, err := analytics.NewRunner(analytics.Config{Database: cfg.Database, Interval: time.Minute, Periods: []analytics.Period{analytics.Day},
		Settle: time.Hour, Lookback: time.Hour, TimeZone: "UTC"},
		conn, slog.New(slog.DiscardHandler), reg, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if _, err := r.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got float64
	for _, mf := range mfs {
		if mf.GetName() == "heliostat_analytics_last_success_timestamp_seconds" {
			got = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if lo, hi := float64(before.Unix()), float64(after.Unix()+1); got < lo || got > hi {
		t.Errorf("last success at %v; want the wall clock of the pass, %v..%v (the data clock was %v)",
			time.Unix(int64(got), 0).UTC(), before.UTC(), after.UTC(), now)
	}
}
