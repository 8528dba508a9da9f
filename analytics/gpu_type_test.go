package analytics_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// typedJobEvents are the events of jobs on GPUs of two types, in March and
// April 2026: alice's 8 × a100 for 10 days in March (waited 1 h); bob's
// 2 × v100 across the month's end, 2 h in each month (waited 2 h); carol's
// untyped request for 3 GPUs, given a100 and v100 (the Slurm source's
// joined type) for 10 h (waited 30 min); erin's 1 × a100 for 1 h and
// frank's 2 × a100 for 1 h (waited 600 s and 6,000 s); dave's 1 × a100
// still pending; hank's 1 × a100, cancelled before it started, which is
// neither a delay nor pending; and gus's CPU job, which no GPU figure
// counts.
func typedJobEvents() []schemas.JobEvent {
	at := func(month time.Month, day, h, m int) int64 {
		return time.Date(2026, month, day, h, m, 0, 0, time.UTC).UnixMilli()
	}
	ev := func(typ schemas.JobEventType, id, user string, gpus int64, gpuType string, state schemas.JobState, submit, start, end int64) schemas.JobEvent {
		event := max(submit, start, end)
		return schemas.JobEvent{Type: typ, EventMillis: event, JobID: id, User: user, Partition: "gpu", State: state,
			SubmitMillis: submit, StartMillis: start, EndMillis: end, GPUs: gpus, GPUType: gpuType,
			ArrayTaskID: schemas.Unknown, UID: schemas.Unknown, ExitCode: schemas.Unknown, Priority: schemas.Unknown,
			TimeLimitS: schemas.Unknown, NodeCount: schemas.Unknown, CPUs: schemas.Unknown, MemReqBytes: schemas.Unknown}
	}
	run := func(id, user string, gpus int64, asked, given string, submit, start, end int64) []schemas.JobEvent {
		return []schemas.JobEvent{
			ev(schemas.JobSubmit, id, user, gpus, asked, schemas.StatePending, submit, 0, 0),
			ev(schemas.JobStart, id, user, gpus, given, schemas.StateRunning, submit, start, 0),
			ev(schemas.JobEnd, id, user, gpus, given, schemas.StateCompleted, submit, start, end),
		}
	}
	var out []schemas.JobEvent
	out = append(out, run("1", "alice", 8, "a100", "a100", at(3, 10, 0, 0), at(3, 10, 1, 0), at(3, 20, 1, 0))...)
	out = append(out, run("2", "bob", 2, "v100", "v100", at(3, 31, 20, 0), at(3, 31, 22, 0), at(4, 1, 2, 0))...)
	out = append(out, run("3", "carol", 3, "", "a100,v100", at(4, 2, 0, 0), at(4, 2, 0, 30), at(4, 2, 10, 30))...)
	out = append(out, run("5", "erin", 1, "a100", "a100", at(4, 5, 0, 0), at(4, 5, 0, 10), at(4, 5, 1, 10))...)
	out = append(out, run("6", "frank", 2, "a100", "a100", at(4, 6, 0, 0), at(4, 6, 1, 40), at(4, 6, 2, 40))...)
	out = append(out, run("7", "gus", 0, "", "", at(4, 7, 0, 0), at(4, 7, 0, 5), at(4, 7, 5, 0))...)
	out = append(out, ev(schemas.JobSubmit, "8", "hank", 1, "a100", schemas.StatePending, at(4, 8, 0, 0), 0, 0),
		ev(schemas.JobEnd, "8", "hank", 1, "a100", schemas.StateCancelled, at(4, 8, 0, 0), 0, at(4, 8, 1, 0)))
	return append(out, ev(schemas.JobSubmit, "4", "dave", 1, "a100", schemas.StatePending, at(4, 3, 0, 0), 0, 0))
}

// typedDatabase returns a fresh database holding typedJobEvents as
// cluster "c"'s Slurm events.
func typedDatabase(t *testing.T) (driver.Conn, string) {
	t.Helper()
	cfg, conn := schematest.Database(t)
	if err := ingest.InsertJobEvents(context.Background(), conn, cfg.Database, "c", schemas.SourceSlurm, typedJobEvents()); err != nil {
		t.Fatal(err)
	}
	return conn, cfg.Database
}

// TestGPUTypeMonthly: gpu_type_monthly gives each GPU type's GPU hours, mean
// busy GPUs and share of the month from the runs that held GPUs in it, and
// the queuing delay of the runs submitted in it; a job given two types is a
// row of its own, a pending run counts apart from the delays, and a window
// that starts mid-month counts the month's hours and submits inside it only;
// months are those of the time zone given.
func TestGPUTypeMonthly(t *testing.T) {
	ctx := context.Background()
	conn, db := typedDatabase(t)
	var q analytics.CapacityQuery
	for _, c := range analytics.CapacityQueries() {
		if c.Name == "gpu_type_monthly" {
			q = c
		}
	}
	if q.Name == "" {
		t.Fatal("no capacity query gpu_type_monthly")
	}
	wantCols := []string{"month", "cluster", "gpu_type", "jobs", "gpu_hours", "mean_busy_gpus", "share_of_month",
		"started", "p50_wait_s", "p90_wait_s", "pending"}
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		since time.Time
		loc   *time.Location
		want  []string
	}{
		{
			// March, 744 h: a100 1,920 GPU-h (2.58 busy), v100 4 of 1,924;
			// April, 720 h: carol's 30 of 37, bob's 4, erin's and frank's 3;
			// waits 600 and 6,000 s interpolate to 3,300 and 5,460.
			name:  "March and April",
			since: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
			want: []string{
				"2026-03-01 c a100 1 1920 2.6 0.9979 1 3600 3600 0",
				"2026-03-01 c v100 1 4 0 0.0021 1 7200 7200 0",
				"2026-04-01 c a100,v100 1 30 0 0.8108 1 1800 1800 0",
				"2026-04-01 c v100 1 4 0 0.1081 0 - - 0",
				"2026-04-01 c a100 2 3 0 0.0811 2 3300 5460 1",
			},
		},
		{
			// from March 15: 408 h of March, alice's 121 h inside (968
			// GPU-h, 2.37 busy); she was submitted before the window, so
			// no a100 delay in March
			name:  "from mid-March",
			since: time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC),
			want: []string{
				"2026-03-01 c a100 1 968 2.4 0.9959 0 - - 0",
				"2026-03-01 c v100 1 4 0 0.0041 1 7200 7200 0",
				"2026-04-01 c a100,v100 1 30 0 0.8108 1 1800 1800 0",
				"2026-04-01 c v100 1 4 0 0.1081 0 - - 0",
				"2026-04-01 c a100 2 3 0 0.0811 2 3300 5460 1",
			},
		},
		{
			// months of Asia/Kolkata (+05:30): bob's run, submitted at
			// 01:30 on April 1 there, is all April's (8 GPU-h, 8 of 41);
			// the window's March is 738.5 h
			name:  "months of Asia/Kolkata",
			since: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
			loc:   kolkata,
			want: []string{
				"2026-03-01 c a100 1 1920 2.6 1 1 3600 3600 0",
				"2026-04-01 c a100,v100 1 30 0 0.7317 1 1800 1800 0",
				"2026-04-01 c v100 1 8 0 0.1951 1 7200 7200 0",
				"2026-04-01 c a100 2 3 0 0.0732 2 3300 5460 1",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := analytics.Window{Since: tc.since, Until: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}
			loc := tc.loc
			if loc == nil {
				loc = time.UTC
			}
			res, err := analytics.RunCapacityQuery(ctx, conn, db, q, w, farFuture, loc, 30*24*time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Columns, wantCols) {
				t.Fatalf("columns %q; want %q", res.Columns, wantCols)
			}
			var got []string
			for _, r := range res.Rows {
				cells := make([]string, len(r))
				for i, v := range r {
					if v == nil {
						cells[i] = "-"
					} else {
						cells[i] = fmt.Sprint(v)
					}
				}
				got = append(got, strings.Join(cells, " "))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestGPUTypeScope: the characterization tables break the window's GPU jobs
// down by GPU type (scope 'gpu_type'): April's a100 jobs are erin's and
// frank's (completed, 1 h each, waits 600 and 6,000 s), hank's (cancelled
// before it started) and dave's (pending); carol's run on both types is
// under "a100,v100"; gus's CPU job is in no type's rows, and no row has an
// empty type. A type's 'all' class is its GPU jobs.
func TestGPUTypeScope(t *testing.T) {
	ctx := context.Background()
	conn, db := typedDatabase(t)
	w := analytics.Window{Since: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := newRunner(t, conn, db, farFuture).RunWindow(ctx, w); err != nil {
		t.Fatal(err)
	}
	rows := func(q string, args ...any) []string {
		t.Helper()
		r, err := conn.Query(ctx, q, append([]any{w.ID()}, args...)...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		defer r.Close()
		var out []string
		for r.Next() {
			var s string
			if err := r.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	summary := rows(`SELECT concat(scope_value, ' ', toString(job_num), ' ', toString(gpu_job_num), ' ', toString(cpu_job_num), ' ',
	toString(ended_job_num), ' ', toString(unfinished_job_num), ' ', toString(users), ' ', toString(avg_gpu_num), ' ',
	toString(med_gpu_num), ' ', toString(avg_run_time_gpu), ' ', toString(avg_que_time_gpu), ' ', toString(med_que_time_gpu), ' ',
	toString(round(complete_rate, 4)), ' ', toString(round(cancel_rate, 4)), ' ', toString(complete_gpu_time))
FROM ` + db + `.analytics_summary WHERE window_id = ? AND scope = 'gpu_type' ORDER BY scope_value`)
	want := []string{
		"a100 4 4 0 3 1 4 1.25 1 3600 3300 3300 0.6667 0.3333 10800",
		"a100,v100 1 1 0 1 0 1 3 3 36000 1800 1800 1 0 108000",
	}
	if !reflect.DeepEqual(summary, want) {
		t.Errorf("analytics_summary, scope gpu_type:\n%s\nwant\n%s", strings.Join(summary, "\n"), strings.Join(want, "\n"))
	}
	state := rows(`SELECT concat(scope_value, ' ', job_class, ' ', state, ' ', toString(jobs), ' ', toString(round(job_share, 4)))
FROM ` + db + `.analytics_state WHERE window_id = ? AND scope = 'gpu_type' ORDER BY scope_value, job_class, state`)
	want = []string{
		"a100 all CANCELLED 1 0.3333", "a100 all COMPLETED 2 0.6667",
		"a100 gpu CANCELLED 1 0.3333", "a100 gpu COMPLETED 2 0.6667",
		"a100,v100 all COMPLETED 1 1", "a100,v100 gpu COMPLETED 1 1",
	}
	if !reflect.DeepEqual(state, want) {
		t.Errorf("analytics_state, scope gpu_type:\n%s\nwant\n%s", strings.Join(state, "\n"), strings.Join(want, "\n"))
	}
	dur := rows(`SELECT concat(scope_value, ' ', job_class, ' ', metric, ' ', toString(jobs), ' ', toString(p50_s), ' ', toString(max_s))
FROM ` + db + `.analytics_duration WHERE window_id = ? AND scope = 'gpu_type' ORDER BY scope_value, job_class, metric`)
	want = []string{
		"a100 all queue 2 3300 6000", "a100 all run 2 3600 3600",
		"a100 gpu queue 2 3300 6000", "a100 gpu run 2 3600 3600",
		"a100,v100 all queue 1 1800 1800", "a100,v100 all run 1 36000 36000",
		"a100,v100 gpu queue 1 1800 1800", "a100,v100 gpu run 1 36000 36000",
	}
	if !reflect.DeepEqual(dur, want) {
		t.Errorf("analytics_duration, scope gpu_type:\n%s\nwant\n%s", strings.Join(dur, "\n"), strings.Join(want, "\n"))
	}
	// The CDF of a100's GPU run times: both 3,600 s, so none at or under
	// 10^3.5 s and both at 10^3.6 s (3,981 s).
	cdf := rows(`SELECT concat(scope_value, ' ', toString(jobs), ' ', toString(sumIf(jobs_le, le_s < 3600)), ' ', toString(anyIf(jobs_le, le_s > 3900 AND le_s < 4000)))
FROM ` + db + `.analytics_duration_cdf WHERE window_id = ? AND scope = 'gpu_type' AND job_class = 'gpu' AND metric = 'run'
GROUP BY scope_value, jobs ORDER BY scope_value`)
	want = []string{"a100 2 0 2", "a100,v100 1 0 0"}
	if !reflect.DeepEqual(cdf, want) {
		t.Errorf("analytics_duration_cdf, scope gpu_type:\n%s\nwant\n%s", strings.Join(cdf, "\n"), strings.Join(want, "\n"))
	}
	if n := rows(`SELECT toString(count()) FROM ` + db + `.analytics_summary WHERE window_id = ? AND scope = 'gpu_type' AND scope_value = ''`); n[0] != "0" {
		t.Errorf("%s summary rows of an empty GPU type; want none", n[0])
	}
}
