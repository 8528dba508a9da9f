package demand

import (
	"os"
	"testing"
	"time"
)

func TestExp(t *testing.T) {
	f, err := os.Open("../../../shared/data/philly/philly_node_sequence.csv")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	st := time.Now()
	s, err := ReadSeries(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("read %v: %d steps of %v from %s cap %v", time.Since(st), s.Len(), s.Step, s.Start, s.Capacity)
	for _, hl := range []time.Duration{-1, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour} {
		for _, ridge := range []float64{-1, 1e-3, 1e-2, 1e-1} {
			for _, h := range []time.Duration{10 * time.Minute, time.Hour, 6 * time.Hour} {
				c := Config{Horizon: h, HalfLife: hl, Ridge: ridge, TestFrom: time.Date(2017, 11, 17, 0, 0, 0, 0, time.UTC), TestUntil: DefaultTestFrom}
				st := time.Now()
				r, err := c.Backtest(s)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("hl=%v ridge=%g h=%v: ours %.3f/%.4f last %.3f/%.4f day %.3f/%.4f n=%d refits=%d rows=%d %v", hl, ridge, h, r.RMSENodes, r.SMAPE,
					r.Baselines["last"].RMSENodes, r.Baselines["last"].SMAPE, r.Baselines["day_ago"].RMSENodes, r.Baselines["day_ago"].SMAPE, r.N, r.Refits, r.TrainRows, time.Since(st))
			}
		}
	}
}
