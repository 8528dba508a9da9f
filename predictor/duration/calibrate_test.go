package duration

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// coldRows makes n rows of the cold-start segment whose log run time is
// 6 + x0 plus normal noise of standard deviation sd.
func coldRows(rng *rand.Rand, n int, sd float64) []Row {
	rows := make([]Row, n)
	for i := range rows {
		x := make([]float64, len(featureNames(SegCold)))
		for k := range x {
			x[k] = rng.Float64()
		}
		rows[i] = Row{F: Features{Segment: SegCold, X: x, Fallback: 6}, Y: 6 + x[0] + sd*rng.NormFloat64()}
	}
	return rows
}

// coverage is the share of rows whose run time falls in m's interval.
func coverage(t *testing.T, m *Model, rows []Row) float64 {
	t.Helper()
	in := 0
	for _, r := range rows {
		p, err := m.Predict(r.F, 0)
		if err != nil {
			t.Fatal(err)
		}
		if y := secs(r.Y); p.Low <= y && y <= p.High {
			in++
		}
	}
	return float64(in) / float64(len(rows))
}

// TestCalibrate: a model fitted when run times were less noisy than they are
// now covers far less than 80 % with its training residuals' interval; the
// interval scaled on later rows covers 80 % of still later ones, and a
// segment too small for a scale of its own takes the pooled one.
func TestCalibrate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	held, err := Fit(coldRows(rng, 4000, 0.5), t0)
	if err != nil {
		t.Fatal(err)
	}
	if held.segs[SegCold] == nil {
		t.Fatal("the cold-start segment was not fitted")
	}
	later := coldRows(rng, 4000, 1.0)
	// Three rows of another segment, answered by its history rule.
	for i := range 3 {
		x := make([]float64, len(featureNames(SegUser1)))
		later = append(later, Row{F: Features{Segment: SegUser1, X: x, Fallback: 5}, Y: 5 + float64(i)})
	}
	cal := Calibrate(held, later)
	if cal.Rows[SegCold] != 4000 || cal.Rows[SegUser1] != 3 || cal.Rows[SegExact] != 0 {
		t.Errorf("rows per segment %v; want 4000 cold, 3 user1, 0 exact", cal.Rows)
	}
	// The noise doubled, so the interval must about double.
	if s := cal.Scale[SegCold]; s < 1.8 || s > 2.2 {
		t.Errorf("cold-start scale %.3f; want about 2", s)
	}
	// Too few rows of its own: the scale of all rows together.
	if s := cal.Scale[SegUser1]; s < 1.8 || s > 2.2 {
		t.Errorf("user1 scale %.3f (3 rows); want the pooled one, about 2", s)
	}

	fresh := coldRows(rng, 20000, 1.0)
	if got := coverage(t, held, fresh); got > 0.6 {
		t.Errorf("uncalibrated coverage %.3f; the test needs it well below 0.8", got)
	}
	m := held.Calibrated(cal)
	if got := coverage(t, m, fresh); math.Abs(got-IntervalLevel) > 0.02 {
		t.Errorf("calibrated coverage %.3f; want %.2f ± 0.02", got, IntervalLevel)
	}
	if held.Calibration() != (Calibration{}) {
		t.Error("Calibrated changed the model it was called on")
	}
	// The point prediction does not move.
	for _, r := range fresh[:100] {
		a, _ := held.Predict(r.F, 0)
		b, _ := m.Predict(r.F, 0)
		if a.Point != b.Point {
			t.Fatalf("calibration moved the point %v → %v", a.Point, b.Point)
		}
	}
}

func TestConformalQuantile(t *testing.T) {
	for _, tc := range []struct {
		ks   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 0},                             // ⌈2·0.8⌉ = 2nd of 1: none, no scaling
		{[]float64{3, 1, 2}, 0},                       // ⌈4·0.8⌉ = 4th of 3: none
		{[]float64{4, 1, 3, 2}, 4},                    // ⌈5·0.8⌉ = 4th
		{[]float64{9, 1, 8, 2, 7, 3, 6, 4, 5}, 8},     // ⌈10·0.8⌉ = 8th
		{[]float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}, 9}, // ⌈11·0.8⌉ = 9th
	} {
		if got := conformalQuantile(tc.ks); got != tc.want {
			t.Errorf("conformalQuantile(%v) = %v; want %v", tc.ks, got, tc.want)
		}
	}
}

// TestFitCalibrated: the intervals come calibrated on the latest rows, and
// too few rows for a holdout give the plain fit.
func TestFitCalibrated(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := append(coldRows(rng, 4000, 0.5), coldRows(rng, 1000, 1.0)...)
	m, err := FitCalibrated(rows, t0, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Calibration(); c.Rows[SegCold] != 1000 || c.Scale[SegCold] <= 1 {
		t.Errorf("calibration %+v; want the cold segment widened on the latest 1,000 rows", c)
	}
	small, err := FitCalibrated(rows[:200], t0, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	if small.Calibration() != (Calibration{}) {
		t.Errorf("200 rows: calibration %+v; want none (40 held-out rows are too few)", small.Calibration())
	}
}

// TestPredictLimitCap: the point stops at the time limit; the interval's
// upper end may reach LimitGrace past it, as jobs overrun their limit until
// the scheduler kills them.
func TestPredictLimitCap(t *testing.T) {
	m := &Model{Rows: 1}
	f := Features{Segment: SegCold, X: make([]float64, len(featureNames(SegCold))), Fallback: math.Log(7200)}
	for _, tc := range []struct {
		req             time.Duration
		point, low, hig time.Duration
	}{
		{0, 7200 * time.Second, secs(math.Log(7200) - 1), secs(math.Log(7200) + 1)},
		{time.Hour, time.Hour, secs(math.Log(7200) - 1), time.Hour + LimitGrace},
		{10 * time.Minute, 10 * time.Minute, 10 * time.Minute, 10*time.Minute + LimitGrace},
	} {
		p, err := m.Predict(f, tc.req)
		if err != nil {
			t.Fatal(err)
		}
		near := func(a, b time.Duration) bool { return (a - b).Abs() < time.Millisecond }
		if !near(p.Point, tc.point) || !near(p.Low, tc.low) || !near(p.High, tc.hig) {
			t.Errorf("limit %v: %v [%v, %v]; want %v [%v, %v]", tc.req, p.Point, p.Low, p.High, tc.point, tc.low, tc.hig)
		}
	}
}
