package analytics_test

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestZoneHours: hours of day and days of week are those of
// --analytics.timezone also where its offset is not whole hours, for the
// default window of whole UTC days (DataSpan). One job on 2026-03-02,
// submitted and started at once, holds the cluster's one GPU for 30 minutes
// within one hour of the zone: that hour has its submission and 0.5 GPUs
// held, its day the submission, and no other slot has either.
func TestZoneHours(t *testing.T) {
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // a Monday
	for _, tc := range []struct {
		tz    string
		start time.Duration // after day, UTC
		hour  int           // local hour of day
		wday  int           // local day of week, 1 = Monday
	}{
		{"UTC", 10 * time.Minute, 0, 1},
		{"Asia/Kolkata", 40 * time.Minute, 6, 1},              // +05:30: 06:10-06:40
		{"Asia/Kolkata", 18*time.Hour + 40*time.Minute, 0, 2}, // Tuesday 00:10-00:40
		{"Asia/Kathmandu", 40 * time.Minute, 6, 1},            // +05:45: 06:25-06:55
		{"Australia/Adelaide", 40 * time.Minute, 11, 1},       // +10:30 (summer time): 11:10-11:40
		{"America/St_Johns", 40 * time.Minute, 21, 7},         // -03:30: Sunday 21:10-21:40
	} {
		t.Run(fmt.Sprintf("%s %v", tc.tz, tc.start), func(t *testing.T) {
			cfg, conn := schematest.Database(t)
			ctx := t.Context()
			db := cfg.Database
			s := day.Add(tc.start)
			e := s.Add(30 * time.Minute)
			schematest.InsertJobRows(t, conn, db, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version",
				[]any{"c", "1", "slurm", "a", "p", "COMPLETED", s, &s, &e, uint32(1), "END", e, e, uint64(1)})
			w, err := analytics.DataSpan(ctx, conn, db, "")
			if err != nil {
				t.Fatal(err)
			}
			r, err := analytics.NewRunner(analytics.Config{Database: db, TimeZone: tc.tz, Lookback: 24 * time.Hour, Capacity: []analytics.Capacity{{Cluster: "c", GPUs: 1}}},
				conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), func() time.Time { return farFuture })
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.RunWindow(ctx, w, "utilization"); err != nil {
				t.Fatal(err)
			}
			rows, err := conn.Query(ctx, "SELECT slot_kind, slot, submissions, busy_gpus FROM "+db+".analytics_utilization "+
				"WHERE window_id = ? AND scope = 'cluster' AND (submissions > 0 OR busy_gpus > 0) ORDER BY slot_kind, slot", w.ID())
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []string
			for rows.Next() {
				var kind string
				var slot uint8
				var subs uint64
				var busy float64
				if err := rows.Scan(&kind, &slot, &subs, &busy); err != nil {
					t.Fatal(err)
				}
				if kind == "hour_of_day" {
					got = append(got, fmt.Sprintf("hour %d: %d submitted, %g GPUs held", slot, subs, busy))
				} else {
					got = append(got, fmt.Sprintf("day %d: %d submitted", slot, subs))
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			want := []string{fmt.Sprintf("day %d: 1 submitted", tc.wday), fmt.Sprintf("hour %d: 1 submitted, 0.5 GPUs held", tc.hour)}
			if !slices.Equal(got, want) {
				t.Errorf("window %s in %s: slots %q; want %q", w.ID(), tc.tz, got, want)
			}
		})
	}
}
