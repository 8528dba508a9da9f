package ces

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/heliostat-dev/heliostat/predictor/demand"
)

// The policies and forecast sources a Replay can run.
const (
	// PolicyHeliostat is (Config).Plan.
	PolicyHeliostat = "heliostat"
	// PolicyHelios is the CES policy of the Helios study as ANCHORS.md
	// describes it: on a shortfall (current demand above the powered
	// nodes) power up to demand + HeliosBuffer at once; when demand is
	// falling (the latest step below the one before) and the forecast
	// agrees (its point below the latest step), power down to demand +
	// HeliosBuffer.
	PolicyHelios = "helios"

	// ForecastModel is demand.Forecaster: strictly causal, refitted daily,
	// its upper bound calibrated from its own past errors.
	ForecastModel = "model"
	// ForecastOracle is the true future: point, max and upper are the
	// actual demand. For reference only.
	ForecastOracle = "oracle"
)

// HeliosBuffer is the Helios policy's buffer, in nodes.
const HeliosBuffer = 20

// ReplayConfig configures Replay.
type ReplayConfig struct {
	// Policy is the policy config of PolicyHeliostat; its WakeLatency is
	// the replay's wake-up latency for every policy.
	Policy Config
	// Forecaster configures the ForecastModel forecaster. Its Model.Step is
	// the decision step (default 10m); its Model.Horizon is set by Replay to
	// one step plus the wake-up latency, and its Quantile to
	// Policy.Quantile.
	Forecaster demand.ForecasterConfig
	// TestFrom and TestUntil bound the decisions: every step boundary in
	// [TestFrom, TestUntil). The forecaster trains on everything before
	// each decision. Defaults: demand.DefaultConfig().TestFrom and TestUntil.
	TestFrom, TestUntil time.Time
	// Nodes is the cluster size; 0: the series' latest `total` before
	// TestFrom (demand.Series.TotalBefore; 420 on Philly, which had 552
	// nodes for two days of November), else its Capacity.
	Nodes int
	// PolicyName is PolicyHeliostat (default) or PolicyHelios.
	PolicyName string
	// Source is ForecastModel (default) or ForecastOracle.
	Source string
	// OnStep, when set, is called with every decision, in time order.
	OnStep func(Step)
}

// Step is one decision of a replay and the step it governs.
type Step struct {
	At       time.Time
	Demand   float64  // actual demand of the step [At, At+step); NaN when unknown
	Known    float64  // the latest known demand at At (the step before)
	Forecast Forecast // the forecast the decision read
	Target   int
	Up, Down int
	Powered  int // powered (ready or waking) during the step, after the plan
	Ready    int // ready at the start of the step
	Unmet    bool
}

// Result is a replay's figures, as `heliostat sim ces` prints them.
type Result struct {
	Policy               string  `json:"policy"`
	Forecast             string  `json:"forecast"`
	WakeLatencyS         float64 `json:"wake_latency_s"`
	PoweredNodeUtil      float64 `json:"powered_node_util"`
	BaselineNodeUtil     float64 `json:"baseline_node_util"`
	UnmetDemandEvents    int     `json:"unmet_demand_events"`
	NodeHoursOff         float64 `json:"node_hours_off"`
	TransitionsPerDay    float64 `json:"transitions_per_day"`
	MeanPowered          float64 `json:"mean_powered"`
	Steps                int     `json:"steps"`  // test steps with known demand
	Nodes                int     `json:"nodes"`  // cluster size
	Refits               int     `json:"refits"` // models trained (ForecastModel)
	ForecastHorizonS     float64 `json:"forecast_horizon_s"`
	Quantile             float64 `json:"quantile,omitempty"`
	MaxTransitionsInHour int     `json:"max_transitions_in_hour"`
}

// ErrReplay is wrapped by configuration errors of Replay.
var ErrReplay = errors.New("ces: replay")

// Replay runs a policy over a node-demand series, decision by decision, as
// it would have run live: at every step boundary t of the test window the
// forecast reads only the steps that ended by t, the policy plans, the plan
// is applied to a cluster of Nodes nodes (power-downs at once, power-ups
// ready WakeLatency later), and the step [t, t+step) is scored against the
// nodes ready at t. The cluster starts with every node on. s is resampled to
// the decision step with Max (the CES protocol's demand).
func Replay(ctx context.Context, s demand.Series, rc ReplayConfig) (Result, error) {
	rc, err := rc.withDefaults()
	if err != nil {
		return Result{}, err
	}
	step := rc.Forecaster.Model.Step
	y, err := s.Resample(step, demand.Max)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrReplay, err)
	}
	nodes := rc.Nodes
	if nodes == 0 {
		nodes = int(s.TotalBefore(rc.TestFrom))
	}
	if nodes <= 0 {
		return Result{}, fmt.Errorf("%w: cluster size unknown: the series has no total; give the node count", ErrReplay)
	}
	k0, ok := index(y, rc.TestFrom)
	switch {
	case !ok:
		return Result{}, fmt.Errorf("%w: test-from %s is not on the %v grid after the series start %s",
			ErrReplay, rc.TestFrom.Format(time.DateTime), step, y.Start.Format(time.DateTime))
	case k0 <= 0:
		return Result{}, fmt.Errorf("%w: test-from %s is not after the series start %s: no demand before it to train on or to start from",
			ErrReplay, rc.TestFrom.Format(time.DateTime), y.Start.Format(time.DateTime))
	}
	// Demand above the cluster cannot be scored: every step would count
	// as unmet and the utilization would mean nothing. A cluster size
	// below the series' peak is a wrong --nodes, not a result.
	for k := k0; k < len(y.Values) && y.Time(k).Before(rc.TestUntil); k++ {
		if v := y.Values[k]; v > float64(nodes) {
			return Result{}, fmt.Errorf("%w: demand reaches %.0f nodes at %s, above the cluster size %d; give the cluster's real node count",
				ErrReplay, v, y.Time(k).Format(time.DateTime), nodes)
		}
	}
	horizon := rc.Forecaster.Model.Horizon
	H := int(horizon / step)

	var fc *demand.Forecaster
	if rc.Source == ForecastModel {
		if fc, err = demand.NewForecaster(rc.Forecaster); err != nil {
			return Result{}, fmt.Errorf("%w: %w", ErrReplay, err)
		}
	}
	cl := make([]Node, nodes)
	for i := range cl {
		cl[i] = Node{Name: fmt.Sprintf("node%04d", i), Powered: true}
	}
	res := Result{
		Policy: rc.PolicyName, Forecast: rc.Source, WakeLatencyS: rc.Policy.WakeLatency.Seconds(),
		Nodes: nodes, ForecastHorizonS: horizon.Seconds(),
	}
	if rc.Source == ForecastModel {
		res.Quantile = rc.Forecaster.Quantile
	}
	var (
		state               State
		utilSum, baseSum    float64
		poweredSum          float64
		transitions, nSteps int
		hour                []time.Time
	)
	for k := k0; y.Time(k).Before(rc.TestUntil) && k < len(y.Values); k++ {
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("ces: replay stopped at %s: %w", y.Time(k).Format(time.DateTime), context.Cause(ctx))
		}
		now := y.Time(k)
		known := latest(y.Values, k-1)
		if math.IsNaN(known) {
			return Result{}, fmt.Errorf("%w: no demand known before %s", ErrReplay, now.Format(time.DateTime))
		}
		var f Forecast
		switch rc.Source {
		case ForecastModel:
			df, err := fc.Forecast(y, now)
			if err != nil {
				return Result{}, fmt.Errorf("%w: %w", ErrReplay, err)
			}
			f = Forecast{Issued: df.Issued, Horizon: horizon, Point: df.Point, Max: df.Max, Upper: df.Upper, Quantile: df.Quantile}
		case ForecastOracle:
			// Reads the future on purpose: the reference, not a policy.
			mx, pt := math.Inf(-1), known
			for j := k; j < k+H && j < len(y.Values); j++ {
				if v := y.Values[j]; !math.IsNaN(v) {
					mx, pt = max(mx, v), v
				}
			}
			if math.IsInf(mx, -1) {
				mx = known
			}
			f = Forecast{Issued: now, Horizon: horizon, Point: pt, Max: mx, Upper: mx}
		}

		// Busy nodes: the latest minute's demand, on the ready nodes.
		busy := int(math.Ceil(s.LatestBefore(now)))
		for i := range cl {
			cl[i].Busy = false
			if cl[i].Powered && !cl[i].waking(now) && busy > 0 {
				cl[i].Busy = true
				busy--
			}
		}

		var up, down []string
		target := 0
		switch rc.PolicyName {
		case PolicyHeliostat:
			p, err := rc.Policy.Plan(Input{Now: now, Nodes: cl, Demand: known, Forecast: f, State: state})
			if err != nil {
				return Result{}, fmt.Errorf("%w: plan at %s: %w", ErrReplay, now.Format(time.DateTime), err)
			}
			state, target = p.Next, p.Target
			for _, a := range p.PowerUp {
				up = append(up, a.Node)
			}
			for _, a := range p.PowerDown {
				down = append(down, a.Node)
			}
		case PolicyHelios:
			prev := latest(y.Values, k-2)
			target, up, down = helios(cl, now, known, prev, f.Point)
		}
		byName := make(map[string]int, len(up)+len(down))
		for _, n := range up {
			byName[n] = 1
		}
		for _, n := range down {
			byName[n] = -1
		}
		for i := range cl {
			switch byName[cl[i].Name] {
			case 1:
				cl[i].Powered, cl[i].LastTransition, cl[i].WakingUntil = true, now, now.Add(rc.Policy.WakeLatency)
			case -1:
				if cl[i].Busy {
					return Result{}, fmt.Errorf("%w: %s powered %s down while busy", ErrReplay, rc.PolicyName, cl[i].Name)
				}
				cl[i].Powered, cl[i].LastTransition, cl[i].WakingUntil = false, now, time.Time{}
			}
		}
		st := Step{At: now, Demand: y.Values[k], Known: known, Forecast: f, Target: target, Up: len(up), Down: len(down)}
		for _, n := range cl {
			if n.Powered {
				st.Powered++
				if !n.waking(now) {
					st.Ready++
				}
			}
		}
		transitions += len(up) + len(down)
		for range len(up) + len(down) {
			hour = append(hour, now)
		}
		for len(hour) > 0 && !hour[0].After(now.Add(-time.Hour)) {
			hour = hour[1:]
		}
		res.MaxTransitionsInHour = max(res.MaxTransitionsInHour, len(hour))
		res.NodeHoursOff += float64(nodes-st.Powered) * step.Hours()
		poweredSum += float64(st.Powered)
		if d := st.Demand; !math.IsNaN(d) {
			nSteps++
			st.Unmet = d > float64(st.Ready)
			if st.Unmet {
				res.UnmetDemandEvents++
			}
			utilSum += d / float64(max(st.Powered, 1))
			baseSum += d / float64(nodes)
		}
		if rc.OnStep != nil {
			rc.OnStep(st)
		}
	}
	if nSteps == 0 {
		return Result{}, fmt.Errorf("%w: no step with known demand in [%s, %s)", ErrReplay,
			rc.TestFrom.Format(time.DateTime), rc.TestUntil.Format(time.DateTime))
	}
	days := rc.TestUntil.Sub(rc.TestFrom).Hours() / 24
	if end := y.End(); end.Before(rc.TestUntil) {
		days = end.Sub(rc.TestFrom).Hours() / 24
	}
	res.Steps = nSteps
	res.PoweredNodeUtil = utilSum / float64(nSteps)
	res.BaselineNodeUtil = baseSum / float64(nSteps)
	res.TransitionsPerDay = float64(transitions) / days
	res.MeanPowered = poweredSum / float64(nSteps)
	if fc != nil {
		res.Refits = fc.Refits()
	}
	return res, nil
}

// helios is the Helios CES policy (see PolicyHelios) on the replay's
// cluster: it returns the target and the nodes to power up and down.
// Power-downs take idle ready nodes only, like Plan.
func helios(cl []Node, now time.Time, known, prev, point float64) (int, []string, []string) {
	powered := 0
	for _, n := range cl {
		if n.Powered {
			powered++
		}
	}
	d := int(math.Ceil(known))
	target := powered
	switch {
	case known > float64(powered):
		target = min(d+HeliosBuffer, len(cl))
	case known < prev && point < known && d+HeliosBuffer < powered:
		target = d + HeliosBuffer
	}
	var up, down []string
	for _, n := range cl {
		switch {
		case target > powered && !n.Powered && len(up) < target-powered:
			up = append(up, n.Name)
		case target < powered && n.Powered && !n.Busy && !n.waking(now) && len(down) < powered-target:
			down = append(down, n.Name)
		}
	}
	return target, up, down
}

// withDefaults fills defaults and validates.
func (rc ReplayConfig) withDefaults() (ReplayConfig, error) {
	if rc.Policy == (Config{}) {
		rc.Policy = DefaultConfig()
	}
	if err := rc.Policy.Validate(); err != nil {
		return rc, err
	}
	if rc.TestFrom.IsZero() {
		rc.TestFrom = demand.DefaultConfig().TestFrom
	}
	if rc.TestUntil.IsZero() {
		rc.TestUntil = demand.DefaultConfig().TestUntil
	}
	if !rc.TestUntil.After(rc.TestFrom) {
		return rc, fmt.Errorf("%w: test-until %s is not after test-from %s", ErrReplay,
			rc.TestUntil.Format(time.DateTime), rc.TestFrom.Format(time.DateTime))
	}
	if rc.PolicyName == "" {
		rc.PolicyName = PolicyHeliostat
	}
	if rc.PolicyName != PolicyHeliostat && rc.PolicyName != PolicyHelios {
		return rc, fmt.Errorf("%w: unknown policy %q (want %s or %s)", ErrReplay, rc.PolicyName, PolicyHeliostat, PolicyHelios)
	}
	if rc.Source == "" {
		rc.Source = ForecastModel
	}
	if rc.Source != ForecastModel && rc.Source != ForecastOracle {
		return rc, fmt.Errorf("%w: unknown forecast %q (want %s or %s)", ErrReplay, rc.Source, ForecastModel, ForecastOracle)
	}
	if rc.Nodes < 0 {
		return rc, fmt.Errorf("%w: node count %d is negative", ErrReplay, rc.Nodes)
	}
	if rc.Forecaster.Model.Step == 0 {
		rc.Forecaster.Model.Step = demand.DefaultStep
	}
	step := rc.Forecaster.Model.Step
	if step <= 0 {
		return rc, fmt.Errorf("%w: step %v is not positive", ErrReplay, step)
	}
	// Look one decision step past the wake-up: nodes powered down now can
	// be back, ready, by then.
	lat := rc.Policy.WakeLatency
	rc.Forecaster.Model.Horizon = step * ((lat+step-1)/step + 1)
	rc.Forecaster.Quantile = rc.Policy.Quantile
	if err := rc.Forecaster.Validate(); err != nil {
		return rc, fmt.Errorf("%w: %w", ErrReplay, err)
	}
	return rc, nil
}

// index returns the step of s that starts at t.
func index(s demand.Series, t time.Time) (int, bool) {
	d := t.Sub(s.Start)
	if d%s.Step != 0 {
		return 0, false
	}
	return int(d / s.Step), true
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
