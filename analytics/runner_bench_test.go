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

var benchGPUs = flag.Int("analytics.bench-gpus", 512, "GPUs reporting every minute in BenchmarkCapacityFromSamples")

// BenchmarkCapacityFromSamples measures the capacity step of a run's
// preparation: the GPUs that reported samples in the window, read from
// gpu_samples_1m (a row per GPU and minute: -analytics.bench-gpus GPUs, 8
// per host, every minute of the 30-day window and of the 5 days before it,
// as the schedule's month window reads them; every 64th GPU stops 20 days
// into the window), and gpu_inventory. "none" runs before the
// samples are inserted (the preparation without the scan), "samples" after
// (the scan finds every GPU), "configured" with the cluster's capacity
// given (--analytics.capacity), which needs no scan. 20,000 synthetic jobs
// are in the window; the figure that matters is prepare-s.
//
//	go test ./analytics -run '^$' -bench CapacityFromSamples -benchtime 3x
func BenchmarkCapacityFromSamples(b *testing.B) {
	cfg, conn := schematest.Database(b)
	ctx := context.Background()
	since := time.Date(2020, 4, 1, 0, 0, 0, 0, time.UTC)
	w := analytics.Window{Since: since, Until: since.AddDate(0, 0, 30)}
	if err := analytics.SyntheticJobs(ctx, conn, cfg.Database, "bench", 20_000, since, 30); err != nil {
		b.Fatal(err)
	}
	pid := schematest.ClickHouse(b).PID()
	clock := func() time.Time { return w.Until }
	quiet := slog.New(slog.DiscardHandler)
	plain, err := analytics.NewRunner(analytics.Config{Database: cfg.Database, Lookback: 30 * 24 * time.Hour},
		conn, quiet, prometheus.NewRegistry(), clock)
	if err != nil {
		b.Fatal(err)
	}
	configured, err := analytics.NewRunner(analytics.Config{Database: cfg.Database, Lookback: 30 * 24 * time.Hour,
		Capacity: []analytics.Capacity{{Cluster: "bench", GPUs: uint32(*benchGPUs)}}},
		conn, quiet, prometheus.NewRegistry(), clock)
	if err != nil {
		b.Fatal(err)
	}
	seed := func() {
		from := since.AddDate(0, 0, -5)
		minutes := strconv.Itoa(int(w.Until.Sub(from) / time.Minute))
		down := strconv.FormatInt(since.AddDate(0, 0, 20).Unix(), 10)
		t0 := time.Now()
		// every 64th GPU stops reporting 20 days into the window, so that
		// the capacity step reads it for the whole window
		q := "INSERT INTO " + cfg.Database + ".gpu_samples_1m (minute, cluster, host, gpu_uuid, mig_uuid) " +
			"SELECT minute, 'bench', concat('node', toString(intDiv(gpu, 8))), concat('GPU-', toString(gpu)), '' " +
			"FROM (SELECT intDiv(number, " + minutes + ") AS gpu, " +
			"toDateTime(" + strconv.FormatInt(from.Unix(), 10) + " + (number % " + minutes + ") * 60) AS minute " +
			"FROM numbers(" + strconv.Itoa(*benchGPUs) + " * " + minutes + ")) " +
			"WHERE gpu % 64 != 0 OR minute < toDateTime(" + down + ")"
		if err := conn.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
		if err := conn.Exec(ctx, "OPTIMIZE TABLE "+cfg.Database+".gpu_samples_1m FINAL"); err != nil {
			b.Fatal(err)
		}
		if err := conn.Exec(ctx, "INSERT INTO "+cfg.Database+".gpu_inventory (cluster, host, gpu_uuid, mig_uuid, last_seen) "+
			"SELECT cluster, host, gpu_uuid, mig_uuid, max(minute) FROM "+cfg.Database+".gpu_samples_1m GROUP BY cluster, host, gpu_uuid, mig_uuid"); err != nil {
			b.Fatal(err)
		}
		b.Logf("inserted %d GPUs × %s minutes of rollup rows and their inventory in %v", *benchGPUs, minutes, time.Since(t0))
	}
	for _, tc := range []struct {
		name   string
		r      *analytics.Runner
		source string
	}{
		{"none", plain, "peak"},
		{"samples", plain, "inventory"},
		{"configured", configured, "config"},
	} {
		if tc.name == "samples" {
			seed()
		}
		b.Run(tc.name, func(b *testing.B) {
			cpu0 := cpuSeconds(b, pid)
			var prep float64
			for b.Loop() {
				res, err := tc.r.RunWindow(ctx, w, "capacity")
				if err != nil {
					b.Fatal(err)
				}
				prep += res.PrepareS
			}
			b.ReportMetric((cpuSeconds(b, pid)-cpu0)/float64(b.N), "ch-cpu-s/op")
			b.ReportMetric(prep/float64(b.N), "prepare-s")
			var gpus uint32
			var source string
			if err := conn.QueryRow(ctx, "SELECT gpus, source FROM "+cfg.Database+".analytics_capacity WHERE window_id = ? AND cluster = 'bench' AND vc = ''", w.ID()).Scan(&gpus, &source); err != nil {
				b.Fatal(err)
			}
			if source != tc.source || (tc.source != "peak" && gpus != uint32(*benchGPUs)) {
				b.Fatalf("capacity %d GPUs from %s; want %d from %s", gpus, source, *benchGPUs, tc.source)
			}
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
