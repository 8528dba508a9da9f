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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
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
