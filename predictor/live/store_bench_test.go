package live

import (
	"context"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// BenchmarkLoadJobs measures reading the jobs table for a pass, on a table of
// a million jobs submitted over 400 days (a SUBMIT and an END row each), with
// the default 30-day window: "incremental" is what every pass between
// retrains reads (jobs with an event stamped in the last 10 minutes or
// later), "window" what a retrain reads (the whole window).
func BenchmarkLoadJobs(b *testing.B) {
	ch, conn := schematest.Database(b)
	ctx := context.Background()
	end := time.Now().UTC().Truncate(time.Second)
	schematest.FillJobs(b, conn, ch.Database, 1_000_000, 400*24*time.Hour, end)
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
