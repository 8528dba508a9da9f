package live

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/predictor/duration"
)

// BenchmarkReplay measures a pass's replay of a 100,000-job window when a
// handful of new jobs want features: the cost every pass pays between
// retrains (a retrain also computes the features of every ended job).
func BenchmarkReplay(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 100_000
	recs := make([]*rec, n)
	for i := range recs {
		u := fmt.Sprint("u", rng.IntN(500))
		submit := base.Add(time.Duration(i) * 26 * time.Second)
		start := submit.Add(time.Duration(rng.IntN(600)) * time.Second)
		run := time.Duration(10+rng.IntN(20000)) * time.Second
		r := &rec{key: key{"c1", fmt.Sprint(i)}, user: u, ended: i < n-20, start: &start}
		r.job = duration.Job{User: u, Executable: fmt.Sprint("e", rng.IntN(50)), Queue: "q", Submit: submit, ReqTime: 8 * time.Hour, Procs: 1 + rng.IntN(8)}
		if r.ended {
			r.job.Run, r.job.End = run, start.Add(run)
		}
		recs[i] = r
	}
	for _, mode := range []struct {
		name string
		want func(*rec) bool
	}{
		{"new-jobs", func(r *rec) bool { return !r.ended }},
		{"retrain", func(*rec) bool { return true }},
	} {
		b.Run(mode.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got := 0
				replay(recs, mode.want, func(*rec, duration.Features) { got++ })
				if got == 0 {
					b.Fatal("no features computed")
				}
			}
		})
	}
}
