package analytics_test

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

var benchJobs = flag.Int("analytics.bench-jobs", 1_000_000, "synthetic jobs BenchmarkCharacterize runs on")

// BenchmarkCharacterize runs every characterization job over a window of
// -analytics.bench-jobs synthetic jobs (default 1,000,000; 3 rows each in
// the jobs table, read FINAL), the speed goal being under 10 s on 2
// cores. Run it with -benchtime 1x: one run of a million jobs is the figure.
//
//	go test ./analytics -run '^$' -bench Characterize -benchtime 1x
func BenchmarkCharacterize(b *testing.B) {
	cfg, conn := schematest.Database(b)
	ctx := context.Background()
	since := time.Date(2020, 4, 1, 0, 0, 0, 0, time.UTC)
	t0 := time.Now()
	if err := analytics.SyntheticJobs(ctx, conn, cfg.Database, "bench", *benchJobs, since, 180); err != nil {
		b.Fatal(err)
	}
	b.Logf("inserted %d synthetic jobs in %v", *benchJobs, time.Since(t0))
	w := analytics.Window{Since: since, Until: since.AddDate(0, 0, 180)}
	r, err := analytics.NewRunner(analytics.Config{Database: cfg.Database, Lookback: 30 * 24 * time.Hour},
		conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), func() time.Time { return w.Until })
	if err != nil {
		b.Fatal(err)
	}
	pid := schematest.ClickHouse(b).PID()
	cpu0 := cpuSeconds(b, pid)
	b.ResetTimer()
	var res *analytics.RunResult
	for b.Loop() {
		if res, err = r.RunWindow(ctx, w); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// ClickHouse's CPU time per run: what the run costs whatever else the
	// machine is doing (wall time on a shared machine is not)
	b.ReportMetric((cpuSeconds(b, pid)-cpu0)/float64(b.N), "ch-cpu-s/op")
	if res.WindowJobs != uint64(*benchJobs) {
		b.Fatalf("characterized %d jobs; want %d", res.WindowJobs, *benchJobs)
	}
	b.ReportMetric(float64(res.WindowJobs)/res.Seconds, "jobs/s")
	b.Logf("prepare %.2fs", res.PrepareS)
	for _, j := range res.Jobs {
		b.Logf("job %-12s %.2fs %v", j.Job, j.Seconds, j.Rows)
	}
}

// lastMonthOfHalfYear seeds -analytics.bench-jobs synthetic jobs submitted
// over 180 days and returns the window of the last 30.
func lastMonthOfHalfYear(b *testing.B) (chconn.Config, driver.Conn, analytics.Window) {
	cfg, conn := schematest.Database(b)
	since := time.Date(2020, 4, 1, 0, 0, 0, 0, time.UTC)
	if err := analytics.SyntheticJobs(context.Background(), conn, cfg.Database, "bench", *benchJobs, since, 180); err != nil {
		b.Fatal(err)
	}
	return cfg, conn, analytics.Window{Since: since.AddDate(0, 0, 150), Until: since.AddDate(0, 0, 180)}
}

// BenchmarkCharacterizeLastMonth runs every characterization job over the
// last 30 days of -analytics.bench-jobs synthetic jobs submitted over 180
// days: the 120 days before the lookback (30 days) are read only through
// the scan of job_runs' end times that finds the earlier runs still holding
// or waiting for GPUs in the window. "unmerged" keeps the three rows of
// every run, as just inserted: each run has a row with no end, so every one
// is a candidate that FINAL reads again (the worst case); "merged" runs
// OPTIMIZE … FINAL first, as background merges leave old partitions.
//
//	go test ./analytics -run '^$' -bench CharacterizeLastMonth -benchtime 1x
func BenchmarkCharacterizeLastMonth(b *testing.B) {
	cfg, conn, w := lastMonthOfHalfYear(b)
	ctx := context.Background()
	r, err := analytics.NewRunner(analytics.Config{Database: cfg.Database, Lookback: 30 * 24 * time.Hour},
		conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), func() time.Time { return w.Until })
	if err != nil {
		b.Fatal(err)
	}
	pid := schematest.ClickHouse(b).PID()
	for _, merged := range []bool{false, true} {
		name := "unmerged"
		if merged {
			name = "merged"
			if err := conn.Exec(ctx, "OPTIMIZE TABLE "+cfg.Database+".job_runs FINAL"); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(name, func(b *testing.B) {
			cpu0 := cpuSeconds(b, pid)
			var res *analytics.RunResult
			for b.Loop() {
				if res, err = r.RunWindow(ctx, w); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuSeconds(b, pid)-cpu0)/float64(b.N), "ch-cpu-s/op")
			b.ReportMetric(float64(res.WindowJobs)/res.Seconds, "jobs/s")
			b.Logf("%d jobs in the window, %d read, prepare %.2fs", res.WindowJobs, res.SnapshotJobs, res.PrepareS)
		})
	}
}

// BenchmarkCapacityQueries runs the capacity-planning queries that read
// job_runs over the last 30 days of -analytics.bench-jobs synthetic jobs
// submitted over 180 days (merged, as old partitions are).
//
//	go test ./analytics -run '^$' -bench CapacityQueries -benchtime 1x
func BenchmarkCapacityQueries(b *testing.B) {
	cfg, conn, w := lastMonthOfHalfYear(b)
	ctx := context.Background()
	if err := conn.Exec(ctx, "OPTIMIZE TABLE "+cfg.Database+".job_runs FINAL"); err != nil {
		b.Fatal(err)
	}
	pid := schematest.ClickHouse(b).PID()
	for _, q := range analytics.CapacityQueries() {
		if !strings.Contains(q.SQL, "job_runs") {
			continue
		}
		b.Run(q.Name, func(b *testing.B) {
			cpu0 := cpuSeconds(b, pid)
			for b.Loop() {
				if _, err := analytics.RunCapacityQuery(ctx, conn, cfg.Database, q, w, w.Until, time.UTC, 30*24*time.Hour); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuSeconds(b, pid)-cpu0)/float64(b.N), "ch-cpu-s/op")
		})
	}
}

// cpuSeconds is the user + system CPU time of process pid so far (Linux).
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// fields after the command name, which is in parentheses: utime and
	// stime are the 14th and 15th fields of the line, in clock ticks
	// (100 a second on Linux)
	fs := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	u, _ := strconv.ParseFloat(fs[11], 64)
	s, _ := strconv.ParseFloat(fs[12], 64)
	return (u + s) / 100
}
