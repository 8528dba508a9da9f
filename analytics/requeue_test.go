package analytics_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// requeuedJobEvents are the job events the Slurm source publishes for a job
// that Slurm requeued (OPERATIONS.md "Requeued Slurm jobs"): job 100 of
// alice, 4 GPUs, submitted at 09:00 on day, started at 10:00 and preempted
// at 20:00; its second run under the same id, submitted at the requeue
// (its first event 1 ms after the first run's END), started at 20:10 and
// completed at 00:10 the next day. And job 7 twice, two jobs that shared an
// id (slurmctld restarted clean): bob's, 1 GPU, 01:00-02:00, and carol's,
// 2 GPUs, submitted at 03:00, 03:30-04:30.
func requeuedJobEvents(day time.Time) []schemas.JobEvent {
	at := func(h, m int) int64 {
		return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute).UnixMilli()
	}
	ev := func(typ schemas.JobEventType, event int64, id, user string, gpus int64, state schemas.JobState, submit, start, end int64) schemas.JobEvent {
		return schemas.JobEvent{Type: typ, EventMillis: event, JobID: id, User: user, Partition: "gpu", State: state,
			SubmitMillis: submit, StartMillis: start, EndMillis: end, GPUs: gpus,
			ArrayTaskID: schemas.Unknown, UID: schemas.Unknown, ExitCode: schemas.Unknown, Priority: schemas.Unknown,
			TimeLimitS: schemas.Unknown, NodeCount: schemas.Unknown, CPUs: schemas.Unknown, MemReqBytes: schemas.Unknown}
	}
	s1, r1, e1 := at(9, 0), at(10, 0), at(20, 0)
	s2, r2, e2 := e1+1, at(20, 10), at(24, 10)
	return []schemas.JobEvent{
		ev(schemas.JobSubmit, s1, "100", "alice", 4, schemas.StatePending, s1, 0, 0),
		ev(schemas.JobStart, r1, "100", "alice", 4, schemas.StateRunning, s1, r1, 0),
		ev(schemas.JobEnd, e1, "100", "alice", 4, schemas.StatePreempted, s1, r1, e1),
		ev(schemas.JobSubmit, s2, "100", "alice", 4, schemas.StatePending, s2, 0, 0),
		ev(schemas.JobStart, r2, "100", "alice", 4, schemas.StateRunning, s2, r2, 0),
		ev(schemas.JobEnd, e2, "100", "alice", 4, schemas.StateCompleted, s2, r2, e2),

		ev(schemas.JobSubmit, at(1, 0), "7", "bob", 1, schemas.StatePending, at(1, 0), 0, 0),
		ev(schemas.JobEnd, at(2, 0), "7", "bob", 1, schemas.StateCompleted, at(1, 0), at(1, 0), at(2, 0)),
		ev(schemas.JobSubmit, at(3, 0), "7", "carol", 2, schemas.StatePending, at(3, 0), 0, 0),
		ev(schemas.JobEnd, at(4, 30), "7", "carol", 2, schemas.StateCompleted, at(3, 0), at(3, 30), at(4, 30)),
	}
}

// TestRequeuedJobRuns: every run of a requeued job, and each of two jobs that
// shared an id, counts in the analytics and the capacity queries — its GPU
// time, its wait and its hold, and its final state — as `sacct
// --duplicates` lists them. Read from jobs (the latest run of each id),
// alice would have 16 GPU-hours, not 56, no GPU busy while her first run
// ran, and bob would be gone.
func TestRequeuedJobRuns(t *testing.T) {
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	db := cfg.Database
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	if err := ingest.InsertJobEvents(ctx, conn, db, "c", schemas.SourceSlurm, requeuedJobEvents(day)); err != nil {
		t.Fatal(err)
	}
	w := analytics.Window{Since: day, Until: day.AddDate(0, 0, 2)}
	if _, err := newRunner(t, conn, db, farFuture, analytics.Capacity{Cluster: "c", GPUs: 8}).RunWindow(ctx, w, "users", "utilization"); err != nil {
		t.Fatal(err)
	}

	// users: alice's runs hold 4 GPUs for 10 h + 4 h = 56 GPU-hours and
	// wait 1 h + 10 min; one was preempted (cancelled), one completed.
	rows, err := conn.Query(ctx, "SELECT user, jobs, ended_jobs, gpu_seconds, queue_s, complete_rate, cancel_rate FROM "+db+
		".analytics_users WHERE window_id = ? AND scope = 'cluster' ORDER BY user", w.ID())
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for rows.Next() {
		var user string
		var jobs, ended uint64
		var gpuS, queueS, complete, cancel float64
		if err := rows.Scan(&user, &jobs, &ended, &gpuS, &queueS, &complete, &cancel); err != nil {
			t.Fatal(err)
		}
		users = append(users, fmt.Sprintf("%s: %d jobs, %d ended, %g GPU-h, queued %g s, completed %g, cancelled %g",
			user, jobs, ended, gpuS/3600, queueS, complete, cancel))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"alice: 2 jobs, 2 ended, 56 GPU-h, queued 4200 s, completed 0.5, cancelled 0.5",
		"bob: 1 jobs, 1 ended, 1 GPU-h, queued 0 s, completed 1, cancelled 0",
		"carol: 1 jobs, 1 ended, 2 GPU-h, queued 1800 s, completed 1, cancelled 0",
	}
	if !reflect.DeepEqual(users, want) {
		t.Errorf("analytics_users:\n%q\nwant every run counted:\n%q", users, want)
	}

	// utilization: 4 GPUs busy in every hour of alice's first run, 4 wanted
	// in the hour it waited.
	hourly := map[int][2]float64{}
	rows, err = conn.Query(ctx, "SELECT toHour(hour_start), busy_gpus, pending_gpus FROM "+db+
		".analytics_utilization_hourly WHERE window_id = ? AND scope = 'cluster' AND hour_start >= ? AND hour_start < ?", w.ID(), day, day.AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var h uint8
		var busy, pending float64
		if err := rows.Scan(&h, &busy, &pending); err != nil {
			t.Fatal(err)
		}
		hourly[int(h)] = [2]float64{busy, pending}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(hourly) != 24 {
		t.Fatalf("analytics_utilization_hourly holds %d hours of %s; want 24", len(hourly), day.Format(time.DateOnly))
	}
	for h := 10; h < 20; h++ {
		if got := hourly[h]; got != [2]float64{4, 0} {
			t.Errorf("hour %02d:00: busy %v, pending %v GPUs; want 4, 0 (alice's first run)", h, got[0], got[1])
		}
	}
	if got := hourly[9]; got != [2]float64{0, 4} {
		t.Errorf("hour 09:00: busy %v, pending %v GPUs; want 0, 4 (alice's first run waiting)", got[0], got[1])
	}
	if got := hourly[1]; got != [2]float64{1, 0} {
		t.Errorf("hour 01:00: busy %v, pending %v GPUs; want 1, 0 (bob's job 7)", got[0], got[1])
	}

	// gpu_hours_monthly: both of alice's runs (2 jobs, 56 GPU-hours of the
	// month's 59), and bob's and carol's job 7 each.
	capacity := func(name string) []string {
		t.Helper()
		for _, q := range analytics.CapacityQueries() {
			if q.Name != name {
				continue
			}
			res, err := analytics.RunCapacityQuery(ctx, conn, db, q, w, farFuture, time.UTC, 30*24*time.Hour)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var out []string
			for _, r := range res.Rows {
				cells := make([]string, len(r))
				for i, v := range r {
					cells[i] = fmt.Sprint(v)
				}
				out = append(out, strings.Join(cells, " "))
			}
			return out
		}
		t.Fatalf("no capacity query %s", name)
		return nil
	}
	if got, want := capacity("gpu_hours_monthly"), []string{
		"2026-03-01 c gpu alice 2 56 0.9492",
		"2026-03-01 c gpu carol 1 2 0.0339",
		"2026-03-01 c gpu bob 1 1 0.0169",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("gpu_hours_monthly:\n%q\nwant every run counted:\n%q", got, want)
	}
	// demand_weekly (hourly_demand): GPU-hours held or wanted over the
	// window's 48 hours: alice's first run 4 x (1 h + 10 h), her second
	// 4 x (10 min + 4 h), bob's 1, carol's 2 x (30 min + 1 h): 64.67 / 48.
	if got, want := capacity("demand_weekly"), []string{
		"c 2026-03-02 48 1.3 0 4 4 4 4",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("demand_weekly:\n%q\nwant every run counted:\n%q", got, want)
	}
	// queue_by_size: alice's runs waited 3600 s and 600 s (quantiles
	// interpolated between them), carol's 1800 s, bob's 0 s.
	if got, want := capacity("queue_by_size"), []string{
		"c 1 1 0 0 0 0 0 0 0 0",
		"c 2 1 1800 1800 1800 1800 1800 0 0 0",
		"c 4 2 2100 2100 3300 3570 3600 0 0 0",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("queue_by_size:\n%q\nwant every run counted:\n%q", got, want)
	}
}
