package analytics_test

import (
	"context"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestPartialHour: an hour cut short, at its end by computed_until (now, for
// a window still open) or at its start by a window that does not start on a
// whole hour (capacity queries count whole UTC hours), reports the mean GPUs
// over the seconds it covers, not over a whole hour; and the means over hours
// weigh it by those seconds.
func TestPartialHour(t *testing.T) {
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	db := cfg.Database
	ten := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	// From 10:00 one job holds all 4 GPUs and another waits for 2 more.
	schematest.InsertJobRows(t, conn, db, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, gpus, last_event, updated_at, inserted_at, version",
		[]any{"c", "1", "slurm", "alice", "gpu", "RUNNING", ten, &ten, uint32(4), "START", ten, ten, uint64(1)},
		[]any{"c", "2", "slurm", "bob", "gpu", "PENDING", ten, nil, uint32(2), "SUBMIT", ten, ten, uint64(1)})

	var demandWeekly analytics.CapacityQuery
	for _, q := range analytics.CapacityQueries() {
		if q.Name == "demand_weekly" {
			demandWeekly = q
		}
	}
	for _, tc := range []struct {
		name       string
		since, now time.Time
		hours      uint64
	}{
		{"now half an hour into 10:00", ten.Add(-10 * time.Hour), ten.Add(30 * time.Minute), 11},
		{"window from 10:15, now at 10:30", ten.Add(15 * time.Minute), ten.Add(30 * time.Minute), 1},
		{"now at 11:00 (whole hours)", ten.Add(-10 * time.Hour), ten.Add(time.Hour), 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := analytics.Window{Since: tc.since, Until: tc.since.Add(24 * time.Hour)}
			r := newRunner(t, conn, db, tc.now, analytics.Capacity{Cluster: "c", GPUs: 4})
			if _, err := r.RunWindow(ctx, w, "utilization"); err != nil {
				t.Fatal(err)
			}
			// the last hour: all 4 GPUs held, 2 more asked for, whatever part of it
			// the window covers
			var hours uint64
			var busy, pending, util float64
			if err := conn.QueryRow(ctx, "SELECT count(), argMax(busy_gpus, hour_start), argMax(pending_gpus, hour_start), argMax(utilization, hour_start) FROM "+
				db+".analytics_utilization_hourly WHERE window_id = ? AND scope = 'cluster'", w.ID()).Scan(&hours, &busy, &pending, &util); err != nil {
				t.Fatal(err)
			}
			if hours != tc.hours || !near(busy, 4, 1e-12) || !near(pending, 2, 1e-12) || !near(util, 1, 1e-12) {
				t.Errorf("hourly: %d hours, the last with busy %v, pending %v GPUs, utilization %v; want %d, 4, 2, 1", hours, busy, pending, util, tc.hours)
			}
			// means over the window weigh each hour by its seconds: the GPUs held
			// for the time they were held, over the time computed
			from := ten
			if tc.since.After(ten) {
				from = tc.since
			}
			held := tc.now.Sub(from).Seconds() / tc.now.Sub(tc.since).Seconds()
			var busyMean, pendingMean, utilMax float64
			if err := conn.QueryRow(ctx, "SELECT busy_gpus_mean, pending_gpus_mean, util_max FROM "+db+".analytics_utilization_dist "+
				"WHERE window_id = ? AND scope = 'cluster'", w.ID()).Scan(&busyMean, &pendingMean, &utilMax); err != nil {
				t.Fatal(err)
			}
			if !near(busyMean, 4*held, 1e-12) || !near(pendingMean, 2*held, 1e-12) || !near(utilMax, 1, 1e-12) {
				t.Errorf("dist: busy mean %v, pending mean %v, util max %v; want %v, %v, 1", busyMean, pendingMean, utilMax, 4*held, 2*held)
			}
			var slotBusy, slotUtil float64
			if err := conn.QueryRow(ctx, "SELECT busy_gpus, utilization FROM "+db+".analytics_utilization "+
				"WHERE window_id = ? AND scope = 'cluster' AND slot_kind = 'hour_of_day' AND slot = 10", w.ID()).Scan(&slotBusy, &slotUtil); err != nil {
				t.Fatal(err)
			}
			if !near(slotBusy, 4, 1e-12) || !near(slotUtil, 1, 1e-12) {
				t.Errorf("hour of day 10: busy %v GPUs, utilization %v; want 4, 1", slotBusy, slotUtil)
			}

			res, err := analytics.RunCapacityQuery(ctx, conn, db, demandWeekly, w, tc.now, time.UTC, 30*24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			col := -1
			for i, c := range res.Columns {
				if c == "demand_max" {
					col = i
				}
			}
			if len(res.Rows) != 1 || col < 0 {
				t.Fatalf("demand_weekly: columns %v, rows %v; want one row with demand_max", res.Columns, res.Rows)
			}
			if got, _ := res.Rows[0][col].(float64); got != 6 {
				t.Errorf("demand_weekly: demand_max %v; want 6 (4 GPUs held + 2 asked for)", res.Rows[0][col])
			}
		})
	}
}
