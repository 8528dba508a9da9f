package duration

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestAdaptiveSteps(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
	a := NewAdaptive(0.1)
	if w := a.Widen(); w != 1 {
		t.Fatalf("a new Adaptive widens by %v; want 1", w)
	}
	a.Observe(false) // +0.1·0.8
	if w := a.Widen(); !near(w, math.Exp(0.08)) {
		t.Errorf("after a miss: %v; want e^0.08", w)
	}
	a.Observe(true) // −0.1·0.2
	if w := a.Widen(); !near(w, math.Exp(0.06)) {
		t.Errorf("after a miss and a hit: %v; want e^0.06", w)
	}
	for range 1000 {
		a.Observe(false)
	}
	if w := a.Widen(); !near(w, math.Exp(maxAdaptLog)) {
		t.Errorf("after 1,000 misses: %v; want the bound e^%d", w, maxAdaptLog)
	}
	if s := a.State(); s.Observed != 1002 || s.Missed != 1001 || s.Widen != a.Widen() {
		t.Errorf("state %+v; want 1,002 observed, 1,001 missed", s)
	}

	off := NewAdaptive(-1)
	for range 10 {
		off.Observe(false)
	}
	if w := off.Widen(); w != 1 {
		t.Errorf("a negative rate moved the multiplier to %v", w)
	}
	if w := NewAdaptive(0).rate; w != DefaultAdaptRate {
		t.Errorf("rate 0 gives %v; want DefaultAdaptRate", w)
	}
	var none *Adaptive
	none.Observe(false)
	if w := none.Widen(); w != 1 {
		t.Errorf("a nil Adaptive widens by %v; want 1", w)
	}
	if s := none.State(); s != (AdaptiveState{Widen: 1}) {
		t.Errorf("a nil Adaptive's state %+v; want widen 1, nothing observed", s)
	}
}

// TestPredictWidened: widen multiplies the interval's log offsets and leaves
// the point alone; 0 means 1.
func TestPredictWidened(t *testing.T) {
	m := &Model{Rows: 1}
	f := Features{Segment: SegCold, X: make([]float64, len(featureNames(SegCold))), Fallback: math.Log(3600)}
	near := func(a, b time.Duration) bool { return (a - b).Abs() < time.Millisecond }
	for _, tc := range []struct {
		widen, logOffset float64
	}{{1, 1}, {0, 1}, {-2, 1}, {2, 2}, {0.5, 0.5}} {
		p, err := m.PredictWidened(f, 0, tc.widen)
		if err != nil {
			t.Fatal(err)
		}
		if !near(p.Point, time.Hour) || !near(p.Low, secs(math.Log(3600)-tc.logOffset)) || !near(p.High, secs(math.Log(3600)+tc.logOffset)) {
			t.Errorf("widen %v: %v [%v, %v]; want 1h [e^∓%v]", tc.widen, p.Point, p.Low, p.High, tc.logOffset)
		}
	}
}

// TestAdaptiveDrift: a calibrated model meets run times whose noise first
// doubles, then falls back below what it was fitted on. Its intervals alone
// cover far less than 80 % of the noisy jobs and far more of the quiet ones;
// corrected online, as each job's outcome arrives some jobs later, they
// cover about 80 % of each phase, and are narrower than the model's own in
// the quiet one.
func TestAdaptiveDrift(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m, err := FitCalibrated(coldRows(rng, 5000, 0.5), t0, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	const delay = 50 // outcomes arrive this many predictions later
	for _, phase := range []struct {
		name   string
		sd     float64
		static [2]float64 // the model's own coverage lies in this range
	}{
		{"noisy", 1.0, [2]float64{0, 0.6}},
		{"quiet", 0.25, [2]float64{0.95, 1}},
	} {
		a := NewAdaptive(DefaultAdaptRate)
		rows := coldRows(rng, 20000, phase.sd)
		type served struct {
			p Prediction
			y time.Duration
		}
		var queue []served
		var in, inStatic int
		var width, widthStatic float64
		// The first 2,000 jobs let the multiplier settle; the rest count.
		const settle = 2000
		for i, r := range rows {
			if len(queue) == delay {
				a.Observe(queue[0].p.Covers(queue[0].y))
				queue = queue[1:]
			}
			p, err := m.PredictWidened(r.F, 0, a.Widen())
			if err != nil {
				t.Fatal(err)
			}
			ps, _ := m.Predict(r.F, 0)
			y := secs(r.Y)
			queue = append(queue, served{p, y})
			if i < settle {
				continue
			}
			if p.Covers(y) {
				in++
			}
			if ps.Covers(y) {
				inStatic++
			}
			width += math.Log(p.High.Seconds() / p.Low.Seconds())
			widthStatic += math.Log(ps.High.Seconds() / ps.Low.Seconds())
		}
		n := float64(len(rows) - settle)
		got, static := float64(in)/n, float64(inStatic)/n
		if static < phase.static[0] || static > phase.static[1] {
			t.Errorf("%s: the model's own intervals cover %.3f; the test needs %v", phase.name, static, phase.static)
		}
		if math.Abs(got-IntervalLevel) > 0.02 {
			t.Errorf("%s: corrected intervals cover %.3f; want %.2f ± 0.02", phase.name, got, IntervalLevel)
		}
		if phase.sd < 0.5 && width >= widthStatic {
			t.Errorf("%s: corrected intervals (mean log width %.3f) are no narrower than the model's own (%.3f)", phase.name, width/n, widthStatic/n)
		}
	}
}
