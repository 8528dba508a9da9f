package analytics_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestSummaryRunsEfficiency: the job events of a requeued job and of two jobs
// that shared an id (requeuedJobEvents), summarized by the real summarizer,
// count in efficiency as in the headline, every run once, in the window of
// its own submit time: the jobs and GPU hours of analytics_efficiency are the
// headline's. Alice's first run sat idle on 4 GPUs of h1 at 100 W for its
// 10 h (preempted), her second ran at 90 % and 300 W on h2 for 4 h; bob's
// and carol's job 7 have no telemetry. With one summary per job id,
// efficiency had 2 jobs and 18 GPU-hours against the headline's 4 and 59,
// and none of the first run's 40 idle GPU-hours.
func TestSummaryRunsEfficiency(t *testing.T) {
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	db := cfg.Database
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	if err := ingest.InsertJobEvents(ctx, conn, db, "c", schemas.SourceSlurm, requeuedJobEvents(day)); err != nil {
		t.Fatal(err)
	}
	// Alice's runs' GPUs (closed intervals) and a sample a minute of each
	// during the run, ends included.
	for _, r := range []struct {
		host     string
		from, to time.Time
		util     int
		mw       int
	}{
		{"h1", at(10, 0), at(20, 0), 0, 100_000},
		{"h2", at(20, 10), at(24, 10), 90, 300_000},
	} {
		for _, q := range []string{
			fmt.Sprintf(`INSERT INTO %[1]s.gpu_allocations (cluster, host, gpu_index, gpu_uuid, mig_uuid, job_id, user, alloc_start, alloc_end, source, version)
SELECT 'c', '%[2]s', toInt32(number), '', '', '100', 'alice', toDateTime(%[3]d), toDateTime(%[4]d), 'slurm', toUInt64(%[4]d) * 1000
FROM system.numbers LIMIT 4`, db, r.host, r.from.Unix(), r.to.Unix()),
			fmt.Sprintf(`INSERT INTO %[1]s.gpu_samples (ts, ts_millis, cluster, host, gpu_index, gpu_uuid, mig_uuid, gpu_util, power_mw, kafka_partition, kafka_offset)
SELECT toDateTime(%[3]d + k * 60), 0, 'c', '%[2]s', toUInt16(g), '', '', toUInt8(%[5]d), toUInt32(%[6]d), 0, 0
FROM (SELECT arrayJoin(range(4)) AS g, arrayJoin(range(toUInt64(%[4]d))) AS k)`, db, r.host, r.from.Unix(), int(r.to.Sub(r.from)/time.Minute)+1, r.util, r.mw),
		} {
			if err := conn.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: db}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(),
		func() time.Time { return farFuture })
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sum.Once(ctx); err != nil || n != 4 {
		t.Fatalf("Summarizer.Once = %d, %v; want 4 runs summarized", n, err)
	}

	type efficiency struct {
		jobs, sampled                uint64
		gpuHours, sampledHours, idle float64
		kwh                          float64
		idleAllocated                uint64
	}
	for _, tc := range []struct {
		w    analytics.Window
		want efficiency
	}{
		// Every run.
		{analytics.Window{Since: day, Until: day.AddDate(0, 0, 2)}, efficiency{4, 2, 59, 56, 40, 4*1 + 4*1.2, 1}},
		// Submitted before 15:00: alice's first run, bob's and carol's job
		// 7; after: alice's second run only.
		{analytics.Window{Since: day, Until: at(15, 0)}, efficiency{3, 1, 43, 40, 40, 4, 1}},
		{analytics.Window{Since: at(15, 0), Until: day.AddDate(0, 0, 2)}, efficiency{1, 1, 16, 16, 0, 4.8, 0}},
	} {
		t.Run(tc.w.ID(), func(t *testing.T) {
			if _, err := newRunner(t, conn, db, farFuture).RunWindow(ctx, tc.w, "jobs", "efficiency"); err != nil {
				t.Fatal(err)
			}
			h, err := analytics.ReadHeadline(ctx, conn, db, tc.w, "c")
			if err != nil {
				t.Fatal(err)
			}
			var got efficiency
			if err := conn.QueryRow(ctx, `SELECT jobs, sampled_jobs, gpu_hours, sampled_gpu_hours, idle_gpu_hours, energy_kwh, idle_allocated_jobs
				FROM `+db+`.analytics_efficiency WHERE window_id = ? AND cluster = 'c' AND scope = 'cluster'`, tc.w.ID()).Scan(
				&got.jobs, &got.sampled, &got.gpuHours, &got.sampledHours, &got.idle, &got.kwh, &got.idleAllocated); err != nil {
				t.Fatal(err)
			}
			if got.jobs != h.Jobs || !near(got.gpuHours, h.GPUSeconds/3600, 1e-9) {
				t.Errorf("analytics_efficiency: %d jobs, %g GPU-hours; want the headline's %d jobs, %g GPU-hours", got.jobs, got.gpuHours, h.Jobs, h.GPUSeconds/3600)
			}
			if got.jobs != tc.want.jobs || got.sampled != tc.want.sampled || !near(got.gpuHours, tc.want.gpuHours, 1e-9) ||
				!near(got.sampledHours, tc.want.sampledHours, 1e-9) || !near(got.idle, tc.want.idle, 1e-9) ||
				!near(got.kwh, tc.want.kwh, 1e-9) || got.idleAllocated != tc.want.idleAllocated {
				t.Errorf("analytics_efficiency = %+v; want %+v", got, tc.want)
			}
		})
	}
}
