package migrate_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/migrate"
)

// TestJobRunsBackfill applies the migrations up to 0025 to an empty
// database, stores the events of a requeued job (two runs under one id, each
// with its own submit time) and of a job run once, and then applies 0026:
// job_runs holds every run, written from the events stored before it
// existed, as its view computes them from events stored after; jobs keeps
// the latest run. Applying 0026's statements again (a part that migrated at
// the same time, or a retry after its backfill failed) adds copies that
// collapse under FINAL.
func TestJobRunsBackfill(t *testing.T) {
	db, conn := emptyDatabase(t)
	ctx := context.Background()
	migs, at := applyBefore(t, conn, db, 26, "job_runs")
	// job r: run 1 submitted 09:00, ran 10:00-20:00, preempted; run 2
	// submitted 20:00, ran 20:10-00:10, completed. Job s: one run.
	// (event time, type, job, state, submit, start, end)
	events := func(rows ...string) {
		t.Helper()
		q := "INSERT INTO " + db + ".job_events (event_ts, event_ms, event_type, cluster, source, job_id, user, state, submit_time, start_time, end_time, gpus) " +
			"SELECT toDateTime(r.1, 'UTC'), 0, r.2, 'c', 'slurm', r.3, 'alice', r.4, toDateTime(r.5, 'UTC'), " +
			"nullIf(toDateTime(if(r.6 = '', '1970-01-01 00:00:00', r.6), 'UTC'), toDateTime(0, 'UTC')), " +
			"nullIf(toDateTime(if(r.7 = '', '1970-01-01 00:00:00', r.7), 'UTC'), toDateTime(0, 'UTC')), toNullable(toUInt32(4)) " +
			"FROM (SELECT arrayJoin([" + strings.Join(rows, ", ") + "]) AS r)"
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("insert job events: %v\n%s", err, q)
		}
	}
	events(
		"('2026-03-02 09:00:00', 'SUBMIT', 'r', 'PENDING', '2026-03-02 09:00:00', '', '')",
		"('2026-03-02 10:00:00', 'START', 'r', 'RUNNING', '2026-03-02 09:00:00', '2026-03-02 10:00:00', '')",
		"('2026-03-02 20:00:00', 'END', 'r', 'PREEMPTED', '2026-03-02 09:00:00', '2026-03-02 10:00:00', '2026-03-02 20:00:00')",
		"('2026-03-02 20:00:01', 'SUBMIT', 'r', 'PENDING', '2026-03-02 20:00:00', '', '')",
		"('2026-03-02 20:10:00', 'START', 'r', 'RUNNING', '2026-03-02 20:00:00', '2026-03-02 20:10:00', '')",
		"('2026-03-02 11:00:00', 'SUBMIT', 's', 'PENDING', '2026-03-02 11:00:00', '', '')",
	)
	runs := func() []string {
		t.Helper()
		return queryStrings(t, conn, "SELECT concat(job_id, ' ', toString(submit_time), ' ', state, ' ', last_event, ' ', toString(version)) FROM "+
			db+".job_runs FINAL ORDER BY job_id, submit_time")
	}
	if _, err := migrate.ApplyMigrations(ctx, conn, db, migs[:at+1], discard); err != nil {
		t.Fatalf("apply 0026: %v", err)
	}
	version := func(ts, typ string) string {
		// jobs_mv's version: (event seconds * 1000 + ms) * 8 + the type's order
		v := queryStrings(t, conn, "SELECT toString((toUInt64(toDateTime('"+ts+"', 'UTC')) * 1000) * 8 + "+
			map[string]string{"SUBMIT": "1", "START": "3", "END": "4"}[typ]+")")
		return v[0]
	}
	want := []string{
		"r 2026-03-02 09:00:00 PREEMPTED END " + version("2026-03-02 20:00:00", "END"),
		"r 2026-03-02 20:00:00 RUNNING START " + version("2026-03-02 20:10:00", "START"),
		"s 2026-03-02 11:00:00 PENDING SUBMIT " + version("2026-03-02 11:00:00", "SUBMIT"),
	}
	if got := runs(); !reflect.DeepEqual(got, want) {
		t.Errorf("job_runs FINAL after 0026 = %q; want the backfilled runs %q", got, want)
	}

	// Events stored after 0026 reach job_runs through its view.
	events("('2026-03-03 00:10:00', 'END', 'r', 'COMPLETED', '2026-03-02 20:00:00', '2026-03-02 20:10:00', '2026-03-03 00:10:00')")
	want[1] = "r 2026-03-02 20:00:00 COMPLETED END " + version("2026-03-03 00:10:00", "END")
	if got := runs(); !reflect.DeepEqual(got, want) {
		t.Errorf("job_runs FINAL after a later END = %q; want %q", got, want)
	}
	if got := queryStrings(t, conn, "SELECT concat(job_id, ' ', toString(submit_time), ' ', state) FROM "+db+".jobs FINAL ORDER BY job_id"); !reflect.DeepEqual(got,
		[]string{"r 2026-03-02 20:00:00 COMPLETED", "s 2026-03-02 11:00:00 PENDING"}) {
		t.Errorf("jobs FINAL = %q; want the latest run of each job", got)
	}

	// 0026 once more: the backfill's copies collapse.
	applyAgain(t, conn, migs[at])
	if got := runs(); !reflect.DeepEqual(got, want) {
		t.Errorf("job_runs FINAL after 0026 ran twice = %q; want %q", got, want)
	}
}

// TestJobRunsColumns: job_runs has the columns of jobs, in the same order and
// of the same types, so that what reads one reads the other and
// ingest's repair writes both with one column list.
func TestJobRunsColumns(t *testing.T) {
	db, conn := emptyDatabase(t)
	if _, err := migrate.Apply(context.Background(), conn, db, discard); err != nil {
		t.Fatal(err)
	}
	cols := func(table string) []string {
		return queryStrings(t, conn, "SELECT concat(name, ' ', type) FROM system.columns WHERE database = '"+db+"' AND table = '"+table+"'") // in the table's order

	}
	jobs, runs := cols("jobs"), cols("job_runs")
	if len(jobs) == 0 || !reflect.DeepEqual(runs, jobs) {
		t.Errorf("job_runs columns = %q; want those of jobs, %q", runs, jobs)
	}
}

// applyBefore applies to db every migration before the one of version,
// which must be called name, and returns the migrations and its index.
func applyBefore(t *testing.T, conn driver.Conn, db string, version uint32, name string) ([]migrate.Migration, int) {
	t.Helper()
	migs, err := migrate.Load(schemas.Migrations, db)
	if err != nil {
		t.Fatal(err)
	}
	at := -1
	for i, m := range migs {
		if m.Version == version {
			at = i
		}
	}
	if at < 0 || migs[at].Name != name {
		t.Fatalf("no migration %04d_%s among %d migrations", version, name, len(migs))
	}
	if _, err := migrate.ApplyMigrations(context.Background(), conn, db, migs[:at], discard); err != nil {
		t.Fatalf("apply migrations before %04d: %v", version, err)
	}
	return migs, at
}

// applyAgain runs m's statements once more, as a part that migrated at the
// same time, or a retry after a failed statement, would.
func applyAgain(t *testing.T, conn driver.Conn, m migrate.Migration) {
	t.Helper()
	for i, stmt := range m.Statements {
		if err := conn.Exec(context.Background(), stmt); err != nil {
			t.Fatalf("%04d statement %d again: %v", m.Version, i+1, err)
		}
	}
}
