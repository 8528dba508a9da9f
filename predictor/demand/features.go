package demand

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// The feature set, in durations; each becomes a whole number of steps
// (rounded, at least one) and duplicates are dropped, so at 10-minute steps
// the 6-step lag and the 1-hour lag are one feature.

// lagSteps are the lags in steps, besides lag 1, the level itself.
func lagSteps() [3]int { return [3]int{2, 3, 6} }

// lagDurations are the further lags.
func lagDurations() [3]time.Duration {
	return [3]time.Duration{time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}
}

// seasonalPeriods give the value one period before the target step, the
// day_ago and week_ago of the target rather than of the decision.
func seasonalPeriods() [2]time.Duration { return [2]time.Duration{24 * time.Hour, 7 * 24 * time.Hour} }

// windowDurations are the spans of the rolling mean, max and min.
func windowDurations() [3]time.Duration {
	return [3]time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour}
}

// featureSpec says which features a model uses. Indices are relative to k,
// the step that starts at the decision time: y[k-1] is the latest step a
// decision may know, y[k+H-1] the target (the step that ends H steps later).
//
// Every term but the calendar is a function of y[k-lookback .. k-1] only.
// Lags enter as differences from the level, y[k-1] − y[k-L]: the same span as
// raw lags, but the regression sees the change, which is what moves.
type featureSpec struct {
	step     time.Duration
	horizon  int   // H ≥ 1
	lags     []int // L ≥ 2: feature y[k-1] − y[k-L]
	seasonal []int // P ≥ H: feature y[k-1] − y[k+H-1-P]
	windows  []int // W ≥ 2: mean, max and min of y[k-W .. k-1]
}

// calendarTerms is the number of calendar features: sin and cos of the hour of
// day (first and second harmonic) and of the time of week, all of the target
// step's start.
const calendarTerms = 6

// stepsOf converts d to a whole number of steps, at least one.
func stepsOf(d, step time.Duration) int {
	return max(1, int((d+step/2)/step))
}

// fullSpec returns every feature for the given step and horizon.
func fullSpec(step time.Duration, horizon int) featureSpec {
	f := featureSpec{step: step, horizon: horizon}
	seen := map[int]bool{1: true} // offsets k-L already used; lag 1 is the level
	add := func(l int) {
		if !seen[l] {
			seen[l] = true
			f.lags = append(f.lags, l)
		}
	}
	for _, l := range lagSteps() {
		add(l)
	}
	for _, d := range lagDurations() {
		add(stepsOf(d, step))
	}
	for _, d := range seasonalPeriods() {
		p := stepsOf(d, step)
		// y[k+H-1-P] is the lag L = P-H+1; skip it when it is the level or a lag.
		if p >= horizon && !seen[p-horizon+1] {
			seen[p-horizon+1] = true
			f.seasonal = append(f.seasonal, p)
		}
	}
	for _, d := range windowDurations() {
		if w := stepsOf(d, step); w >= 2 && !slices.Contains(f.windows, w) {
			f.windows = append(f.windows, w)
		}
	}
	return f
}

// lookback returns how many steps before k the features read.
func (f featureSpec) lookback() int {
	b := 1
	for _, l := range f.lags {
		b = max(b, l)
	}
	for _, p := range f.seasonal {
		b = max(b, p-f.horizon+1)
	}
	for _, w := range f.windows {
		b = max(b, w)
	}
	return b
}

// fitTo returns f without the terms whose lookback would leave fewer than
// that many training rows: a term is kept only where the history before the
// first training row is no longer than the rows left to learn it from. avail
// is the number of steps of history, n the horizon in steps.
func (f featureSpec) fitTo(avail int) featureSpec {
	rows := func(b int) int { return avail - b - f.horizon + 1 }
	keep := func(b int) bool { return rows(b) >= b }
	out := featureSpec{step: f.step, horizon: f.horizon}
	for _, l := range f.lags {
		if keep(l) {
			out.lags = append(out.lags, l)
		}
	}
	for _, p := range f.seasonal {
		if keep(p - f.horizon + 1) {
			out.seasonal = append(out.seasonal, p)
		}
	}
	for _, w := range f.windows {
		if keep(w) {
			out.windows = append(out.windows, w)
		}
	}
	return out
}

// width returns the length of the feature vector.
func (f featureSpec) width() int {
	return 1 + len(f.lags) + len(f.seasonal) + 3*len(f.windows) + calendarTerms
}

// names returns the features' names, in vector order.
func (f featureSpec) names() []string {
	d := func(n int) string { return fmtDuration(time.Duration(n) * f.step) }
	out := make([]string, 0, f.width())
	out = append(out, "level")
	for _, l := range f.lags {
		out = append(out, "diff_lag_"+d(l))
	}
	for _, p := range f.seasonal {
		out = append(out, "diff_target_minus_"+d(p))
	}
	for _, w := range f.windows {
		out = append(out, "mean_"+d(w), "max_"+d(w), "min_"+d(w))
	}
	return append(out, "sin_day", "cos_day", "sin_half_day", "cos_half_day", "sin_week", "cos_week")
}

// compute appends to dst the features of the decision at step k, reading only
// y[k-lookback .. k-1] (y must have no NaN there for a finite result); target
// is the start of the target step, which the calendar terms describe. rolls,
// when not nil, holds the window terms of every k, one windowStats per
// f.windows (see rollingStats); nil computes them from y.
func (f featureSpec) compute(dst, y []float64, k int, target time.Time, rolls []windowStats) []float64 {
	level := y[k-1]
	dst = append(dst, level)
	for _, l := range f.lags {
		dst = append(dst, level-y[k-l])
	}
	for _, p := range f.seasonal {
		dst = append(dst, level-y[k+f.horizon-1-p])
	}
	for i, w := range f.windows {
		if rolls != nil {
			r := &rolls[i]
			dst = append(dst, r.mean[k], r.hi[k], r.lo[k])
			continue
		}
		sum, hi, lo := 0.0, math.Inf(-1), math.Inf(1)
		for _, v := range y[k-w : k] {
			sum += v
			hi = max(hi, v)
			lo = min(lo, v)
		}
		dst = append(dst, sum/float64(w), hi, lo)
	}
	return appendCalendar(dst, target)
}

// windowStats holds a window's terms for every decision step k: the mean,
// max and min of y[k-W .. k-1].
type windowStats struct{ mean, hi, lo []float64 }

// rollingStats returns the terms of window w for every k from from+w to
// len(y) (the entries before are zero), in O(len(y)) rather than O(w) a
// step: a running sum, re-added from scratch every w steps so that rounding
// cannot drift (on whole-number demand every sum is exact, so the terms
// equal compute's), and a monotonic queue of candidate indices for the max
// and for the min.
func rollingStats(y []float64, from, w int) windowStats {
	n := len(y)
	r := windowStats{mean: make([]float64, n+1), hi: make([]float64, n+1), lo: make([]float64, n+1)}
	if from+w > n {
		return r
	}
	// Indices into y, from a head on: y[hiQ[hiH:]] decreasing, y[loQ[loH:]]
	// increasing. Each index enters once, so n-from is all they hold.
	hiQ, loQ := make([]int, 0, n-from), make([]int, 0, n-from)
	hiH, loH := 0, 0
	sum := 0.0
	for i := from; i < n; i++ {
		v := y[i]
		for len(hiQ) > hiH && y[hiQ[len(hiQ)-1]] <= v {
			hiQ = hiQ[:len(hiQ)-1]
		}
		hiQ = append(hiQ, i)
		for len(loQ) > loH && y[loQ[len(loQ)-1]] >= v {
			loQ = loQ[:len(loQ)-1]
		}
		loQ = append(loQ, i)
		k := i + 1 // the window y[k-w .. k-1] ends at i
		if k-w < from {
			continue
		}
		if hiQ[hiH] < k-w {
			hiH++
		}
		if loQ[loH] < k-w {
			loH++
		}
		if (k-from)%w == 0 {
			sum = 0
			for _, x := range y[k-w : k] {
				sum += x
			}
		} else {
			sum += v - y[k-w-1]
		}
		r.mean[k], r.hi[k], r.lo[k] = sum/float64(w), y[hiQ[hiH]], y[loQ[loH]]
	}
	return r
}

// appendCalendar appends the calendar terms of t, read in UTC whatever
// location t carries: the live loop's steps start from its own clock or from
// times read back from ClickHouse (in the server's zone), and a forecast
// between two fits must read the hours the fit read. The sine and cosine
// pairs learn any zone's daily and weekly phase from UTC terms.
func appendCalendar(dst []float64, t time.Time) []float64 {
	t = t.UTC()
	h, m, s := t.Clock()
	day := float64(h*3600+m*60+s) / 86400 // fraction of the day
	week := (float64(t.Weekday()) + day) / 7
	return append(dst,
		math.Sin(2*math.Pi*day), math.Cos(2*math.Pi*day),
		math.Sin(4*math.Pi*day), math.Cos(4*math.Pi*day),
		math.Sin(2*math.Pi*week), math.Cos(2*math.Pi*week))
}

// fmtDuration writes d in the largest whole unit: 1w, 6h, 20m.
func fmtDuration(d time.Duration) string {
	switch {
	case d%(7*24*time.Hour) == 0:
		return fmt.Sprintf("%dw", d/(7*24*time.Hour))
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
