package live

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// BenchmarkLoadJobs measures reading the jobs for a pass, on a million jobs
// submitted over 400 days (a SUBMIT and an END event each, in job_events and
// through its views in jobs), with the default 30-day window: "incremental"
// is what every pass between retrains reads (jobs with an event stamped in
// the last 10 minutes or later), "window" what a retrain reads (the whole
// window).
func BenchmarkLoadJobs(b *testing.B) {
	ch, conn := schematest.Database(b)
	ctx := context.Background()
	end := time.Now().UTC().Truncate(time.Second)
	fillJobEvents(b, conn, ch.Database, 1_000_000, 400*24*time.Hour, end)
	from := end.Add(-30 * 24 * time.Hour)
	for _, tc := range []struct {
		name  string
		since int64
	}{{"incremental", end.Add(-10 * time.Minute).Unix()}, {"window", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				recs, _, err := loadJobs(ctx, conn, ch.Database, from, tc.since)
				if err != nil {
					b.Fatal(err)
				}
				n = len(recs)
			}
			b.ReportMetric(float64(n), "jobs")
		})
	}
}

// fillJobEvents writes n jobs, submitted evenly over span up to last, into
// db's job_events (the views fill jobs and job_runs): a SUBMIT and, 2 hours
// later, an END event each, as schematest.FillJobs writes them into jobs,
// each with a memory request (8–32 GiB) as Slurm jobs have.
func fillJobEvents(tb testing.TB, conn driver.Conn, db string, n int, span time.Duration, last time.Time) {
	tb.Helper()
	step := int64(span/time.Second) / int64(n)
	base := last.Unix() - int64(n-1)*step
	for _, ev := range []struct {
		kind, state string
		offset      int64 // event time after submit
	}{{"SUBMIT", "PENDING", 0}, {"END", "COMPLETED", 7200}} {
		at := fmt.Sprintf("toDateTime(%d + number * %d + %d)", base, step, ev.offset)
		start, end := "NULL", "NULL"
		if ev.kind == "END" {
			start, end = fmt.Sprintf("toDateTime(%d + number * %d + 60)", base, step), at
		}
		q := fmt.Sprintf(`INSERT INTO %[1]s.job_events (event_ts, event_ms, event_type, cluster, source, job_id, user, partition_name, state,
  submit_time, start_time, end_time, time_limit_s, gpus, mem_req_bytes, inserted_at)
SELECT %[2]s, 0, '%[3]s', 'c1', 'slurm', toString(number), concat('u', toString(number %% 500)), 'gpu', '%[4]s', toDateTime(%[5]d + number * %[6]d), %[7]s, %[8]s,
  toUInt32(14400), toUInt32(1 + number %% 8), toUInt64(1 + number %% 4) * 8589934592, %[2]s
FROM system.numbers LIMIT %[9]d`, db, at, ev.kind, ev.state, base, step, start, end, n)
		if err := conn.Exec(context.Background(), q); err != nil {
			tb.Fatalf("fill %s.job_events: %v", db, err)
		}
	}
}
