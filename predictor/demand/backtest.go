package demand

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Metrics are forecast errors over the decisions of a backtest.
type Metrics struct {
	// RMSENodes is the root mean squared error, in nodes.
	RMSENodes float64 `json:"rmse_nodes"`
	// MAENodes is the mean absolute error, in nodes.
	MAENodes float64 `json:"mae_nodes"`
	// SMAPE is the symmetric mean absolute percentage error as a fraction
	// in [0, 2]: the mean of 2|F−A|/(|A|+|F|), a term being 0 where A = F = 0.
	SMAPE float64 `json:"smape"`
	// N is the number of forecasts scored.
	N int `json:"n"`
}

// Result is the outcome of a backtest: heliostat's Point forecast and the
// baselines, scored on the same decisions.
type Result struct {
	RMSENodes float64 `json:"rmse_nodes"`
	MAENodes  float64 `json:"mae_nodes"`
	SMAPE     float64 `json:"smape"` // fraction in [0, 2], see Metrics
	N         int     `json:"n"`
	// Baselines by name:
	//   - "last": the latest known step's demand, repeated;
	//   - "day_ago": the demand of the step 24 h before the target step (for
	//     horizons over 24 h, the latest whole number of days before it).
	Baselines map[string]Metrics `json:"baselines"`

	Step      time.Duration `json:"-"` // in JSON: step_s, seconds
	Horizon   time.Duration `json:"-"` // in JSON: horizon_s, seconds
	TestFrom  time.Time     `json:"test_from"`
	TestUntil time.Time     `json:"test_until"`
	Refits    int           `json:"refits"`     // models trained, the first included
	TrainRows int           `json:"train_rows"` // rows of the last model trained
	Features  []string      `json:"features"`   // features of the last model trained
}

// MarshalJSON writes r with Step and Horizon in seconds (step_s, horizon_s).
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result // without the method
	return json.Marshal(struct {
		plain
		StepS    float64 `json:"step_s"`
		HorizonS float64 `json:"horizon_s"`
	}{plain(r), r.Step.Seconds(), r.Horizon.Seconds()})
}

// ProgressEvery is how many decisions a backtest takes between calls of its
// progress function and checks of its context; both also happen after every
// refit, which is where the time goes at fine steps.
const ProgressEvery = 1024

// BacktestProgress is how far a backtest has gone: Done of Total decisions
// taken (scored or not), Refits models trained so far.
type BacktestProgress struct {
	Done, Total, Refits int
}

// Backtest trains on everything before testFrom and walks every step from
// testFrom to the end of s, forecasting horizon ahead, with the other
// settings of DefaultConfig (10-minute steps of the max, daily refits). See
// Config.Backtest.
func Backtest(ctx context.Context, s Series, testFrom time.Time, horizon time.Duration) (Result, error) {
	c := DefaultConfig()
	c.TestFrom, c.Horizon = testFrom, horizon
	c.TestUntil = s.End()
	return c.Backtest(ctx, s, nil)
}

// Backtest replays the forecaster over the test window as it would have run:
// s is resampled to c.Step with Max; at every step boundary t in [TestFrom,
// TestUntil) a forecast is issued for the step that ends at t+Horizon, from
// the steps that ended by t only, with a model trained on the steps that
// ended before the latest refit time ≤ t (TestFrom, then every RefitEvery).
// Decisions whose target step is missing or beyond s are not scored.
//
// progress, when not nil, is called every ProgressEvery decisions and after
// each refit. Once ctx is done the backtest stops within as many decisions
// or one fit, with an error that says how far it went and ctx's cause.
func (c Config) Backtest(ctx context.Context, s Series, progress func(BacktestProgress)) (Result, error) {
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	var ours, last, dayAgo accumulator
	res := Result{Step: c.Step, Horizon: c.Horizon, TestFrom: c.TestFrom, TestUntil: c.TestUntil}
	refits, model, err := c.walk(ctx, s, progress, func(f Forecast, actual, lastV, dayAgoV float64) {
		ours.add(f.Point, actual)
		last.add(lastV, actual)
		dayAgo.add(dayAgoV, actual)
	})
	if err != nil {
		return Result{}, err
	}
	if ours.n == 0 {
		return Result{}, fmt.Errorf("%w: no scorable decision in [%s, %s)", ErrNotEnoughData,
			c.TestFrom.Format(timeLayout), c.TestUntil.Format(timeLayout))
	}
	m := ours.metrics()
	res.RMSENodes, res.MAENodes, res.SMAPE, res.N = m.RMSENodes, m.MAENodes, m.SMAPE, m.N
	res.Baselines = map[string]Metrics{"last": last.metrics(), "day_ago": dayAgo.metrics()}
	res.Refits, res.TrainRows, res.Features = refits, model.TrainRows(), model.FeatureNames()
	return res, nil
}

// walk runs the backtest's decisions in time order and calls visit for each
// scored one with the forecast, the actual demand, and the two baselines. It
// returns the number of models trained and the last of them. progress and
// ctx are as in Backtest.
//
// Causality does not rest on the model alone: each fit is handed the series
// cut at its refit time, each forecast the series cut at its decision time.
func (c Config) walk(ctx context.Context, s Series, progress func(BacktestProgress), visit func(f Forecast, actual, last, dayAgo float64)) (int, *Model, error) {
	y, err := s.Resample(c.Step, Max)
	if err != nil {
		return 0, nil, fmt.Errorf("demand: backtest: %w", err)
	}
	k0, ok := y.index(c.TestFrom)
	if !ok {
		return 0, nil, fmt.Errorf("demand: backtest: --demand.test-from %s is not on the %v step grid",
			c.TestFrom.Format(timeLayout), c.Step)
	}
	if k0 <= 0 {
		return 0, nil, fmt.Errorf("%w: backtest: no data before --demand.test-from %s", ErrNotEnoughData, c.TestFrom.Format(timeLayout))
	}
	H := int(c.Horizon / c.Step)
	day := int(24 * time.Hour / c.Step)
	back := day * ((H + day - 1) / day) // whole days from the target back to a known step
	refit := -1
	if c.RefitEvery > 0 {
		refit = int(c.RefitEvery / c.Step)
	}
	end := k0 // one past the last decision
	for end < len(y.Values)-H+1 && y.Time(end).Before(c.TestUntil) {
		end++
	}
	var model *Model
	refits := 0
	// report calls progress and checks ctx, done decisions in.
	report := func(done int) error {
		if progress != nil {
			progress(BacktestProgress{Done: done, Total: end - k0, Refits: refits})
		}
		if ctx.Err() != nil {
			return fmt.Errorf("demand: backtest stopped after %d of %d decisions (at %s): %w",
				done, end-k0, y.Time(k0+done).Format(timeLayout), context.Cause(ctx))
		}
		return nil
	}
	for k := k0; k < end; k++ {
		if k > k0 && (k-k0)%ProgressEvery == 0 {
			if err := report(k - k0); err != nil {
				return refits, model, err
			}
		}
		if model == nil || (refit > 0 && (k-k0)%refit == 0) {
			hist, err := y.Before(y.Time(k))
			if err != nil {
				return refits, model, err
			}
			if model, err = c.fit(hist); err != nil {
				return refits, model, fmt.Errorf("demand: backtest: train until %s: %w", y.Time(k).Format(timeLayout), err)
			}
			refits++
			if err := report(k - k0); err != nil {
				return refits, model, err
			}
		}
		actual := y.Values[k+H-1]
		if math.IsNaN(actual) {
			continue
		}
		hist, err := y.Before(y.Time(k))
		if err != nil {
			return refits, model, err
		}
		f, err := model.Predict(hist, y.Time(k))
		if err != nil {
			return refits, model, fmt.Errorf("demand: backtest: %w", err)
		}
		// Baselines read the same causal history, forward-filled like the
		// features.
		lastV, dayAgoV := latest(hist.Values, k-1), latest(hist.Values, k+H-1-back)
		if math.IsNaN(lastV) || math.IsNaN(dayAgoV) {
			continue
		}
		visit(f, actual, lastV, dayAgoV)
	}
	return refits, model, nil
}

// latest returns the latest known value of v at or before i, NaN if none.
func latest(v []float64, i int) float64 {
	for i = min(i, len(v)-1); i >= 0; i-- {
		if !math.IsNaN(v[i]) {
			return v[i]
		}
	}
	return math.NaN()
}

// accumulator sums forecast errors.
type accumulator struct {
	n                 int
	sq, abs, smapeSum float64
}

func (a *accumulator) add(f, actual float64) {
	e := f - actual
	a.n++
	a.sq += e * e
	a.abs += math.Abs(e)
	if den := math.Abs(f) + math.Abs(actual); den > 0 {
		a.smapeSum += 2 * math.Abs(e) / den
	}
}

func (a *accumulator) metrics() Metrics {
	if a.n == 0 {
		return Metrics{}
	}
	n := float64(a.n)
	return Metrics{RMSENodes: math.Sqrt(a.sq / n), MAENodes: a.abs / n, SMAPE: a.smapeSum / n, N: a.n}
}
