package demand

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var synthStart = time.Date(2017, 10, 2, 0, 0, 0, 0, time.UTC) // a Monday

// synthetic returns days of per-minute demand of a 420-node cluster: a
// daily and weekly rhythm, jobs of blocks of nodes arriving and leaving, a
// few minutes missing.
func synthetic(days int) Series {
	rng := rand.New(rand.NewPCG(7, 11))
	n := days * 1440
	s := Series{Start: synthStart, Step: time.Minute, Values: make([]float64, n), Capacity: 420}
	jobs := 0.0
	for i := range s.Values {
		t := s.Time(i)
		day := float64(t.Hour()*60+t.Minute()) / 1440
		base := 250 + 40*math.Sin(2*math.Pi*(day-0.3))
		if wd := t.Weekday(); wd == time.Saturday || wd == time.Sunday {
			base -= 30
		}
		if rng.Float64() < 0.01 {
			jobs += float64(rng.IntN(40) - 20)
		}
		jobs *= 0.999
		s.Values[i] = math.Round(min(max(base+jobs+3*rng.NormFloat64(), 0), 420))
		if rng.Float64() < 0.001 {
			s.Values[i] = math.NaN()
		}
	}
	return s
}

// corrupt returns s with every value at or after t replaced by v.
func corrupt(s Series, t time.Time, v float64) Series {
	out := s
	out.Values = slices.Clone(s.Values)
	for i := range out.Values {
		if !s.Time(i).Before(t) {
			out.Values[i] = v
		}
	}
	return out
}

// TestCausal: a forecast issued at T, by a model trained until T, is the
// same whatever the data at or after T says.
func TestCausal(t *testing.T) {
	s := synthetic(21)
	for _, h := range []time.Duration{10 * time.Minute, time.Hour, 6 * time.Hour} {
		for _, at := range []time.Time{
			synthStart.Add(17*24*time.Hour + 13*time.Hour + 20*time.Minute),
			synthStart.Add(16 * 24 * time.Hour),
		} {
			clean, err := Fit(s, at, h)
			if err != nil {
				t.Fatalf("Fit(clean, %v, %v) error %v", at, h, err)
			}
			want, err := clean.Predict(s, at)
			if err != nil {
				t.Fatalf("Predict(clean, %v) error %v", at, err)
			}
			for _, bad := range []float64{1e9, 0, math.NaN()} {
				c := corrupt(s, at, bad)
				m, err := Fit(c, at, h)
				if err != nil {
					t.Fatalf("Fit(corrupted with %v) error %v", bad, err)
				}
				got, err := m.Predict(c, at)
				if err != nil || got != want {
					t.Errorf("h=%v: forecast at %v with data ≥ it set to %v = %+v, %v; want %+v", h, at, bad, got, err, want)
				}
				// The clean model on corrupted history, and the history cut at T.
				if got, err := clean.Predict(c, at); err != nil || got != want {
					t.Errorf("h=%v: clean model on history corrupted with %v = %+v, %v; want %+v", h, bad, got, err, want)
				}
			}
			cut, _ := s.Before(at)
			if got, err := clean.Predict(cut, at); err != nil || got != want {
				t.Errorf("h=%v: forecast from history cut at %v = %+v, %v; want %+v", h, at, got, err, want)
			}
			// The check has teeth: one step later the corruption is read.
			later := at.Add(10 * time.Minute)
			a, _ := clean.Predict(s, later)
			b, _ := clean.Predict(corrupt(s, at, 1e9), later)
			if a == b {
				t.Errorf("h=%v: forecast at %v does not see a corrupted step before it", h, later)
			}
		}
	}
}

func TestModelRefusesBadInput(t *testing.T) {
	s := synthetic(10)
	at := synthStart.Add(9 * 24 * time.Hour)
	m, err := Fit(s, at, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		m       *Model
		hist    Series
		at      time.Time
		wantErr error
	}{
		{"nil model", nil, s, at, ErrNotTrained},
		{"zero model", &Model{}, s, at, ErrNotTrained},
		{"off the step grid", m, s, at.Add(5 * time.Minute), nil},
		{"history too short", m, s, synthStart.Add(3 * time.Hour), ErrNotEnoughData},
		{"history ends before at", m, s, synthStart.Add(11 * 24 * time.Hour), nil},
		{"coarser history", m, Series{Start: synthStart, Step: time.Hour, Values: []float64{1, 2}}, at, ErrStep},
		{"no data at all", m, corrupt(s, synthStart, math.NaN()), at, ErrFeatures},
	}
	for _, tt := range tests {
		_, err := tt.m.Predict(tt.hist, tt.at)
		if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
			t.Errorf("%s: Predict error = %v; want %v", tt.name, err, tt.wantErr)
		}
	}
	if _, err := (&Model{}).Features(s, at); !errors.Is(err, ErrNotTrained) {
		t.Errorf("zero Model Features error = %v; want ErrNotTrained", err)
	}
}

func TestModel(t *testing.T) {
	s := synthetic(20)
	at := synthStart.Add(18*24*time.Hour + 7*time.Hour)
	m, err := Fit(s, at, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if m.Step() != 10*time.Minute || m.Horizon() != time.Hour || !m.TrainedUntil().Equal(at) || m.Lookback() != 7*24*time.Hour {
		t.Errorf("Fit = step %v horizon %v until %v lookback %v; want 10m, 1h, %v, 168h", m.Step(), m.Horizon(), m.TrainedUntil(), m.Lookback(), at)
	}
	// Rows: one per decision with a week of lookback and a known target:
	// 18 days 7 hours of 10-minute steps, less the week, less the horizon's
	// 5 steps beyond the first.
	if want := 18*144 + 42 - 1008 - 5; m.TrainRows() != want {
		t.Errorf("TrainRows() = %d; want %d", m.TrainRows(), want)
	}
	x, err := m.Features(s, at)
	if err != nil || len(x) != len(m.FeatureNames()) {
		t.Errorf("Features = %d values, %v; want %d", len(x), err, len(m.FeatureNames()))
	}
	f, err := m.Predict(s, at)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Issued.Equal(at) || !f.Target.Equal(at.Add(time.Hour)) || f.Max < f.Point || f.Point < 0 || f.Point > 420 {
		t.Errorf("Predict = %+v; want issued %v, target an hour later, 0 ≤ Point ≤ Max ≤ 420", f, at)
	}
	if p, err := m.PredictAt(s, at); err != nil || p != f.Point {
		t.Errorf("PredictAt = %v, %v; want %v", p, err, f.Point)
	}
	// The model learned something: its forecasts beat repeating the last
	// step over the next day and a half.
	y, _ := s.Resample(10*time.Minute, Max)
	var errModel, errLast float64
	for k := 0; k < 216; k++ {
		t0 := at.Add(time.Duration(k) * 10 * time.Minute)
		i, _ := y.index(t0)
		actual := y.Values[i+5]
		if math.IsNaN(actual) || math.IsNaN(y.Values[i-1]) {
			continue
		}
		p, err := m.PredictAt(s, t0)
		if err != nil {
			t.Fatal(err)
		}
		errModel += (p - actual) * (p - actual)
		errLast += (y.Values[i-1] - actual) * (y.Values[i-1] - actual)
	}
	if errModel >= errLast {
		t.Errorf("squared error %v; repeating the last step %v", errModel, errLast)
	}
}

func TestFitErrors(t *testing.T) {
	s := synthetic(2)
	tests := []struct {
		name    string
		s       Series
		until   time.Time
		horizon time.Duration
	}{
		{"horizon not whole steps", s, synthStart.Add(24 * time.Hour), 15 * time.Minute},
		{"until off the grid", s, synthStart.Add(24*time.Hour + 5*time.Minute), time.Hour},
		{"no data before until", s, synthStart, time.Hour},
		{"too little data", s, synthStart.Add(30 * time.Minute), time.Hour},
		{"empty", Series{Start: synthStart, Step: time.Minute}, synthStart.Add(time.Hour), time.Hour},
	}
	for _, tt := range tests {
		if m, err := Fit(tt.s, tt.until, tt.horizon); err == nil {
			t.Errorf("%s: Fit = %v, nil error; want an error", tt.name, m)
		}
	}
}
