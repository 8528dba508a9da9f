package replay

import (
	"context"
	"testing"
)

// BenchmarkHPC2N replays the 202,871-job HPC2N trace (240 processors, one
// pool, blocking queue) under FIFO, SJF and QSSF, one op being all three:
// the goal is under 30 s. The trace is read once, outside the timing.
func BenchmarkHPC2N(b *testing.B) {
	w := loadReal(b, "swf/HPC2N-2002-2.2-cln.swf.gz")
	b.ResetTimer()
	for range b.N {
		for _, p := range Policies {
			r, err := Run(context.Background(), w, p, Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.ElapsedS, string(p)+"_s")
			if p == QSSF {
				b.ReportMetric(r.Predictor.FitS, "qssf_fit_s")
			}
		}
	}
	b.ReportMetric(float64(len(w.Jobs)), "jobs")
}
