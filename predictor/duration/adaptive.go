package duration

import (
	"math"
	"sync"
)

// DefaultAdaptRate is the step of Adaptive's multiplier per observed job, in
// log space: a miss widens intervals by a factor e^(rate·IntervalLevel), a
// hit narrows them by e^(rate·(1−IntervalLevel)). Chosen on the backtests of
// the SWF and Venus traces (docs/BENCHMARKS.md).
const DefaultAdaptRate = 0.02

// maxAdaptLog bounds Adaptive's log multiplier: intervals are widened or
// narrowed at most e³ ≈ 20 times, so a burst of misses or hits cannot run
// the multiplier away.
const maxAdaptLog = 3

// Adaptive widens or narrows a model's intervals online, as jobs end:
// adaptive conformal inference (Gibbs and Candès, 2021) on the interval's
// scale. A calibrated model's intervals cover IntervalLevel of the jobs that
// ended just before it was fitted; a workload that drifts after that leaves
// them too narrow (or too wide) until the next fit. Each ended job whose run
// time fell outside the interval it was given raises the multiplier, each
// that fell inside lowers it, in the proportion that makes the long-run
// share covered converge to IntervalLevel whatever the drift. The
// multiplier carries over across refits: it tracks what calibration on the
// past misses. Safe for concurrent use; the zero value is not usable, use
// NewAdaptive.
type Adaptive struct {
	rate float64

	mu             sync.Mutex
	logW           float64
	observed, miss int
}

// NewAdaptive returns an Adaptive with multiplier 1 that moves by rate per
// observed job (DefaultAdaptRate when 0; a negative rate never moves).
func NewAdaptive(rate float64) *Adaptive {
	if rate == 0 {
		rate = DefaultAdaptRate
	}
	return &Adaptive{rate: math.Max(rate, 0)}
}

// Widen returns the current multiplier of the intervals' offsets from the
// point prediction, in log space (1 leaves them as the model made them).
func (a *Adaptive) Widen() float64 {
	if a == nil {
		return 1
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return math.Exp(a.logW)
}

// Observe records whether the run time of a job that ended fell inside the
// interval it was given (Prediction.Covers) and moves the multiplier.
func (a *Adaptive) Observe(inside bool) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.observed++
	step := -(1 - IntervalLevel)
	if !inside {
		a.miss++
		step = IntervalLevel
	}
	a.logW = math.Max(-maxAdaptLog, math.Min(maxAdaptLog, a.logW+a.rate*step))
}

// AdaptiveState is what an Adaptive has seen.
type AdaptiveState struct {
	Widen    float64 `json:"widen"`    // the current multiplier
	Observed int     `json:"observed"` // jobs observed
	Missed   int     `json:"missed"`   // of them, outside their interval
}

// State returns the multiplier and the counts behind it.
func (a *Adaptive) State() AdaptiveState {
	if a == nil {
		return AdaptiveState{Widen: 1}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return AdaptiveState{Widen: math.Exp(a.logW), Observed: a.observed, Missed: a.miss}
}
