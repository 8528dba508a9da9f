package dashboards

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// typedRuns writes to a fresh database the runs of 2026-03-02 below, as
// they stand at 11:30, and returns its configuration, a connection and the
// day's time at h:m:
//
//   - 1: a100 × 4, submitted 08:00, ran 08:30-10:00;
//   - 2: a100 × 2, submitted 10:00, running since 10:30;
//   - 3: an untyped request given a100 and v100 (the source's joined type), 3 GPUs, ran 09:00-11:00;
//   - 4: v100 × 1, submitted 11:00, pending;
//   - 5: untyped × 2, submitted 11:15, pending (no type known yet);
//   - 6: a100 × 8, submitted 09:30, cancelled at 10:00 before it started;
//   - 7: a trace job of 4 processors, 07:00-08:00, before every range;
//   - 8: a CPU job, running since 09:00;
//   - 1 of cluster d: a100 × 2, submitted at 08:00 as c's job 1 was, ran
//     09:00-09:30: another cluster's run under the same id, a run of its own.
func typedRuns(t *testing.T) (chconn.Config, driver.Conn, func(h, m int) time.Time) {
	t.Helper()
	cfg, conn := schematest.Database(t)
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	ptr := func(h, m int) *time.Time { v := at(h, m); return &v }
	gpus := func(n uint32) *uint32 { return &n }
	schematest.InsertJobRows(t, conn, cfg.Database, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, cpus, gpu_type, last_event, updated_at, inserted_at, version",
		[]any{"c", "1", "slurm", "u", "gpu", "COMPLETED", at(8, 0), ptr(8, 30), ptr(10, 0), gpus(4), nil, "a100", "END", at(10, 0), at(10, 0), uint64(1)},
		[]any{"c", "2", "slurm", "u", "gpu", "RUNNING", at(10, 0), ptr(10, 30), nil, gpus(2), nil, "a100", "START", at(10, 30), at(10, 30), uint64(1)},
		[]any{"c", "3", "slurm", "u", "gpu", "COMPLETED", at(9, 0), ptr(9, 0), ptr(11, 0), gpus(3), nil, "a100,v100", "END", at(11, 0), at(11, 0), uint64(1)},
		[]any{"c", "4", "slurm", "u", "gpu", "PENDING", at(11, 0), nil, nil, gpus(1), nil, "v100", "SUBMIT", at(11, 0), at(11, 0), uint64(1)},
		[]any{"c", "5", "slurm", "u", "gpu", "PENDING", at(11, 15), nil, nil, gpus(2), nil, "", "SUBMIT", at(11, 15), at(11, 15), uint64(1)},
		[]any{"c", "6", "slurm", "u", "gpu", "CANCELLED", at(9, 30), nil, ptr(10, 0), gpus(8), nil, "a100", "END", at(10, 0), at(10, 0), uint64(1)},
		[]any{"c", "7", "trace", "u", "1", "COMPLETED", at(7, 0), ptr(7, 0), ptr(8, 0), nil, gpus(4), "", "END", at(8, 0), at(8, 0), uint64(1)},
		[]any{"c", "8", "slurm", "u", "cpu", "RUNNING", at(9, 0), ptr(9, 0), nil, gpus(0), gpus(16), "", "START", at(9, 0), at(9, 0), uint64(1)},
		[]any{"d", "1", "slurm", "u", "gpu", "COMPLETED", at(8, 0), ptr(9, 0), ptr(9, 30), gpus(2), nil, "a100", "END", at(9, 30), at(9, 30), uint64(1)})
	return cfg, conn, at
}

// TestGPUTypesPanel: the jobs-and-users panel "GPU types in the time range"
// gives each GPU type's runs, GPU hours and mean GPUs held in the range, and
// the runs pending at its end, every variable at All, now() at 11:30 on
// 2026-03-02 (the runs of typedRuns).
func TestGPUTypesPanel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse; skipped with -short")
	}
	cfg, _, at := typedRuns(t)
	grafana := grafanaConn(t, cfg)
	now := strings.NewReplacer("now()", fmt.Sprintf("toDateTime(%d)", at(11, 30).Unix())).Replace
	const cols = "SELECT gpu_type, runs, gpu_hours, mean_gpus_held, pending_at_end, gpus_wanted_at_end"
	for _, tc := range []struct {
		name string
		to   time.Time
		want []string
	}{
		// 2.5 h: 1 holds 4 GPUs for 1 h, 2 holds 2 for 1 h, 3 holds 3 for 2 h,
		// d's 1 holds 2 for 30 min (in every range below)
		{"09:00-11:30", at(11, 30), []string{
			"a100\t3\t7\t2.8\t0\t0",
			"a100,v100\t1\t6\t2.4\t0\t0",
			"(not known)\t0\t0\t0\t1\t2",
			"v100\t0\t0\t0\t1\t1",
		}},
		// 80 min: 2 is pending at 10:20, 4 and 5 not yet submitted, 6 ended
		{"09:00-10:20", at(10, 20), []string{
			"a100\t2\t5\t3.75\t1\t2",
			"a100,v100\t1\t4\t3\t0\t0",
		}},
		// 40 min: 6 is pending at 09:40, waiting for 8 GPUs
		{"09:00-09:40", at(9, 40), []string{
			"a100\t2\t3.7\t5.5\t1\t8",
			"a100,v100\t1\t2\t3\t0\t0",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkPanelRows(t, grafana, at(9, 0), tc.to, now, []panelRows{
				{"jobs-users.json", 24, cols, "", tc.want},
			})
		})
	}
}

// TestGPUTypeSummaryPanel: the jobs-and-users panel "Helios summary per GPU
// type" gives, for the analytics window of 2026-03-02 (the runs of
// typedRuns, characterized at 11:30), each cluster's GPU jobs of each type,
// most GPU hours first: c's a100 jobs are 1 (ended, 4 GPUs for 1.5 h after
// a 30-minute wait), 2 (running) and 6 (cancelled before it started); 3
// ran on both types; 4 is pending on v100 (no ended job: NaN times and
// rates); cluster d has its own a100 row.
// The untyped pending job, the trace job and the CPU job are in no row.
func TestGPUTypeSummaryPanel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse; skipped with -short")
	}
	cfg, conn, at := typedRuns(t)
	w := analytics.Window{Since: at(0, 0), Until: at(24, 0)}
	r, err := analytics.NewRunner(analytics.Config{Database: cfg.Database, TimeZone: "UTC"}, conn,
		slog.New(slog.DiscardHandler), prometheus.NewRegistry(), func() time.Time { return at(11, 30) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunWindow(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	// the window variable has no All: expanded with every variable at All,
	// its value is empty
	window := strings.NewReplacer("window_id =  AND", "window_id = '"+w.ID()+"' AND").Replace
	checkPanelRows(t, grafanaConn(t, cfg), at(0, 0), at(24, 0), window, []panelRows{{"jobs-users.json", 25,
		"SELECT cluster, gpu_type, gpu_jobs, users, round(avg_gpu_num, 3), med_gpu_num, avg_run_time_gpu, med_run_time_gpu, " +
			"avg_que_time_gpu, med_que_time_gpu, complete_rate_gpu, cancel_rate_gpu, fail_rate_gpu, gpu_hours", "", []string{
			"c\ta100\t3\t1\t4.667\t4\t5400\t5400\t1800\t1800\t0.5\t0.5\t0\t6",
			"c\ta100,v100\t1\t1\t3\t3\t7200\t7200\t0\t0\t1\t0\t0\t6",
			"c\tv100\t1\t1\t1\t1\tNaN\tNaN\tNaN\tNaN\tNaN\tNaN\tNaN\t0",
			"d\ta100\t1\t1\t2\t2\t1800\t1800\t3600\t3600\t1\t0\t0\t1",
		}}})
}
