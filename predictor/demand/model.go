package demand

import (
	"fmt"
	"math"
	"time"
)

// Model forecasts node demand a fixed horizon ahead from the demand before
// the decision time. It is immutable and safe for concurrent use; the zero
// Model (or a nil one) refuses to predict with ErrNotTrained.
//
// A forecast issued at time t (a step boundary) reads only the steps that
// ended at or before t, and gives two targets, each fitted by its own linear
// model:
//   - Point: the demand of the step that ends at t+h (at 10-minute steps and
//     h = 1h, the step [t+50m, t+1h)). Backtests score this one.
//   - Max: the largest demand of the steps that end in (t, t+h], which is
//     what a power plan made at t must cover until t+h.
//
// Both are linear in the same features (FeatureNames): the level (the latest
// step's demand); the lags of 2, 3 and 6 steps, 1 h, 1 day and 1 week, as
// differences from the level; the level minus the demand one day and one
// week before the target step; mean, max and min over the last 1 h, 6 h and
// 24 h; sin and cos of the target step's time of day (two harmonics) and of
// week. Each target is learned as its change from the level, by Huber
// regression with a small ridge (each least-squares pass solved by
// sajari/regression), so that a few unforeseeable jumps do not set the
// coefficients.
type Model struct {
	step     time.Duration
	horizon  time.Duration
	spec     featureSpec
	point    linear // Point − level
	peak     linear // Max − level
	until    time.Time
	rows     int
	capacity float64 // of the training series, for histories that lack it
}

// Forecast is one forecast of a Model.
type Forecast struct {
	Issued time.Time // decision time: the forecast read only steps that ended by then
	Target time.Time // Issued + horizon: the end of the Point step and of the Max window
	Point  float64   // demand of the step that ends at Target
	Max    float64   // largest demand of the steps that end in (Issued, Target]; at least Point
	// Upper is an upper bound of that largest demand: its Quantile-quantile
	// as estimated by a Forecaster from past errors. A Model's own
	// forecasts leave both zero.
	Upper    float64
	Quantile float64
}

// Fit trains a Model on the steps of s that end at or before until, to
// forecast horizon ahead, with the defaults of DefaultConfig (10-minute steps
// of the max of s). See Config.Fit.
func Fit(s Series, until time.Time, horizon time.Duration) (*Model, error) {
	c := DefaultConfig()
	c.Horizon = horizon
	return c.Fit(s, until)
}

// Fit trains a Model on the steps of s that end at or before until: s is
// resampled to c.Step with Max, and a row is used only when its target step
// also ended by until. Terms whose lookback the history cannot support (the
// week lags on less than two weeks of data) are left out; FeatureNames says
// which are in.
func (c Config) Fit(s Series, until time.Time) (*Model, error) {
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	y, err := s.Resample(c.Step, Max)
	if err != nil {
		return nil, fmt.Errorf("demand: fit: %w", err)
	}
	if len(y.Values) == 0 {
		return nil, fmt.Errorf("%w: empty series", ErrNotEnoughData)
	}
	hist, err := y.Before(until)
	if err != nil {
		return nil, fmt.Errorf("demand: fit: until: %w", err)
	}
	return c.fit(hist)
}

// fit trains on all of hist, which is already at c.Step.
func (c Config) fit(hist Series) (*Model, error) {
	H := int(c.Horizon / c.Step)
	raw := hist.Values
	first := 0
	for first < len(raw) && math.IsNaN(raw[first]) {
		first++
	}
	spec := fullSpec(c.Step, H).fitTo(len(raw) - first)
	y := fillForward(raw)
	b := spec.lookback()
	p := spec.width()
	rolls := make([]windowStats, len(spec.windows))
	for i, w := range spec.windows {
		rolls[i] = rollingStats(y, first, w)
	}

	var (
		x            []float64
		point, peak  []float64
		w            []float64
		buf          []float64
		lastTarget   = hist.Time(len(raw)) // the end of the history
		decay        = 0.0
		useWeighting = c.HalfLife > 0
	)
	if useWeighting {
		decay = math.Ln2 / c.HalfLife.Hours()
	}
	for k := first + b; k+H-1 < len(raw); k++ {
		pt := raw[k+H-1]
		if math.IsNaN(pt) {
			continue // the target is unknown: no row
		}
		mx := math.Inf(-1)
		for _, v := range raw[k : k+H] {
			if !math.IsNaN(v) {
				mx = max(mx, v)
			}
		}
		buf = spec.compute(buf[:0], y, k, hist.Time(k+H-1), rolls)
		x = append(x, buf...)
		level := y[k-1]
		point = append(point, pt-level)
		peak = append(peak, mx-level)
		if useWeighting {
			age := lastTarget.Sub(hist.Time(k + H)).Hours()
			w = append(w, math.Exp(-decay*age))
		}
	}
	if len(point) == 0 {
		return nil, fmt.Errorf("%w: no training rows before %s (%d steps of %v, %d needed before the first)",
			ErrNotEnoughData, lastTarget.Format(timeLayout), len(raw)-first, c.Step, b+H)
	}
	ridge := max(c.Ridge, 0)
	mp, err := fitHuber(x, p, point, w, ridge)
	if err != nil {
		return nil, fmt.Errorf("demand: fit point target: %w", err)
	}
	mm, err := fitHuber(x, p, peak, w, ridge)
	if err != nil {
		return nil, fmt.Errorf("demand: fit max target: %w", err)
	}
	return &Model{
		step: c.Step, horizon: c.Horizon, spec: spec,
		point: mp, peak: mm,
		until: lastTarget, rows: len(point), capacity: hist.Capacity,
	}, nil
}

// Step returns the step the model forecasts at.
func (m *Model) Step() time.Duration {
	if m == nil {
		return 0
	}
	return m.step
}

// Horizon returns how far ahead the model forecasts.
func (m *Model) Horizon() time.Duration {
	if m == nil {
		return 0
	}
	return m.horizon
}

// TrainedUntil returns the end of the training data: no value at or after it
// was read.
func (m *Model) TrainedUntil() time.Time {
	if m == nil {
		return time.Time{}
	}
	return m.until
}

// TrainRows returns the number of training rows.
func (m *Model) TrainRows() int {
	if m == nil {
		return 0
	}
	return m.rows
}

// FeatureNames returns the names of the features, in the order of Features.
func (m *Model) FeatureNames() []string {
	if m == nil || len(m.point.coef) == 0 {
		return nil
	}
	return m.spec.names()
}

// Features returns the feature vector of a forecast issued at `at` from
// history (see Predict).
func (m *Model) Features(history Series, at time.Time) ([]float64, error) {
	if m == nil || len(m.point.coef) == 0 {
		return nil, ErrNotTrained
	}
	x, _, err := m.features(history, at)
	return x, err
}

// features returns the feature vector and the level (latest known demand).
func (m *Model) features(history Series, at time.Time) ([]float64, float64, error) {
	h, err := history.Resample(m.step, Max)
	if err != nil {
		return nil, 0, fmt.Errorf("demand: predict: %w", err)
	}
	k, ok := h.index(at)
	if !ok {
		return nil, 0, fmt.Errorf("demand: predict at %s: not on the %v step grid of the history (starts %s)",
			at.Format(timeLayout), m.step, h.Start.Format(timeLayout))
	}
	b := m.spec.lookback()
	if k > len(h.Values) {
		return nil, 0, fmt.Errorf("demand: predict at %s: history ends at %s",
			at.Format(timeLayout), h.End().Format(timeLayout))
	}
	if k < b {
		return nil, 0, fmt.Errorf("%w: predict at %s needs %d steps of history, have %d",
			ErrNotEnoughData, at.Format(timeLayout), b, max(k, 0))
	}
	// Forward-fill from the latest known value before the window, so a gap
	// in the window reads as the value before it, as in training.
	from := k - b
	for from > 0 && math.IsNaN(h.Values[from]) {
		from--
	}
	y := fillForward(h.Values[from:k])
	x := m.spec.compute(nil, y, k-from, at.Add(m.horizon-m.step), nil)
	return x, y[len(y)-1], nil
}

// Predict returns the forecast issued at `at` for the window ending at
// at+Horizon. It reads only the steps of history that ended at or before
// `at` (history is resampled to the model's step with Max if finer; `at`
// must be on its step grid); whatever history holds after `at` is ignored.
// It needs Lookback of history before `at`, with at least one known value.
// Forecasts are clamped to [0, Capacity] (the history's, else the training
// series'), when known. A history already at the model's step saves the
// resampling on every call.
func (m *Model) Predict(history Series, at time.Time) (Forecast, error) {
	if m == nil || len(m.point.coef) == 0 {
		return Forecast{}, ErrNotTrained
	}
	x, level, err := m.features(history, at)
	if err != nil {
		return Forecast{}, err
	}
	dp, err := m.point.predict(x)
	if err != nil {
		return Forecast{}, fmt.Errorf("demand: predict at %s: %w", at.Format(timeLayout), err)
	}
	dm, err := m.peak.predict(x)
	if err != nil {
		return Forecast{}, fmt.Errorf("demand: predict at %s: %w", at.Format(timeLayout), err)
	}
	capacity := history.Capacity
	if capacity <= 0 {
		capacity = m.capacity
	}
	clamp := func(v float64) float64 {
		v = max(v, 0)
		if capacity > 0 {
			v = min(v, capacity)
		}
		return v
	}
	f := Forecast{Issued: at, Target: at.Add(m.horizon), Point: clamp(level + dp), Max: clamp(level + dm)}
	f.Max = max(f.Max, f.Point)
	return f, nil
}

// PredictAt returns the Point forecast issued at `at`: the demand of the step
// that ends at at+Horizon. See Predict.
func (m *Model) PredictAt(history Series, at time.Time) (float64, error) {
	f, err := m.Predict(history, at)
	return f.Point, err
}

// Lookback returns how much history before the decision time a forecast
// reads.
func (m *Model) Lookback() time.Duration {
	if m == nil {
		return 0
	}
	return time.Duration(m.spec.lookback()) * m.step
}
