package demand

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// MaxSeriesLen bounds the number of steps a Series read from outside input may
// span (gaps included), so that a file with two far-apart timestamps cannot
// make the reader allocate without limit. 1<<22 steps is eight years of
// minutes.
const MaxSeriesLen = 1 << 22

// Series is node demand at a fixed step: Values[i] is the demand of the step
// that starts at Start + i·Step and covers [Start+i·Step, Start+(i+1)·Step).
// A missing step is NaN. Functions of this package never modify a Series they
// are given; share its Values only with code that does not either.
type Series struct {
	Start time.Time
	Step  time.Duration
	// Values are the demand of each step, in nodes; NaN where unknown.
	Values []float64
	// Capacity is the cluster size (largest `total` read); 0 when unknown.
	// Forecasts are clamped to [0, Capacity] when it is known.
	Capacity float64
	// Totals, when not nil, holds the cluster size of each step (the
	// `total` column), parallel to Values; NaN where unknown.
	Totals []float64
}

// Len returns the number of steps.
func (s Series) Len() int { return len(s.Values) }

// Time returns the start of step i.
func (s Series) Time(i int) time.Time { return s.Start.Add(time.Duration(i) * s.Step) }

// End returns the end of the last step, the first time the series knows
// nothing about.
func (s Series) End() time.Time { return s.Time(len(s.Values)) }

// index returns the number of whole steps from Start to t, and whether t lies
// on the step grid.
func (s Series) index(t time.Time) (int, bool) {
	if s.Step <= 0 {
		return 0, false
	}
	d := t.Sub(s.Start)
	if d%s.Step != 0 || d == math.MinInt64 || d == math.MaxInt64 {
		return 0, false
	}
	n := d / s.Step
	if n > math.MaxInt32 || n < math.MinInt32 {
		return 0, false
	}
	return int(n), true
}

// Before returns the steps that ended at or before t: everything a decision
// taken at t may know. t must lie on the step grid.
func (s Series) Before(t time.Time) (Series, error) {
	k, ok := s.index(t)
	if !ok {
		return Series{}, fmt.Errorf("demand: %s is not on the %v step grid starting %s", t.Format(timeLayout), s.Step, s.Start.Format(timeLayout))
	}
	k = min(max(k, 0), len(s.Values))
	out := s
	out.Values = s.Values[:k:k] // full slice expression: appending cannot reach the rest
	if len(s.Totals) == len(s.Values) {
		out.Totals = s.Totals[:k:k]
	} else {
		out.Totals = nil
	}
	return out, nil
}

// LatestBefore returns the latest known value of the steps that ended at or
// before t (NaN if none): the demand a decision at t sees as current.
func (s Series) LatestBefore(t time.Time) float64 {
	if s.Step <= 0 || len(s.Values) == 0 || !t.After(s.Start) {
		return math.NaN()
	}
	k := min(int(min(t.Sub(s.Start)/s.Step, time.Duration(len(s.Values)))), len(s.Values))
	for i := k - 1; i >= 0; i-- {
		if !math.IsNaN(s.Values[i]) {
			return s.Values[i]
		}
	}
	return math.NaN()
}

// TotalBefore returns the latest known cluster size (Totals) of the steps
// that ended by t; Capacity when the series has no Totals or none is known
// by then.
func (s Series) TotalBefore(t time.Time) float64 {
	if len(s.Totals) != len(s.Values) || s.Step <= 0 || !t.After(s.Start) {
		return s.Capacity
	}
	k := min(int(min(t.Sub(s.Start)/s.Step, time.Duration(len(s.Values)))), len(s.Values))
	for i := k - 1; i >= 0; i-- {
		if !math.IsNaN(s.Totals[i]) {
			return s.Totals[i]
		}
	}
	return s.Capacity
}

// Agg is how Resample combines the values that fall into one coarser step.
type Agg int

// The aggregations. Missing (NaN) values are ignored; a step without any
// value is missing.
const (
	Max  Agg = iota // largest value; the CES protocol's choice for demand
	Min             // smallest value
	Mean            // arithmetic mean
	Last            // latest value
)

// String returns the aggregation's name.
func (a Agg) String() string {
	switch a {
	case Max:
		return "max"
	case Min:
		return "min"
	case Mean:
		return "mean"
	case Last:
		return "last"
	}
	return fmt.Sprintf("Agg(%d)", int(a))
}

// ErrStep is returned when a step or horizon does not fit a series' step.
var ErrStep = errors.New("demand: step mismatch")

// Resample returns s at a coarser step, a whole multiple of s.Step. Steps are
// aligned to multiples of step from the zero time (so 10 minutes start at :00,
// :10, …, and a day at midnight of the series' clock); the first and last
// coarse steps may be partial. Resample with step == s.Step returns s.
func (s Series) Resample(step time.Duration, agg Agg) (Series, error) {
	if agg < Max || agg > Last {
		return Series{}, fmt.Errorf("demand: resample: unknown aggregation %v", agg)
	}
	if s.Step <= 0 {
		return Series{}, fmt.Errorf("demand: resample: series step %v: %w", s.Step, ErrStep)
	}
	if step <= 0 || step%s.Step != 0 {
		return Series{}, fmt.Errorf("demand: resample %v series to %v: %w", s.Step, step, ErrStep)
	}
	if step == s.Step {
		return s, nil
	}
	out := Series{Start: s.Start.Truncate(step), Step: step, Capacity: s.Capacity}
	if len(s.Values) == 0 {
		return out, nil
	}
	// Totals, when present, are resampled with Max whatever agg is.
	// Input step i falls in output step (a+i)/ratio, where a is the number
	// of whole input steps from out.Start to s.Start: integer arithmetic
	// that cannot overflow, however long the steps.
	ratio := int64(step / s.Step)
	a := int64(s.Start.Sub(out.Start) / s.Step)
	n := int((a+int64(len(s.Values))-1)/ratio + 1)
	vals := make([]float64, n)
	count := make([]int32, n)
	for i := range vals {
		vals[i] = math.NaN()
	}
	for i, v := range s.Values {
		if math.IsNaN(v) {
			continue
		}
		b := int((a + int64(i)) / ratio)
		if count[b] == 0 {
			vals[b] = v
			count[b] = 1
			continue
		}
		count[b]++
		switch agg {
		case Max:
			vals[b] = max(vals[b], v)
		case Min:
			vals[b] = min(vals[b], v)
		case Mean:
			vals[b] += v
		case Last:
			vals[b] = v
		}
	}
	if agg == Mean {
		for b, c := range count {
			if c > 0 {
				vals[b] /= float64(c)
			}
		}
	}
	out.Values = vals
	out.Totals = nil
	if len(s.Totals) == len(s.Values) {
		out.Totals = make([]float64, n)
		for b := range out.Totals {
			out.Totals[b] = math.NaN()
		}
		for i, v := range s.Totals {
			if b := int((a + int64(i)) / ratio); !math.IsNaN(v) && (math.IsNaN(out.Totals[b]) || v > out.Totals[b]) {
				out.Totals[b] = v
			}
		}
	}
	return out, nil
}

// fillForward returns v with every NaN replaced by the latest earlier value;
// leading NaNs stay. Each output depends only on inputs at or before it, so
// it keeps features causal.
func fillForward(v []float64) []float64 {
	out := make([]float64, len(v))
	last := math.NaN()
	for i, x := range v {
		if !math.IsNaN(x) {
			last = x
		}
		out[i] = last
	}
	return out
}
