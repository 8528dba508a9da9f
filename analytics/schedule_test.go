package analytics_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestPass runs one scheduled pass over a day of synthetic jobs: the open
// day is computed up to the clock, the previous (still settling) day whole,
// and a second pass replaces both without doubling.
func TestPass(t *testing.T) {
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	day := time.Date(2026, 5, 4, 0, 0, 0, 0, time.UTC)
	if err := analytics.SyntheticJobs(ctx, conn, cfg.Database, "sim-1", 2000, day.AddDate(0, 0, -1), 2); err != nil {
		t.Fatal(err)
	}
	now := day.Add(13*time.Hour + 30*time.Minute)
	r, err := analytics.NewRunner(analytics.Config{Database: cfg.Database, Interval: time.Minute, Periods: []analytics.Period{analytics.Day},
		Settle: 24 * time.Hour, Lookback: 24 * time.Hour, TimeZone: "UTC"},
		conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Ready(); err == nil || !strings.Contains(err.Error(), "waiting for the first scheduled pass") {
		t.Errorf("Ready() before a pass = %v; want waiting for the first pass", err)
	}
	for pass := range 2 {
		done, err := r.Pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Ready(); err != nil {
			t.Errorf("Ready() after pass %d = %v; want nil", pass, err)
		}
		if len(done) != 2 || done[0].Since != day.AddDate(0, 0, -1) || done[1].Since != day {
			t.Fatalf("pass %d ran %v; want the 3rd and the 4th of May", pass, done)
		}
		runs, err := analytics.ReadWindows(ctx, conn, cfg.Database)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 || !runs[0].ComputedUntil.Equal(now.Truncate(time.Second)) || !runs[1].ComputedUntil.Equal(day) {
			t.Fatalf("pass %d: windows %+v; want the 4th computed until %v, the 3rd whole", pass, runs, now)
		}
		var jobs, hours uint64
		if err := conn.QueryRow(ctx, "SELECT sum(jobs) FROM "+cfg.Database+".analytics_headline").Scan(&jobs); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+cfg.Database+".analytics_utilization_hourly WHERE scope = 'cluster'").Scan(&hours); err != nil {
			t.Fatal(err)
		}
		// all of the 3rd's jobs, the 4th's submitted before 13:30
		var want uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+cfg.Database+".jobs FINAL WHERE submit_time < ?", now).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if jobs != want || hours != 24+14 {
			t.Errorf("pass %d: %d jobs, %d cluster hours; want %d, 38", pass, jobs, hours, want)
		}
	}
}
