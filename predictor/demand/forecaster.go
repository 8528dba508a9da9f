package demand

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Forecaster issues forecasts with a calibrated upper bound, the way a live
// power planner runs: decisions come in time order; the Model is refitted
// every RefitEvery on everything that ended before the decision; and the
// upper bound of the largest demand over the horizon is the Max forecast
// plus a quantile of the errors of earlier Max forecasts — at first those of
// the first model on the last Calibration of its own training data, then
// those of the forecasts it issued, as each window ends.
//
// Optionally (VolatilityWindow > 0) the errors are measured in units of the
// recent volatility (the mean absolute change between consecutive steps over
// VolatilityWindow before the decision, at least one node), so the bound
// widens when demand is moving and narrows when it is calm. On the Philly
// series this did not help consistently (see /work/notes/issue5-ces.md), so
// it is off by default.
//
// A Forecaster is not safe for concurrent use.
type Forecaster struct {
	cfg   ForecasterConfig
	model *Model
	fitAt time.Time // decision time of the latest fit
	last  time.Time // latest decision time
	// pending are issued forecasts whose window has not ended, with the
	// volatility they were issued at.
	pending []issued
	resid   []float64 // errors in volatility units, oldest first, at most cfg.calibrationSteps()
	sorted  []float64 // scratch
	refits  int
}

// issued is a forecast waiting for its outcome.
type issued struct {
	f     Forecast
	scale float64
}

// ForecasterConfig configures a Forecaster: the model's Config (its Step,
// Horizon, RefitEvery, HalfLife and Ridge; TestFrom and TestUntil are not
// used) and the calibration of the upper bound.
type ForecasterConfig struct {
	Model Config
	// Quantile is the quantile of the largest demand over the horizon that
	// Forecast.Upper estimates, in (0, 1). Required.
	Quantile float64
	// Calibration is how many of the latest forecast errors the quantile is
	// taken over (as a duration of decisions). Default: 14 days.
	Calibration time.Duration
	// VolatilityWindow, when positive, is the span of the volatility the
	// errors are scaled by. Default: 0, errors in nodes.
	VolatilityWindow time.Duration
}

// DefaultCalibration is the default of ForecasterConfig.Calibration.
const DefaultCalibration = 14 * 24 * time.Hour

func (c ForecasterConfig) withDefaults() ForecasterConfig {
	c.Model = c.Model.withDefaults()
	if c.Calibration == 0 {
		c.Calibration = DefaultCalibration
	}
	return c
}

// Validate reports the first invalid field.
func (c ForecasterConfig) Validate() error {
	d := c.withDefaults()
	if err := d.Model.Validate(); err != nil {
		return err
	}
	switch {
	case math.IsNaN(c.Quantile) || c.Quantile <= 0 || c.Quantile >= 1:
		return fmt.Errorf("demand: forecaster quantile %v is not in (0, 1)", c.Quantile)
	case d.Calibration < d.Model.Step:
		return fmt.Errorf("demand: forecaster calibration %v is shorter than a %v step", c.Calibration, d.Model.Step)
	case d.VolatilityWindow < 0:
		return fmt.Errorf("demand: forecaster volatility window %v is negative", c.VolatilityWindow)
	case d.VolatilityWindow > 0 && d.VolatilityWindow < 2*d.Model.Step:
		return fmt.Errorf("demand: forecaster volatility window %v is shorter than two %v steps", c.VolatilityWindow, d.Model.Step)
	}
	return nil
}

func (c ForecasterConfig) calibrationSteps() int { return int(c.Calibration / c.Model.Step) }

// NewForecaster returns a Forecaster with no model yet: the first Forecast
// fits one.
func NewForecaster(c ForecasterConfig) (*Forecaster, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &Forecaster{cfg: c.withDefaults()}, nil
}

// ErrOrder is returned when decisions do not come in time order.
var ErrOrder = errors.New("demand: forecasts must be asked for in time order")

// Forecast returns the forecast issued at `at`, with Upper and Quantile set.
// It reads only the steps of history that ended by `at`: history is cut
// there before anything else looks at it. `at` must be on the grid of the
// history resampled to the model's step, and no earlier than the previous
// call's.
func (fc *Forecaster) Forecast(history Series, at time.Time) (Forecast, error) {
	if !fc.last.IsZero() && at.Before(fc.last) {
		return Forecast{}, fmt.Errorf("%w: %s after %s", ErrOrder, at.Format(timeLayout), fc.last.Format(timeLayout))
	}
	c := fc.cfg
	y, err := history.Resample(c.Model.Step, Max)
	if err != nil {
		return Forecast{}, fmt.Errorf("demand: forecast: %w", err)
	}
	cut, err := y.Before(at)
	if err != nil {
		return Forecast{}, fmt.Errorf("demand: forecast: %w", err)
	}
	if k, _ := cut.index(at); k > len(cut.Values) {
		return Forecast{}, fmt.Errorf("demand: forecast at %s: history ends at %s", at.Format(timeLayout), cut.End().Format(timeLayout))
	}
	fc.last = at

	// Score the forecasts whose window has ended.
	done := 0
	for _, p := range fc.pending {
		if p.f.Target.After(at) {
			break
		}
		done++
		if mx, ok := windowMax(cut, p.f.Issued, p.f.Target); ok {
			fc.addResidual((mx - p.f.Max) / p.scale)
		}
	}
	fc.pending = fc.pending[done:]

	if fc.model == nil || (c.Model.RefitEvery > 0 && !at.Before(fc.fitAt.Add(c.Model.RefitEvery))) {
		m, err := c.Model.fit(cut)
		if err != nil {
			return Forecast{}, fmt.Errorf("demand: forecast: train until %s: %w", at.Format(timeLayout), err)
		}
		if fc.model == nil {
			fc.seed(m, cut, at)
		}
		fc.model, fc.fitAt = m, at
		fc.refits++
	}
	f, err := fc.model.Predict(cut, at)
	if err != nil {
		return Forecast{}, err
	}
	scale := fc.volatility(cut, at)
	f.Quantile = c.Quantile
	f.Upper = f.Max
	if q, ok := fc.quantile(); ok {
		f.Upper = max(f.Max+scale*q, f.Max)
	}
	if capacity := cmp0(cut.Capacity, fc.model.capacity); capacity > 0 {
		f.Upper = min(f.Upper, capacity)
	}
	fc.pending = append(fc.pending, issued{f: f, scale: scale})
	return f, nil
}

// Refits returns the number of models trained so far.
func (fc *Forecaster) Refits() int { return fc.refits }

// Model returns the latest model, nil before the first Forecast.
func (fc *Forecaster) Model() *Model { return fc.model }

// seed fills the calibration with m's errors on the decisions of the last
// Calibration before `at` whose window ended by `at` (in-sample errors: the
// only ones there are before the first forecast).
func (fc *Forecaster) seed(m *Model, cut Series, at time.Time) {
	H := m.horizon
	from := at.Add(-H - time.Duration(fc.cfg.calibrationSteps())*m.step)
	for t := at.Add(-H); !t.Before(from); t = t.Add(-m.step) {
		// Oldest first in the end: collect backwards, reverse below.
		f, err := m.Predict(cut, t)
		if err != nil {
			break // not enough history further back
		}
		mx, ok := windowMax(cut, t, t.Add(H))
		if !ok {
			continue
		}
		fc.resid = append(fc.resid, (mx-f.Max)/fc.volatility(cut, t))
	}
	slices.Reverse(fc.resid)
}

// addResidual keeps the latest calibrationSteps errors.
func (fc *Forecaster) addResidual(r float64) {
	if n := fc.cfg.calibrationSteps(); len(fc.resid) >= n {
		fc.resid = append(fc.resid[:0], fc.resid[len(fc.resid)-n+1:]...)
	}
	fc.resid = append(fc.resid, r)
}

// quantile returns the configured quantile of the kept errors (the
// smallest error with at least that share of errors at or below it).
func (fc *Forecaster) quantile() (float64, bool) {
	if len(fc.resid) == 0 {
		return 0, false
	}
	fc.sorted = append(fc.sorted[:0], fc.resid...)
	slices.Sort(fc.sorted)
	i := int(math.Ceil(fc.cfg.Quantile*float64(len(fc.sorted)))) - 1
	return fc.sorted[min(max(i, 0), len(fc.sorted)-1)], true
}

// volatility returns the mean absolute change between consecutive known
// steps over VolatilityWindow before `at`, at least 1; 1 when errors are
// not scaled.
func (fc *Forecaster) volatility(cut Series, at time.Time) float64 {
	w := fc.cfg.VolatilityWindow
	if w <= 0 {
		return 1
	}
	k, _ := cut.index(at)
	n := int(w / cut.Step)
	var sum float64
	var cnt int
	for i := max(k-n+1, 1); i < k && i < len(cut.Values); i++ {
		a, b := cut.Values[i-1], cut.Values[i]
		if !math.IsNaN(a) && !math.IsNaN(b) {
			sum += math.Abs(b - a)
			cnt++
		}
	}
	if cnt == 0 {
		return 1
	}
	return max(sum/float64(cnt), 1)
}

// windowMax returns the largest known demand of the steps of s that end in
// (from, to], and whether there was one.
func windowMax(s Series, from, to time.Time) (float64, bool) {
	i, ok1 := s.index(from)
	j, ok2 := s.index(to)
	if !ok1 || !ok2 {
		return 0, false
	}
	mx, ok := math.Inf(-1), false
	for k := max(i, 0); k < j && k < len(s.Values); k++ {
		if v := s.Values[k]; !math.IsNaN(v) {
			mx, ok = max(mx, v), true
		}
	}
	return mx, ok
}

// cmp0 returns a if it is positive, else b.
func cmp0(a, b float64) float64 {
	if a > 0 {
		return a
	}
	return b
}
