package dashboards

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestPanelFigures runs a few panels on rows written for them (not the
// pipeline's seed, which has no MIG instance and no job sampled without a
// utilization) and checks their figures, every variable at All.
func TestPanelFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse; skipped with -short")
	}
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	grafana := grafanaConn(t, cfg)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

	// Host h1, for two minutes: a whole GPU at 50 % and 300 W; a MIG instance
	// at 20 % that reports no power; another that reports neither.
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+cfg.Database+".gpu_samples (ts, cluster, host, gpu_index, gpu_uuid, mig_uuid, gpu_util, power_mw, gpu_temp_c)")
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range []time.Time{t0, t0.Add(time.Minute)} {
		for _, r := range []struct {
			gpu, mig string
			util     *uint8
			power    *uint32
		}{
			{"GPU-a", "", new(uint8(50)), new(uint32(300_000))},
			{"GPU-b", "MIG-b1", new(uint8(20)), nil},
			{"GPU-b", "MIG-b2", nil, nil},
		} {
			if err := b.Append(ts, "c", "h1", uint16(0), r.gpu, r.mig, r.util, r.power, new(uint16(60))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	// Three jobs of one user: sampled at 80 % for 1 GPU-hour, sampled without
	// a utilization for 1 GPU-hour, not sampled for 2 GPU-hours.
	b, err = conn.PrepareBatch(ctx, "INSERT INTO "+cfg.Database+".job_run_summary (cluster, job_id, user, partition_name, state, gpus, submit_time, start_time, end_time, "+
		"elapsed_s, gpu_hours, samples, util_mean, computed_at, version)")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		job      string
		hours    float64
		samples  uint64
		utilMean *float32
	}{
		{"1", 1, 100, new(float32(80))},
		{"2", 1, 100, nil},
		{"3", 2, 0, nil},
	} {
		if err := b.Append("c", r.job, "alice", "vc1", "COMPLETED", uint32(1), t0, t0, t0.Add(time.Hour), uint32(3600),
			r.hours, r.samples, r.utilMean, t0, uint64(1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}

	// Jobs, for the held-and-wanted panels: an imported job that ended at an
	// unknown time (no start or end time: it must count nowhere, not wait
	// until now), a job cancelled while pending (waits until its end), a
	// running job (waits 10 minutes, then runs until now). One run each.
	var jobs [][]any
	for _, r := range []struct {
		job, state    string
		gpus          uint32
		submit        time.Time
		start, ending *time.Time
	}{
		{"t1", "COMPLETED", 4, t0.Add(-30 * time.Minute), nil, nil},
		{"t2", "CANCELLED", 1, t0, nil, new(t0.Add(5 * time.Minute))},
		{"t3", "RUNNING", 2, t0, new(t0.Add(10 * time.Minute)), nil},
	} {
		jobs = append(jobs, []any{"c", r.job, r.state, &r.gpus, r.submit, r.start, r.ending, uint64(1)})
	}
	schematest.InsertJobRows(t, conn, cfg.Database, "cluster, job_id, state, gpus, submit_time, start_time, end_time, version", jobs...)

	from, to := t0.Add(-time.Hour), t0.Add(2*time.Hour)
	for _, tc := range []struct {
		file string
		id   int
		want map[string]float64
	}{
		// MIG instances without power or utilization leave those figures to
		// the devices that report them
		{"fleet.json", 9, map[string]float64{"gpus": 3, "gpu_util": 35, "power_w": 300, "energy_kwh": 600 * 60 / 3.6e6}},
		// as analytics_efficiency: jobs without a utilization mean are left out
		{"efficiency.json", 2, map[string]float64{"weighted_util": 80, "total_gpu_hours": 4}},
		{"efficiency.json", 5, map[string]float64{"weighted_util": 80}},
		// the first step with a job: t0, both t2 and t3 waiting (t1's
		// unknown times put it nowhere)
		{"overview.json", 9, map[string]float64{"time": float64(t0.Unix()), "pending_jobs": 2, "pending_gpus": 3, "running_jobs": 0}},
		{"overview.json", 10, map[string]float64{"time": float64(t0.Unix()), "pending_jobs": 2, "pending_gpus": 3, "running_jobs": 0}},
		{"jobs-users.json", 22, map[string]float64{"time": float64(t0.Unix()), "pending_jobs": 2, "pending_gpus": 3, "running_jobs": 0}},
	} {
		d, p := findPanel(t, tc.file, tc.id)
		sql, err := expandAll(d, p.Targets[0].RawSQL, from, to)
		if err != nil {
			t.Fatalf("%s: %v", panelName(d, p), err)
		}
		got := firstRow(t, grafana, sql)
		for col, want := range tc.want {
			if v, ok := got[col]; !ok || !(math.Abs(v-want) <= 1e-9*math.Max(1, math.Abs(want))) { // NaN fails
				t.Errorf("%s: %s = %v; want %v", panelName(d, p), col, v, want)
			}
		}
	}
}

func findPanel(t *testing.T, file string, id int) (*dashboard, panel) {
	t.Helper()
	for _, d := range loadDashboards(t) {
		if d.file != file {
			continue
		}
		for _, p := range d.allPanels() {
			if p.ID == id && len(p.Targets) > 0 {
				return d, p
			}
		}
	}
	t.Fatalf("%s has no panel %d with a query", file, id)
	return nil, panel{}
}

// expandAll expands a query with every variable at All (each has a custom
// all value) and the macros for [from, to].
func expandAll(d *dashboard, sql string, from, to time.Time) (string, error) {
	vars := map[string]variable{}
	sel := map[string]selection{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
		sel[v.Name] = selection{all: true}
	}
	out, err := interpolate(sql, vars, sel)
	if err != nil {
		return "", err
	}
	return expandMacros(out, from, to)
}

// firstRow returns the numeric and time columns of a query's first row as
// float64 (times as Unix seconds).
func firstRow(t *testing.T, conn clickhouse.Conn, sql string) map[string]float64 {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("no rows: %v\n%s", rows.Err(), sql)
	}
	cols := rows.Columns()
	vals := make([]any, len(cols))
	for i, ct := range rows.ColumnTypes() {
		vals[i] = reflect.New(ct.ScanType()).Interface()
	}
	if err := rows.Scan(vals...); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for i, c := range cols {
		v := reflect.ValueOf(vals[i]).Elem()
		if tm, ok := v.Interface().(time.Time); ok { // as Unix seconds
			out[c] = float64(tm.Unix())
			continue
		}
		switch v.Kind() {
		case reflect.Float32, reflect.Float64:
			out[c] = v.Float()
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			out[c] = float64(v.Uint())
		case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			out[c] = float64(v.Int())
		}
	}
	return out
}

// grafanaConn is a connection to cfg's database as Grafana's ClickHouse data
// source opens it (the default user, the database as its default), closed
// when the test ends.
func grafanaConn(t *testing.T, cfg chconn.Config) driver.Conn {
	t.Helper()
	c, err := clickhouse.Open(&clickhouse.Options{Protocol: cfg.ClientProtocol(), Addr: []string{cfg.Addr}, Auth: clickhouse.Auth{Database: cfg.Database, Username: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
