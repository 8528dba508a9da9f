package demand

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestForecasterConfigValidate(t *testing.T) {
	tests := []struct {
		c    ForecasterConfig
		want string // "" for valid
	}{
		{ForecasterConfig{Quantile: 0.995}, ""},
		{ForecasterConfig{Quantile: 0.9, Calibration: time.Hour, VolatilityWindow: time.Hour}, ""},
		{ForecasterConfig{}, "quantile 0 is not in (0, 1)"},
		{ForecasterConfig{Quantile: 1}, "quantile 1"},
		{ForecasterConfig{Quantile: math.NaN()}, "quantile NaN"},
		{ForecasterConfig{Quantile: 0.9, Calibration: time.Minute}, "calibration 1m0s"},
		{ForecasterConfig{Quantile: 0.9, VolatilityWindow: -time.Hour}, "volatility window -1h0m0s is negative"},
		{ForecasterConfig{Quantile: 0.9, VolatilityWindow: 10 * time.Minute}, "shorter than two"},
		{ForecasterConfig{Quantile: 0.9, Model: Config{Horizon: 15 * time.Minute}}, "--horizon"},
	}
	for _, tt := range tests {
		_, err := NewForecaster(tt.c)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("NewForecaster(%+v) error %v; want %q", tt.c, err, tt.want)
		}
	}
}

// runForecaster issues a forecast at every step of [from, until) and
// returns them.
func runForecaster(t *testing.T, c ForecasterConfig, s Series, from, until time.Time) []Forecast {
	t.Helper()
	fc, err := NewForecaster(c)
	if err != nil {
		t.Fatal(err)
	}
	var out []Forecast
	for at := from; at.Before(until); at = at.Add(10 * time.Minute) {
		f, err := fc.Forecast(s, at)
		if err != nil {
			t.Fatalf("Forecast(%v) error %v", at, err)
		}
		out = append(out, f)
	}
	return out
}

// TestForecasterCalibrated: on the synthetic series the upper bound covers
// the largest demand of the window about as often as its quantile says, and
// the bound is above the Max forecast.
func TestForecasterCalibrated(t *testing.T) {
	s := synthetic(28)
	y, _ := s.Resample(10*time.Minute, Max)
	from := synthStart.Add(21 * 24 * time.Hour)
	until := from.Add(5 * 24 * time.Hour)
	for _, q := range []float64{0.8, 0.95} {
		c := ForecasterConfig{Model: Config{Horizon: 20 * time.Minute}, Quantile: q, Calibration: 7 * 24 * time.Hour}
		fs := runForecaster(t, c, s, from, until)
		covered, n := 0, 0
		for _, f := range fs {
			if f.Upper < f.Max || f.Quantile != q || f.Upper > 420 {
				t.Fatalf("q=%v: forecast %+v: want Max ≤ Upper ≤ 420, Quantile %v", q, f, q)
			}
			mx, ok := windowMax(y, f.Issued, f.Target)
			if !ok {
				continue
			}
			n++
			if mx <= f.Upper {
				covered++
			}
		}
		got := float64(covered) / float64(n)
		t.Logf("q=%v: covered %d of %d (%.3f)", q, covered, n, got)
		// The first errors are in-sample (a little optimistic): allow 0.07.
		if math.Abs(got-q) > 0.07 {
			t.Errorf("q=%v: upper bound covered %.3f of %d windows; want within 0.07 of %v", q, got, n, q)
		}
	}
}

// TestForecasterCausal: forecasts up to T are the same whatever the series
// says from T on, refits and online calibration included.
func TestForecasterCausal(t *testing.T) {
	s := synthetic(24)
	from := synthStart.Add(21 * 24 * time.Hour)
	T := from.Add(25*time.Hour + 10*time.Minute)
	until := T.Add(2 * time.Hour)
	for _, vol := range []time.Duration{0, 2 * time.Hour} {
		c := ForecasterConfig{Model: Config{Horizon: 20 * time.Minute}, Quantile: 0.99, VolatilityWindow: vol}
		clean := runForecaster(t, c, s, from, until)
		for _, bad := range []float64{0, 1e6, math.NaN()} {
			got := runForecaster(t, c, corrupt(s, T, bad), from, until)
			differs := false
			for i, f := range got {
				if f.Issued.After(T) {
					differs = differs || f != clean[i]
					continue
				}
				if f != clean[i] {
					t.Fatalf("vol %v, future %v: forecast at %v = %+v; want %+v", vol, bad, f.Issued, f, clean[i])
				}
			}
			if !differs {
				t.Errorf("vol %v, future %v: nothing after T changed; the check has no teeth", vol, bad)
			}
		}
	}
}

func TestForecasterOrder(t *testing.T) {
	s := synthetic(10)
	fc, err := NewForecaster(ForecasterConfig{Quantile: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	at := synthStart.Add(9 * 24 * time.Hour)
	if _, err := fc.Forecast(s, at); err != nil {
		t.Fatal(err)
	}
	if fc.Refits() != 1 || fc.Model() == nil {
		t.Errorf("after one forecast: %d refits, model %v", fc.Refits(), fc.Model())
	}
	if _, err := fc.Forecast(s, at.Add(-10*time.Minute)); !errors.Is(err, ErrOrder) {
		t.Errorf("Forecast back in time: error %v; want ErrOrder", err)
	}
	if _, err := fc.Forecast(s, at.Add(5*time.Minute)); err == nil {
		t.Errorf("Forecast off the grid: no error")
	}
	if _, err := fc.Forecast(s, at.Add(48*time.Hour)); err == nil {
		t.Errorf("Forecast past the history: no error")
	}
}

func TestTotals(t *testing.T) {
	in := "time,active,total\n2017-10-03 00:00:00,3,10\n2017-10-03 00:01:00,4,12\n2017-10-03 00:03:00,5,11\n"
	s, err := ReadSeries(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if !sameValues(s.Totals, []float64{10, 12, math.NaN(), 11}) || s.Capacity != 12 {
		t.Fatalf("ReadSeries totals %v capacity %v; want [10 12 NaN 11], 12", s.Totals, s.Capacity)
	}
	at := func(m int) time.Time { return s.Start.Add(time.Duration(m) * time.Minute) }
	for _, tt := range []struct {
		m           int
		total, last float64
	}{
		{0, 12, math.NaN()}, // nothing known yet: Capacity, NaN
		{1, 10, 3},
		{2, 12, 4},
		{3, 12, 4}, // the step of minute 2 is missing
		{4, 11, 5},
		{99, 11, 5},
	} {
		if got := s.TotalBefore(at(tt.m)); got != tt.total {
			t.Errorf("TotalBefore(+%dm) = %v; want %v", tt.m, got, tt.total)
		}
		if got := s.LatestBefore(at(tt.m)); !sameValues([]float64{got}, []float64{tt.last}) {
			t.Errorf("LatestBefore(+%dm) = %v; want %v", tt.m, got, tt.last)
		}
	}
	r, err := s.Resample(2*time.Minute, Mean)
	if err != nil || !sameValues(r.Totals, []float64{12, 11}) || !sameValues(r.Values, []float64{3.5, 5}) {
		t.Errorf("Resample(2m, Mean) = %v totals %v, %v; want [3.5 5], totals (max) [12 11]", r.Values, r.Totals, err)
	}
	b, _ := s.Before(at(2))
	if !sameValues(b.Totals, []float64{10, 12}) {
		t.Errorf("Before(+2m).Totals = %v; want [10 12]", b.Totals)
	}
	noTotals := Series{Start: s.Start, Step: time.Minute, Values: []float64{1, 2}, Capacity: 7}
	if got := noTotals.TotalBefore(at(2)); got != 7 {
		t.Errorf("TotalBefore without totals = %v; want Capacity 7", got)
	}
}
