package live

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// BenchmarkLoadJobs measures reading the jobs table for a pass, on a table of
// a million jobs submitted over 400 days (a SUBMIT and an END row each), with
// the default 30-day window: "incremental" is what every pass between
// retrains reads (jobs with an event stamped in the last 10 minutes or later, 229 here),
// "window" what a retrain reads (the whole window, 76,235 jobs).
func BenchmarkLoadJobs(b *testing.B) {
	const jobs = 1_000_000
	ch, conn := schematest.Database(b)
	ctx := context.Background()
	db := ch.Database
	end := time.Now().UTC().Truncate(time.Second)
	step := int64(400*24*3600) / jobs
	base := end.Unix() - jobs*step
	for _, ev := range []struct {
		kind, state string
		offset      int64 // event time after submit
		version     int
	}{{"SUBMIT", "PENDING", 0, 1}, {"END", "COMPLETED", 7200, 4}} {
		q := fmt.Sprintf(`INSERT INTO %s.jobs (cluster, job_id, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version)
SELECT 'c1', toString(number), concat('u', toString(number %% 500)), 'gpu', '%s', toDateTime(%d + number * %d),
  if(%d > 0, toDateTime(%d + number * %d + 60), NULL), if(%d > 0, toDateTime(%d + number * %d + %d), NULL),
  toUInt32(1 + number %% 8), '%s', toDateTime(%d + number * %d + %d), toDateTime(%d + number * %d + %d), (%d + number * %d + %d) * 8 + %d
FROM system.numbers LIMIT %d`, db, ev.state, base, step,
			ev.offset, base, step, ev.offset, base, step, ev.offset,
			ev.kind, base, step, ev.offset, base, step, ev.offset, base, step, ev.offset, ev.version, jobs)
		if err := conn.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	from := end.Add(-30 * 24 * time.Hour)
	for _, tc := range []struct {
		name  string
		since int64
	}{{"incremental", end.Add(-10 * time.Minute).Unix()}, {"window", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				recs, _, err := loadJobs(ctx, conn, db, from, tc.since)
				if err != nil {
					b.Fatal(err)
				}
				n = len(recs)
			}
			b.ReportMetric(float64(n), "jobs")
		})
	}
}
