package report

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

var benchJobs = flag.Int("report.bench-jobs", 1_000_000, "synthetic jobs BenchmarkReport characterizes before timing the report")

// BenchmarkReport times the report of a window of -report.bench-jobs
// synthetic jobs (default 1,000,000) once they are characterized: reading
// every result table (Load) and rendering the page (Render). The goal
// is under 5 s on 2 cores. Inserting and characterizing the jobs is set-up,
// not timed (BenchmarkCharacterize in ./analytics times that).
//
//	go test ./analytics/report -run '^$' -bench Report -benchtime 3x
func BenchmarkReport(b *testing.B) {
	cfg, conn := schematest.Database(b)
	ctx := context.Background()
	since := time.Date(2020, 4, 1, 0, 0, 0, 0, time.UTC)
	w := analytics.Window{Since: since, Until: since.AddDate(0, 0, 180)}
	t0 := time.Now()
	if err := analytics.SyntheticJobs(ctx, conn, cfg.Database, "bench", *benchJobs, since, 180); err != nil {
		b.Fatal(err)
	}
	runner, err := analytics.NewRunner(analytics.Config{Database: cfg.Database, Lookback: 30 * 24 * time.Hour},
		conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), func() time.Time { return w.Until })
	if err != nil {
		b.Fatal(err)
	}
	res, err := runner.RunWindow(ctx, w)
	if err != nil {
		b.Fatal(err)
	}
	if res.WindowJobs != uint64(*benchJobs) {
		b.Fatalf("characterized %d jobs; want %d", res.WindowJobs, *benchJobs)
	}
	b.Logf("set-up: %d jobs inserted and characterized in %v (characterization %.1fs)", *benchJobs, time.Since(t0).Round(time.Millisecond), res.Seconds)

	var loadS, renderS float64
	var figures int
	b.ResetTimer()
	for b.Loop() {
		t1 := time.Now()
		r, err := Load(ctx, conn, LoadOptions{Database: cfg.Database, Window: w, Cluster: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		cw := &countingWriter{}
		if err := Render(cw, r); err != nil {
			b.Fatal(err)
		}
		loadS += t2.Sub(t1).Seconds()
		renderS += time.Since(t2).Seconds()
		figures = len(r.Figures())
		if r.Headline.Jobs != int64(*benchJobs) || cw.n == 0 {
			b.Fatalf("report of %d jobs, %d bytes; want %d jobs", r.Headline.Jobs, cw.n, *benchJobs)
		}
	}
	b.ReportMetric(loadS/float64(b.N), "load-s/op")
	b.ReportMetric(renderS/float64(b.N), "render-s/op")
	b.ReportMetric(float64(figures), "figures")
}

// countingWriter counts the bytes of the page.
type countingWriter struct{ n int }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	return io.Discard.Write(p)
}
