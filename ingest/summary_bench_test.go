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
// hold a million ended and summarized jobs (schematest.FillJobs, one run
// each): each
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
	copyJobRuns(b, conn, db)
	if err := conn.Exec(ctx, `INSERT INTO `+db+`.job_run_summary (cluster, job_id, user, state, gpus, submit_time, start_time, end_time, elapsed_s, gpu_hours, computed_at, version)
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

// BenchmarkSummarizerBacklog measures the pass that summarizes a backlog of
// ended jobs that ran on GPUs with telemetry: 2,000 jobs of 1–8 GPUs over
// ten days on 20 eight-GPU hosts (each host runs one job at a time), with a
// sample per GPU a minute from the first submit to the last end (2.3
// million samples). Each iteration deletes the
// summaries and times the full pass that writes them again.
func BenchmarkSummarizerBacklog(b *testing.B) {
	const (
		jobs  = 2000
		hosts = 20
		span  = 10 * 24 * time.Hour
	)
	ch, conn := schematest.Database(b)
	ctx := context.Background()
	db := ch.Database
	last := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	schematest.FillJobs(b, conn, db, jobs, span, last)
	copyJobRuns(b, conn, db)
	// FillJobs: job n is submitted at base + n*step, starts 60 s later and
	// ends 7,200 s after submit, on 1 + n%8 GPUs.
	step := int64(span/time.Second) / jobs
	base := last.Unix() - (jobs-1)*step
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %[1]s.gpu_allocations (cluster, host, gpu_index, gpu_uuid, mig_uuid, job_id, user, alloc_start, alloc_end, source, version)
SELECT 'c1', concat('h', toString(j %% %[2]d)), toInt32(g), concat('h', toString(j %% %[2]d), '-', toString(g)), '', toString(j), 'u',
  toDateTime(%[3]d + j * %[4]d + 60), toDateTime(%[3]d + j * %[4]d + 7200), 'slurm', 1
FROM (SELECT j, arrayJoin(range(toUInt64(1 + j %% 8))) AS g FROM (SELECT number AS j FROM system.numbers LIMIT %[5]d))`, db, hosts, base, step, jobs),
		fmt.Sprintf(`INSERT INTO %[1]s.gpu_samples (ts, ts_millis, cluster, host, gpu_index, gpu_uuid, mig_uuid, gpu_util, fb_used_bytes, power_mw, energy_mj, sm_active, kafka_partition, kafka_offset)
SELECT toDateTime(%[2]d + intDiv(number, %[3]d) * 60), 0, 'c1', concat('h', toString(intDiv(number %% %[3]d, 8))), toUInt16(number %% 8),
  concat('h', toString(intDiv(number %% %[3]d, 8)), '-', toString(number %% 8)), '',
  toUInt8(number %% 101), toUInt64(1e9), toUInt32(250000), toUInt64(number), toFloat32(0.5), 0, number
FROM system.numbers LIMIT %[4]d`, db, base, hosts*8, int64((span+2*time.Hour)/time.Minute)*hosts*8),
	} {
		if err := conn.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		b.StopTimer()
		if err := conn.Exec(ctx, "TRUNCATE TABLE "+db+".job_run_summary"); err != nil {
			b.Fatal(err)
		}
		sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: db}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), time.Now)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if n, err := sum.Once(ctx); err != nil || n != jobs {
			b.Fatalf("Once = %d, %v; want %d jobs summarized", n, err, jobs)
		}
	}
	b.StopTimer()
	if n := schematest.Count(b, conn, db+".job_run_summary WHERE samples < 100"); n != 0 {
		b.Fatalf("%d summaries with fewer than 100 samples; every job ran for 119 minutes with a sample a minute", n)
	}
}
