package dashboards

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestGPUTypesPanel: the jobs-and-users panel "GPU types in the time range"
// gives each GPU type's runs, GPU hours and mean GPUs held in the range, and
// the runs pending at its end, every variable at All, now() at 11:30 on
// 2026-03-02. Runs:
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
func TestGPUTypesPanel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse; skipped with -short")
	}
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
