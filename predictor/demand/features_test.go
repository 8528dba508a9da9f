package demand

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestFullSpec(t *testing.T) {
	tests := []struct {
		step                   time.Duration
		horizon                int
		lags, seasonal, window []int
		lookback, width        int
	}{
		// 6 steps and 1 h are one lag; for H = 1 the target's day and
		// week ago are the 1-day and 1-week lags, so no seasonal term.
		{10 * time.Minute, 1, []int{2, 3, 6, 144, 1008}, nil, []int{6, 36, 144}, 1008, 21},
		{10 * time.Minute, 6, []int{2, 3, 6, 144, 1008}, []int{144, 1008}, []int{6, 36, 144}, 1008, 23},
		{10 * time.Minute, 36, []int{2, 3, 6, 144, 1008}, []int{144, 1008}, []int{6, 36, 144}, 1008, 23},
		// Past a day ahead, the target's day ago is not known yet.
		{10 * time.Minute, 150, []int{2, 3, 6, 144, 1008}, []int{1008}, []int{6, 36, 144}, 1008, 22},
		// At hourly steps the 1-hour lag is the level and the 1-hour window one step.
		{time.Hour, 1, []int{2, 3, 6, 24, 168}, nil, []int{6, 24}, 168, 18},
	}
	for _, tt := range tests {
		f := fullSpec(tt.step, tt.horizon)
		if !slices.Equal(f.lags, tt.lags) || !slices.Equal(f.seasonal, tt.seasonal) || !slices.Equal(f.windows, tt.window) ||
			f.lookback() != tt.lookback || f.width() != tt.width || len(f.names()) != tt.width {
			t.Errorf("fullSpec(%v, %d) = lags %v seasonal %v windows %v lookback %d width %d names %d; want %v %v %v %d %d",
				tt.step, tt.horizon, f.lags, f.seasonal, f.windows, f.lookback(), f.width(), len(f.names()),
				tt.lags, tt.seasonal, tt.window, tt.lookback, tt.width)
		}
	}
}

func TestFitTo(t *testing.T) {
	const day = 144 // 10-minute steps
	tests := []struct {
		avail                  int
		lags, seasonal, window []int
	}{
		{8 * 7 * day, []int{2, 3, 6, 144, 1008}, []int{144, 1008}, []int{6, 36, 144}},
		// A term is kept when at least as many rows as its lookback remain:
		// the 1-week lag needs 2 weeks + the horizon, the target's week ago
		// (lookback 1 week − horizon + 1 step) a little less.
		{14 * day, []int{2, 3, 6, 144}, []int{144, 1008}, []int{6, 36, 144}},
		{14*day - 10, []int{2, 3, 6, 144}, []int{144}, []int{6, 36, 144}},
		{3 * day, []int{2, 3, 6, 144}, []int{144}, []int{6, 36, 144}},
		{2 * day, []int{2, 3, 6}, []int{144}, []int{6, 36}},
		{20, []int{2, 3, 6}, nil, []int{6}},
	}
	for _, tt := range tests {
		f := fullSpec(10*time.Minute, 6).fitTo(tt.avail)
		if !slices.Equal(f.lags, tt.lags) || !slices.Equal(f.seasonal, tt.seasonal) || !slices.Equal(f.windows, tt.window) {
			t.Errorf("fitTo(%d) = lags %v seasonal %v windows %v; want %v %v %v", tt.avail, f.lags, f.seasonal, f.windows, tt.lags, tt.seasonal, tt.window)
		}
	}
}

func TestCompute(t *testing.T) {
	ramp := make([]float64, 50) // y[i] = i
	for i := range ramp {
		ramp[i] = float64(i)
	}
	spiky := []float64{5, 1, 9, 2, 7, 3}
	// Sunday 2017-12-03 06:00: a quarter into the day.
	sunday6 := time.Date(2017, 12, 3, 6, 0, 0, 0, time.UTC)
	week := 0.25 / 7
	cal := []float64{1, 0, 0, -1, math.Sin(2 * math.Pi * week), math.Cos(2 * math.Pi * week)}
	tests := []struct {
		name string
		spec featureSpec
		y    []float64
		k    int
		want []float64
	}{
		{"ramp", featureSpec{horizon: 3, lags: []int{2, 6}, seasonal: []int{10}, windows: []int{4}}, ramp, 40,
			// level 39; lags 39−38, 39−34; target y[42] minus 10 is y[32]: 39−32; window y[36..39]
			append([]float64{39, 1, 5, 7, 37.5, 39, 36}, cal...)},
		{"window max and min", featureSpec{horizon: 1, windows: []int{3, 6}}, spiky, 6,
			append([]float64{3, 4, 7, 2, 4.5, 9, 1}, cal...)},
	}
	for _, tt := range tests {
		got := tt.spec.compute(nil, tt.y, tt.k, sunday6, nil)
		if len(got) != tt.spec.width() || !near(got, tt.want, 1e-12) {
			t.Errorf("%s: compute(k=%d) = %v; want %v", tt.name, tt.k, got, tt.want)
		}
	}
}

func TestCalendar(t *testing.T) {
	tests := []struct {
		at   time.Time
		want []float64
	}{
		{time.Date(2017, 12, 3, 0, 0, 0, 0, time.UTC), []float64{0, 1, 0, 1, 0, 1}},                                                               // Sunday midnight
		{time.Date(2017, 12, 6, 12, 0, 0, 0, time.UTC), []float64{0, -1, 0, 1, math.Sin(2 * math.Pi * 3.5 / 7), math.Cos(2 * math.Pi * 3.5 / 7)}}, // Wednesday noon
		{time.Date(2017, 12, 9, 18, 0, 0, 0, time.UTC), []float64{-1, 0, 0, -1, math.Sin(2 * math.Pi * 6.75 / 7), math.Cos(2 * math.Pi * 6.75 / 7)}},
	}
	shanghai := time.FixedZone("CST", 8*3600)
	for _, tt := range tests {
		if got := appendCalendar(nil, tt.at); !near(got, tt.want, 1e-12) {
			t.Errorf("appendCalendar(%v) = %v; want %v", tt.at, got, tt.want)
		}
		// The same instant in another zone has the same terms.
		if got := appendCalendar(nil, tt.at.In(shanghai)); !near(got, tt.want, 1e-12) {
			t.Errorf("appendCalendar(%v) = %v; want %v", tt.at.In(shanghai), got, tt.want)
		}
	}
}

func TestFeatureNames(t *testing.T) {
	got := fullSpec(10*time.Minute, 6).names()
	want := []string{"level", "diff_lag_20m", "diff_lag_30m", "diff_lag_1h", "diff_lag_1d", "diff_lag_1w",
		"diff_target_minus_1d", "diff_target_minus_1w",
		"mean_1h", "max_1h", "min_1h", "mean_6h", "max_6h", "min_6h", "mean_1d", "max_1d", "min_1d",
		"sin_day", "cos_day", "sin_half_day", "cos_half_day", "sin_week", "cos_week"}
	if !slices.Equal(got, want) {
		t.Errorf("names() = %q; want %q", got, want)
	}
}

// near reports whether a and b are equal within tol.
func near(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol {
			return false
		}
	}
	return true
}

// TestRollingStatsMatchCompute: the window terms fit reads from rollingStats
// are those compute works out from y, at every decision step, for windows
// of one to many steps and histories that start late (the steps before
// from are NaN, as before a series' first known value): equal on
// whole-number demand, within rounding on fractional.
func TestRollingStatsMatchCompute(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, whole := range []bool{true, false} {
		for _, from := range []int{0, 7} {
			y := make([]float64, 500)
			for i := range y {
				switch {
				case i < from:
					y[i] = math.NaN()
				case whole:
					y[i] = float64(rng.IntN(40))
				default:
					y[i] = rng.Float64() * 1e3
				}
			}
			for _, w := range []int{1, 2, 6, 36, 144, 493, 494} {
				spec := featureSpec{windows: []int{w}}
				rolls := []windowStats{rollingStats(y, from, w)}
				for k := from + w; k <= len(y); k++ {
					want := spec.compute(nil, y, k, time.Time{}, nil)[1:4]
					got := spec.compute(nil, y, k, time.Time{}, rolls)[1:4]
					for j := range want {
						if whole && got[j] != want[j] || !whole && math.Abs(got[j]-want[j]) > 1e-9*math.Abs(want[j]) {
							t.Fatalf("whole %v from %d w %d k %d: mean, max, min = %v; want %v", whole, from, w, k, got, want)
						}
					}
				}
			}
		}
	}
}
