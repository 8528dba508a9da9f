package dashboards

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestTraceProcessorsAsGPUs: the live job panels count a trace job without
// a GPU count (SWF, as `heliostat import` stores it) by its processors, as
// the analytics do, and a scheduler's job without one as a CPU job. Four
// jobs submitted on 2026-03-02, every variable at All, now() at 11:30:
//
//   - 1: trace, 4 processors, no GPU count: submitted 09:00, running since 10:00;
//   - 2: trace, 3 processors, no GPU count: submitted 10:00, pending;
//   - 3: slurm, 8 CPUs, no GPU count: submitted and running since 10:00;
//   - 4: slurm, 2 GPUs: submitted and running since 10:00.
//
// At 10:30 three jobs run on 4 + 0 + 2 = 6 GPUs and one waits for 3; jobs
// 1, 2 and 4 are GPU jobs, 3 a CPU job.
func TestTraceProcessorsAsGPUs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse; skipped with -short")
	}
	cfg, conn := schematest.Database(t)
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	start := at(10, 0)
	schematest.InsertJobRows(t, conn, cfg.Database, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, gpus, cpus, last_event, updated_at, inserted_at, version",
		[]any{"c", "1", "trace", "u", "1", "RUNNING", at(9, 0), &start, nil, new(uint32(4)), "START", start, start, uint64(1)},
		[]any{"c", "2", "trace", "u", "1", "PENDING", start, nil, nil, new(uint32(3)), "SUBMIT", start, start, uint64(1)},
		[]any{"c", "3", "slurm", "u", "cpu", "RUNNING", start, &start, nil, new(uint32(8)), "START", start, start, uint64(1)},
		[]any{"c", "4", "slurm", "u", "gpu", "RUNNING", start, &start, new(uint32(2)), new(uint32(16)), "START", start, start, uint64(1)})
	grafana := grafanaConn(t, cfg)
	// 09:00-11:30: a step of 60 s, so every time above starts a bucket.
	from, to := at(9, 0), at(11, 30)
	unix := func(h, m int) string { return fmt.Sprint(at(h, m).Unix()) }
	atHalfPast := " WHERE toUInt32(time) = " + unix(10, 30)
	now := strings.NewReplacer("now()", fmt.Sprintf("toDateTime(%d)", to.Unix())).Replace
	checkPanelRows(t, grafana, from, to, now, []panelRows{
		{"overview.json", 3, "SELECT running, pending, gpus_held, gpus_wanted", "", []string{"3\t1\t6\t3"}},
		{"overview.json", 9, "SELECT running_jobs, running_gpus, pending_jobs, pending_gpus", atHalfPast, []string{"3\t6\t1\t3"}},
		{"overview.json", 10, "SELECT running_jobs, running_gpus, pending_jobs, pending_gpus", atHalfPast, []string{"3\t6\t1\t3"}},
		{"jobs-users.json", 22, "SELECT running_jobs, running_gpus, pending_jobs, pending_gpus", atHalfPast, []string{"3\t6\t1\t3"}},
		{"jobs-users.json", 21, "SELECT toUInt32(time), gpu_jobs, cpu_jobs", "", []string{unix(9, 0) + "\t1\t0", unix(10, 0) + "\t2\t1"}},
	})
}

// panelRows is a check of a panel's rows: outer selects the compared
// columns from the panel's query (FROM (panel)), where filters them, and
// want is the rows as allRows prints them.
type panelRows struct {
	file  string
	id    int
	outer string
	where string
	want  []string
}

// checkPanelRows runs each panel's query over [from, to], every variable at
// All, after rewrite (nil: none), and compares its rows.
func checkPanelRows(t *testing.T, grafana driver.Conn, from, to time.Time, rewrite func(string) string, checks []panelRows) {
	t.Helper()
	for _, c := range checks {
		d, p := findPanel(t, c.file, c.id)
		sql, err := expandAll(d, p.Targets[0].RawSQL, from, to)
		if err != nil {
			t.Fatalf("%s: %v", panelName(d, p), err)
		}
		if rewrite != nil {
			sql = rewrite(sql)
		}
		sql = c.outer + " FROM (" + sql + ")" + c.where
		got, err := allRows(context.Background(), grafana, sql)
		if err != nil {
			t.Fatalf("%s: %v\n%s", panelName(d, p), err, sql)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %s = %q; want %q", panelName(d, p), c.outer, got, c.want)
		}
	}
}
