package loop

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/ces"
	"github.com/heliostat-dev/heliostat/predictor/demand"
)

// Forecast sources (Config.Forecast).
const (
	// ForecastModel forecasts each partition's demand with
	// predictor/demand's Forecaster once the loop has watched it for
	// Config.ForecastMinHistory, and with the watched peak before that (or
	// when the model cannot fit).
	ForecastModel = "model"
	// ForecastPeak always uses the peak demand of the last PeakWindow.
	ForecastPeak = "peak"
)

// maxDemandHistory bounds the demand history kept per partition: the
// forecaster's 14-day error calibration plus its week-long lags, with room.
const maxDemandHistory = 30 * 24 * time.Hour

// demandModel is one partition's model forecaster and the demand history it
// reads: the largest demand seen by any pass within each step.
type demandModel struct {
	fc     *demand.Forecaster
	steps  demand.Series // NaN for steps no pass saw
	latest ces.Forecast  // the latest forecast issued; Horizon 0 if none
	err    string        // why the latest attempt gave no forecast
}

// record adds a pass's demand to the step that holds now, and reports
// whether that raised the step's value.
func (dm *demandModel) record(now time.Time, v float64) bool {
	return dm.put(now, v, false)
}

// put raises the step that holds at to v, and reports whether it did. A
// step before the kept history is written only when loading saved history
// (past); a pass whose clock went back is ignored rather than rewrite the
// past. A step more than the kept span after the history starts it afresh.
func (dm *demandModel) put(at time.Time, v float64, past bool) bool {
	step := dm.steps.Step
	at = at.Truncate(step)
	keep := int(maxDemandHistory / step)
	if len(dm.steps.Values) > 0 && at.Before(dm.steps.Start) {
		if !past {
			return false
		}
		n := int(dm.steps.Start.Sub(at) / step)
		if n+len(dm.steps.Values) > keep {
			return false // older than the history kept
		}
		dm.steps.Values = append(slices.Repeat([]float64{math.NaN()}, n), dm.steps.Values...)
		dm.steps.Start = at
	}
	if len(dm.steps.Values) == 0 || int(at.Sub(dm.steps.Start)/step) >= len(dm.steps.Values)+keep {
		dm.steps.Start, dm.steps.Values = at, dm.steps.Values[:0]
	}
	k := int(at.Sub(dm.steps.Start) / step)
	for len(dm.steps.Values) <= k {
		dm.steps.Values = append(dm.steps.Values, math.NaN())
	}
	raised := false
	if cur := dm.steps.Values[k]; math.IsNaN(cur) || v > cur {
		dm.steps.Values[k] = v
		raised = true
	}
	if drop := len(dm.steps.Values) - keep; drop > 0 {
		dm.steps.Values = slices.Delete(dm.steps.Values, 0, drop)
		dm.steps.Start = dm.steps.Start.Add(time.Duration(drop) * step)
	}
	return raised
}

// observed says whether a pass recorded demand in the step that starts at.
func (dm *demandModel) observed(at time.Time) bool {
	k := int(at.Sub(dm.steps.Start) / dm.steps.Step)
	return !at.Before(dm.steps.Start) && k < len(dm.steps.Values) && !math.IsNaN(dm.steps.Values[k])
}

// history is how long the recorded demand spans, up to the step that holds
// now (excluded).
func (dm *demandModel) history(now time.Time) time.Duration {
	if len(dm.steps.Values) == 0 {
		return 0
	}
	return now.Truncate(dm.steps.Step).Sub(dm.steps.Start)
}

// forecast returns the partition's forecast at now and what kind it is (for
// the audit basis and the API), recording demand first.
func (l *Loop) forecast(ps *poolState, now time.Time, demandNow float64) (ces.Forecast, string) {
	peak := ps.peak(now, demandNow, l.cfg)
	peakKind := "peak of the last " + l.cfg.PeakWindow.String()
	if l.cfg.Forecast != ForecastModel {
		return peak, peakKind
	}
	if ps.model == nil {
		fcfg := l.cfg.forecasterConfig()
		fc, err := demand.NewForecaster(fcfg)
		if err != nil {
			l.m.forecastErrors.Inc()
			return peak, peakKind + "; no model forecaster: " + err.Error()
		}
		ps.model = &demandModel{fc: fc, steps: demand.Series{Step: fcfg.Model.Step}}
		l.stored.seed(ps)
	}
	dm := ps.model
	if dm.record(now, demandNow) {
		l.stored.raised(ps.name, now.Truncate(dm.steps.Step), demandNow)
	}
	step := dm.steps.Step
	at := now.Truncate(step)
	if have := dm.history(now); have < l.cfg.ForecastMinHistory {
		dm.err = fmt.Sprintf("model after %v of demand history (have %v)", l.cfg.ForecastMinHistory, have.Truncate(step))
		return peak, peakKind + "; " + dm.err
	}
	if !dm.observed(at.Add(-step)) {
		// After a gap (the actuator or the scheduler was down) the model
		// would carry the demand from before it forward: wait for one
		// observed step.
		return peak, peakKind + "; model after a step observed since the gap in the demand history"
	}
	if dm.latest.Horizon == 0 || at.After(dm.latest.Issued) {
		f, err := dm.fc.Forecast(dm.steps, at)
		if err != nil {
			l.m.forecastErrors.Inc()
			l.logger.Warn("demand forecast failed; using the watched peak", "err", err)
			dm.latest, dm.err = ces.Forecast{}, err.Error()
		} else {
			dm.latest = ces.Forecast{Issued: f.Issued, Horizon: f.Target.Sub(f.Issued), Point: f.Point, Max: f.Max, Upper: f.Upper, Quantile: f.Quantile}
			dm.err = ""
		}
	}
	if dm.latest.Horizon == 0 || now.Sub(dm.latest.Issued) >= dm.latest.Horizon {
		return peak, peakKind + "; no model forecast: " + dm.err
	}
	return dm.latest, fmt.Sprintf("demand model (%v steps, %v ahead, upper = q%g of past errors)", step, dm.latest.Horizon, dm.latest.Quantile)
}

// peak records the demand seen now and returns the peak forecast: the most
// nodes demanded within the last PeakWindow, over a horizon of one wake
// latency and one pass. Before the loop has watched a whole PeakWindow it
// returns no forecast, which powers nothing down.
func (ps *poolState) peak(now time.Time, v float64, c Config) ces.Forecast {
	cut := now.Add(-c.PeakWindow)
	ps.demand = slices.DeleteFunc(ps.demand, func(m demandMark) bool { return m.at.Before(cut) || m.at.After(now) })
	ps.demand = append(ps.demand, demandMark{now, v})
	if now.Sub(ps.first) < c.PeakWindow {
		return ces.Forecast{}
	}
	peak := v
	for _, m := range ps.demand {
		peak = max(peak, m.v)
	}
	return ces.Forecast{Issued: now, Horizon: c.CES.WakeLatency + c.Interval, Point: v, Max: peak, Upper: peak}
}
