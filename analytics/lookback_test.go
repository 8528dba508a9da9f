package analytics_test

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestRunsBeforeLookback: a run submitted more than --analytics.lookback
// (30 days) before the window counts in the window's utilization, demand
// and GPU hours for the time it held or waited for GPUs in it, like any
// earlier run, and RunResult.EarlyRuns counts it; one that ended before the
// window does not count, also when a stale row of it (before merges) has no
// end yet.
func TestRunsBeforeLookback(t *testing.T) {
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	w := analytics.Window{Since: day, Until: day.Add(24 * time.Hour)}
	ptr := func(t time.Time) *time.Time { return &t }
	const columns = "cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version"
	// run is one insert (a part) of the 8-GPU run of alice, submitted at sub
	type run struct {
		state      string
		start, end *time.Time
		version    uint64
	}
	for _, tc := range []struct {
		name          string
		sub           time.Time
		inserts       []run
		busy, pending float64 // means over the window, the 1-GPU run of bob included
		early         uint64
	}{
		{"running since 31 days", day.AddDate(0, 0, -31),
			[]run{{"RUNNING", ptr(day.AddDate(0, 0, -31)), nil, 1}}, 9, 0, 1},
		{"running since 200 days", day.AddDate(0, 0, -200),
			[]run{{"RUNNING", ptr(day.AddDate(0, 0, -200)), nil, 1}}, 9, 0, 1},
		{"ended mid-window", day.AddDate(0, 0, -31),
			[]run{{"COMPLETED", ptr(day.AddDate(0, 0, -31)), ptr(day.Add(12 * time.Hour)), 1}}, 5, 0, 1},
		{"pending since 40 days", day.AddDate(0, 0, -40),
			[]run{{"PENDING", nil, nil, 1}}, 1, 8, 1},
		{"ended before the window", day.AddDate(0, 0, -31),
			[]run{{"COMPLETED", ptr(day.AddDate(0, 0, -31)), ptr(day.Add(-time.Hour)), 1}}, 1, 0, 0},
		{"ended before the window, stale rows unmerged", day.AddDate(0, 0, -31),
			[]run{{"PENDING", nil, nil, 1}, {"RUNNING", ptr(day.AddDate(0, 0, -31)), nil, 2},
				{"COMPLETED", ptr(day.AddDate(0, 0, -31)), ptr(day.Add(-time.Hour)), 3}}, 1, 0, 0},
		{"submitted inside the lookback", day.AddDate(0, 0, -2),
			[]run{{"RUNNING", ptr(day.AddDate(0, 0, -2)), nil, 1}}, 9, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, conn := schematest.Database(t)
			ctx := context.Background()
			db := cfg.Database
			for _, r := range tc.inserts {
				schematest.InsertJobRows(t, conn, db, columns,
					[]any{"c", "long", "slurm", "alice", "gpu", r.state, tc.sub, r.start, r.end, uint32(8), "E", tc.sub, tc.sub, r.version})
			}
			schematest.InsertJobRows(t, conn, db, columns,
				[]any{"c", "short", "slurm", "bob", "gpu", "RUNNING", day, &day, (*time.Time)(nil), uint32(1), "START", day, day, uint64(1)})

			res, err := newRunner(t, conn, db, day.Add(48*time.Hour), analytics.Capacity{Cluster: "c", GPUs: 16}).RunWindow(ctx, w, "capacity", "utilization")
			if err != nil {
				t.Fatal(err)
			}
			if res.EarlyRuns != tc.early {
				t.Errorf("RunWindow: EarlyRuns = %d; want %d", res.EarlyRuns, tc.early)
			}
			var busy, pending float64
			if err := conn.QueryRow(ctx, "SELECT busy_gpus_mean, pending_gpus_mean FROM "+db+".analytics_utilization_dist WHERE window_id = ? AND scope = 'cluster'", w.ID()).Scan(&busy, &pending); err != nil {
				t.Fatal(err)
			}
			if busy != tc.busy || pending != tc.pending {
				t.Errorf("utilization: busy %v, pending %v GPUs; want %v, %v", busy, pending, tc.busy, tc.pending)
			}

			// The capacity-planning queries read the same runs.
			demand := capacityColumn(t, conn, db, "demand_weekly", w, "demand_mean")
			if len(demand) != 1 || demand[0] != tc.busy+tc.pending {
				t.Errorf("demand_weekly: demand_mean %v; want [%v]", demand, tc.busy+tc.pending)
			}
			var gpuHours float64
			for _, h := range capacityColumn(t, conn, db, "gpu_hours_monthly", w, "gpu_hours") {
				gpuHours += h
			}
			if gpuHours != tc.busy*24 {
				t.Errorf("gpu_hours_monthly: %v GPU hours in all; want %v", gpuHours, tc.busy*24)
			}
		})
	}
}

// capacityColumn runs capacity-planning query name for w (30 days of
// lookback, data up to w's end) and returns column col of its rows.
func capacityColumn(t *testing.T, conn driver.Conn, db, name string, w analytics.Window, col string) []float64 {
	t.Helper()
	ctx := context.Background()
	for _, q := range analytics.CapacityQueries() {
		if q.Name != name {
			continue
		}
		res, err := analytics.RunCapacityQuery(ctx, conn, db, q, w, w.Until, time.UTC, 30*24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		i := -1
		for j, c := range res.Columns {
			if c == col {
				i = j
			}
		}
		if i < 0 {
			t.Fatalf("%s has no column %s: %v", name, col, res.Columns)
		}
		var out []float64
		for _, r := range res.Rows {
			v, ok := r[i].(float64)
			if !ok {
				t.Fatalf("%s.%s = %T %v; want a float64", name, col, r[i], r[i])
			}
			out = append(out, v)
		}
		return out
	}
	t.Fatalf("no capacity query %s", name)
	return nil
}
