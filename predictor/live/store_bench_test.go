package live

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

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
// each with a memory request (8–32 GiB) and a GPU type (a100 or h100) as
// Slurm jobs have.
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
  submit_time, start_time, end_time, time_limit_s, gpus, gpu_type, mem_req_bytes, inserted_at)
SELECT %[2]s, 0, '%[3]s', 'c1', 'slurm', toString(number), concat('u', toString(number %% 500)), 'gpu', '%[4]s', toDateTime(%[5]d + number * %[6]d), %[7]s, %[8]s,
  toUInt32(14400), toUInt32(1 + number %% 8), if(number %% 2 = 0, 'a100', 'h100'), toUInt64(1 + number %% 4) * 8589934592, %[2]s
FROM system.numbers LIMIT %[9]d`, db, at, ev.kind, ev.state, base, step, start, end, n)
		if err := conn.Exec(context.Background(), q); err != nil {
			tb.Fatalf("fill %s.job_events: %v", db, err)
		}
	}
}

// BenchmarkOutlived measures one pass's lookup of the predicted jobs the
// window no longer holds (Runner.outlived), on BenchmarkLoadJobs's million
// jobs: n predicted jobs submitted evenly between 90 and 30 days ago, none
// in the window's store, all ended (so each is found and scored). A
// cluster whose limits are shorter than --predictor.history has only jobs
// that queued longer than that to wait for; 10,000 is far beyond.
func BenchmarkOutlived(b *testing.B) {
	ch, conn := schematest.Database(b)
	ctx := context.Background()
	end := time.Now().UTC().Truncate(time.Second)
	const jobs, span = 1_000_000, 400 * 24 * time.Hour
	fillJobEvents(b, conn, ch.Database, jobs, span, end)
	step := int64(span/time.Second) / jobs
	base := end.Unix() - (jobs-1)*step
	waitFrom, from := end.Add(-90*24*time.Hour), end.Add(-30*24*time.Hour)
	first := (waitFrom.Unix() - base + step - 1) / step // the first job submitted at or after waitFrom
	last := (from.Unix() - base) / step
	for _, n := range []int64{100, 10_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := benchRunner(b, conn, ch.Database)
			for i := range n {
				num := first + i*(last-first)/n
				r.predicted[key{"c1", fmt.Sprint(num)}] = predRow{submit: time.Unix(base+num*step, 0).UTC(), user: fmt.Sprint("u", num%500), gpus: uint32(1 + num%8)}
			}
			var found int
			for b.Loop() {
				recs, err := r.outlived(ctx, waitFrom)
				if err != nil {
					b.Fatal(err)
				}
				found = len(recs)
			}
			if found != int(n) {
				b.Fatalf("outlived found %d runs of %d predicted jobs", found, n)
			}
			b.ReportMetric(float64(found), "jobs")
		})
	}
}

// BenchmarkLoadState measures what a restarted predictor reads before its
// first pass (Runner.loadState), on a million jobs submitted over 400 days,
// each predicted and scored: "wait-90d" reads predictions and outcomes back
// to the default --predictor.outcome-wait (2160h), "window-30d" back to
// --predictor.history only, as before jobs outliving the window were
// waited for.
func BenchmarkLoadState(b *testing.B) {
	ch, conn := schematest.Database(b)
	ctx := context.Background()
	end := time.Now().UTC().Truncate(time.Second)
	fillPredictions(b, conn, ch.Database, 1_000_000, 400*24*time.Hour, end)
	from := end.Add(-30 * 24 * time.Hour)
	for _, tc := range []struct {
		name string
		wait time.Duration
	}{{"window-30d", 30 * 24 * time.Hour}, {"wait-90d", 90 * 24 * time.Hour}} {
		b.Run(tc.name, func(b *testing.B) {
			r := benchRunner(b, conn, ch.Database)
			var kept int
			for b.Loop() {
				st, err := r.loadState(ctx, from, end.Add(-tc.wait))
				if err != nil {
					b.Fatal(err)
				}
				kept = len(st.predicted)
			}
			if kept == 0 {
				b.Fatal("no prediction read back")
			}
			b.ReportMetric(float64(kept), "kept")
		})
	}
}

// benchRunner returns a Runner on db with the default configuration.
func benchRunner(b *testing.B, conn driver.Conn, db string) *Runner {
	b.Helper()
	r, err := New(Config{Database: db}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), time.Now)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// fillPredictions writes n jobs' predictions, submitted evenly over span up
// to last, into db's predictions, and each job's outcome (it ran 2 hours
// from a minute after its submit) into prediction_outcomes.
func fillPredictions(tb testing.TB, conn driver.Conn, db string, n int, span time.Duration, last time.Time) {
	tb.Helper()
	step := int64(span/time.Second) / int64(n)
	base := last.Unix() - int64(n-1)*step
	submit := fmt.Sprintf("toDateTime(%d + number * %d)", base, step)
	for _, q := range []string{
		`INSERT INTO %[1]s.predictions (cluster, job_id, user, partition_name, gpus, time_limit_s, submit_time, model_version, segment, fitted,
  predicted_s, lower_s, upper_s, gpu_service_s, after_end, predicted_at, version)
SELECT 'c1', toString(number), concat('u', toString(number %% 500)), 'gpu', toUInt32(1 + number %% 8), toUInt32(14400), %[2]s, toUInt64(1), 'exact', toUInt8(1),
  6000, 2000, 18000, 6000 * (1 + number %% 8), toUInt8(0), %[2]s, toUInt64(1)
FROM system.numbers LIMIT %[3]d`,
		`INSERT INTO %[1]s.prediction_outcomes (cluster, job_id, user, gpus, state, submit_time, start_time, end_time, model_version, predicted_at,
  after_end, ran, predicted_s, lower_s, upper_s, actual_s, abs_error_s, log_ratio, abs_log_error, within_2x, within_interval, recorded_at, version)
SELECT 'c1', toString(number), concat('u', toString(number %% 500)), toUInt32(1 + number %% 8), 'COMPLETED', %[2]s, %[2]s + 60, %[2]s + 7260, toUInt64(1), %[2]s,
  toUInt8(0), toUInt8(1), 6000, 2000, 18000, 7200, 1200, log(6000 / 7200), -log(6000 / 7200), toUInt8(1), toUInt8(1), %[2]s + 7260, toUInt64(1)
FROM system.numbers LIMIT %[3]d`,
	} {
		if err := conn.Exec(context.Background(), fmt.Sprintf(q, db, submit, n)); err != nil {
			tb.Fatalf("fill %s predictions: %v", db, err)
		}
	}
}
