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
// hold a million ended and summarized jobs: each iteration adds one ended job
// and runs the pass that summarizes it. "full" looks at every ended job each
// pass (--summary.full-every 0, the behaviour before the watermark);
// "incremental" reads only the jobs whose END arrived since the last pass.
func BenchmarkSummarizerPass(b *testing.B) {
	const jobs = 1_000_000
	ch, conn := schematest.Database(b)
	ctx := context.Background()
	db := ch.Database
	base := time.Now().UTC().Add(-400 * 24 * time.Hour).Truncate(time.Second).Unix()
	// One job every 30 s over about a year, ended 100 s after it started;
	// each with its summary, so only new jobs are left to do.
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s.jobs (cluster, job_id, user, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version)
SELECT 'c1', toString(number), concat('u', toString(number %% 500)), 'COMPLETED', toDateTime(%d + number * 30), toDateTime(%d + number * 30 + 5),
  toDateTime(%d + number * 30 + 105), 1, 'END', toDateTime(%d + number * 30 + 105), toDateTime(%d + number * 30 + 105), number * 8 + 4
FROM system.numbers LIMIT %d`, db, base, base, base, base, base, jobs),
		fmt.Sprintf(`INSERT INTO %s.job_summary (cluster, job_id, user, state, gpus, submit_time, start_time, end_time, elapsed_s, gpu_hours, computed_at, version)
SELECT 'c1', toString(number), 'u', 'COMPLETED', 1, toDateTime(%d + number * 30), toDateTime(%d + number * 30 + 5), toDateTime(%d + number * 30 + 105), 100, 0.03, now(), 1
FROM system.numbers LIMIT %d`, db, base, base, base, jobs),
	} {
		if err := conn.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
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
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				now := time.Now().UTC().Truncate(time.Second)
				id, start := fmt.Sprint(next), now.Add(-time.Minute)
				next++
				batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".jobs (cluster, job_id, user, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version)")
				if err != nil {
					b.Fatal(err)
				}
				g := uint32(1)
				if err := batch.Append("c1", id, "u1", "COMPLETED", start, &start, &now, &g, "END", now, now, uint64(now.Unix())); err != nil {
					b.Fatal(err)
				}
				if err := batch.Send(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if n, err := sum.Once(ctx); err != nil || n != 1 {
					b.Fatalf("Once = %d, %v; want the new job summarized", n, err)
				}
			}
		})
	}
}
