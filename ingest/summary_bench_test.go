package ingest_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// BenchmarkSummarizerPass measures one summarizer pass on tables that already
// hold a million ended and summarized jobs (schematest.FillJobs): each
// iteration adds one ended job and times the pass that summarizes it. "full"
// looks at every ended job each pass (--summary.full-every 0, the behaviour
// before the watermark); "incremental" reads only the jobs whose END arrived
// since the last pass.
func BenchmarkSummarizerPass(b *testing.B) {
	const jobs = 1_000_000
	ch, conn := schematest.Database(b)
	ctx := context.Background()
	db := ch.Database
	// A year of jobs, all ended at least an hour ago and summarized, so
	// only the jobs each iteration adds are left to do.
	schematest.FillJobs(b, conn, db, jobs, 400*24*time.Hour, time.Now().Add(-3*time.Hour))
	if err := conn.Exec(ctx, `INSERT INTO `+db+`.job_summary (cluster, job_id, user, state, gpus, submit_time, start_time, end_time, elapsed_s, gpu_hours, computed_at, version)
SELECT cluster, job_id, user, state, assumeNotNull(gpus), submit_time, assumeNotNull(start_time), assumeNotNull(end_time), 7140, 1.98, now(), 1
FROM `+db+`.jobs WHERE last_event = 'END'`); err != nil {
		b.Fatal(err)
	}
	next := jobs
	for _, tc := range []struct {
		name      string
		fullEvery time.Duration
	}{{"full", 0}, {"incremental", time.Hour}} {
		b.Run(tc.name, func(b *testing.B) {
			sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: db, FullEvery: tc.fullEvery}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), time.Now)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sum.Once(ctx); err != nil { // the first pass is always full
				b.Fatal(err)
			}
			for b.Loop() {
				b.StopTimer()
				insertEndedJob(b, conn, db, fmt.Sprint(next), time.Now().UTC().Truncate(time.Second))
				next++
				b.StartTimer()
				if n, err := sum.Once(ctx); err != nil || n != 1 {
					b.Fatalf("Once = %d, %v; want the new job summarized", n, err)
				}
			}
		})
	}
}
