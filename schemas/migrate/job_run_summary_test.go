package migrate_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas/migrate"
)

// TestJobRunSummaryBackfill applies the migrations up to 0026 to an empty
// database, writes job_summary as the summarizer before 0027 left it — job r
// summarized at its latest run, its older summary of another end (the
// previous month) still waiting for its delete at a lower version, and job s
// — and then applies 0027: job_run_summary holds each job's newest summary,
// keyed by its run's submit time. Applying 0027's statements again adds
// copies that collapse under FINAL.
func TestJobRunSummaryBackfill(t *testing.T) {
	db, conn := emptyDatabase(t)
	ctx := context.Background()
	migs, at := applyBefore(t, conn, db, 27, "job_run_summary")
	// (job, state, submit, start, end, gpu hours, flags, version)
	if err := conn.Exec(ctx, `INSERT INTO `+db+`.job_summary (cluster, job_id, user, state, gpus, submit_time, start_time, end_time, elapsed_s, gpu_hours, flags, computed_at, version)
SELECT 'c', r.1, 'alice', r.2, toUInt32(4), toDateTime(r.3, 'UTC'), toDateTime(r.4, 'UTC'), toDateTime(r.5, 'UTC'), toUInt32(0), r.6, r.7, toDateTime(r.5, 'UTC'), toUInt64(r.8)
FROM (SELECT arrayJoin([
  ('r', 'PREEMPTED', '2026-02-28 09:00:00', '2026-02-28 10:00:00', '2026-02-28 20:00:00', 40., ['low_util'], 1),
  ('r', 'COMPLETED', '2026-02-28 20:00:00', '2026-02-28 20:10:00', '2026-03-01 00:10:00', 16., emptyArrayString(), 2),
  ('s', 'COMPLETED', '2026-03-02 11:00:00', '2026-03-02 11:00:00', '2026-03-02 12:00:00', 4., emptyArrayString(), 3)]) AS r)`); err != nil {
		t.Fatalf("insert job summaries: %v", err)
	}
	summaries := func() []string {
		t.Helper()
		return queryStrings(t, conn, "SELECT concat(job_id, ' ', toString(submit_time), ' ', state, ' ', toString(end_time), ' ', toString(gpu_hours), ' ', toString(version)) FROM "+
			db+".job_run_summary FINAL ORDER BY job_id, submit_time")
	}
	if _, err := migrate.ApplyMigrations(ctx, conn, db, migs[:at+1], discard); err != nil {
		t.Fatalf("apply 0027: %v", err)
	}
	want := []string{
		"r 2026-02-28 20:00:00 COMPLETED 2026-03-01 00:10:00 16 2",
		"s 2026-03-02 11:00:00 COMPLETED 2026-03-02 12:00:00 4 3",
	}
	if got := summaries(); !reflect.DeepEqual(got, want) {
		t.Errorf("job_run_summary FINAL after 0027 = %q; want the newest summary of each job %q", got, want)
	}
	applyAgain(t, conn, migs[at])
	if got := summaries(); !reflect.DeepEqual(got, want) {
		t.Errorf("job_run_summary FINAL after 0027 ran twice = %q; want %q", got, want)
	}
}

// TestJobRunSummaryColumns: job_run_summary has the columns of job_summary,
// in the same order and of the same types, so that what read one reads the
// other.
func TestJobRunSummaryColumns(t *testing.T) {
	db, conn := emptyDatabase(t)
	if _, err := migrate.Apply(context.Background(), conn, db, discard); err != nil {
		t.Fatal(err)
	}
	cols := func(table string) []string {
		return queryStrings(t, conn, "SELECT concat(name, ' ', type) FROM system.columns WHERE database = '"+db+"' AND table = '"+table+"'") // in the table's order
	}
	old, runs := cols("job_summary"), cols("job_run_summary")
	if len(old) == 0 || !reflect.DeepEqual(runs, old) {
		t.Errorf("job_run_summary columns = %q; want those of job_summary, %q", runs, old)
	}
}
