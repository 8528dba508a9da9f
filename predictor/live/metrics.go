package live

import (
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/metricsreg"
)

// Error stages of heliostat_predictor_errors_total.
const (
	stageLoad    = "load"
	stageTrain   = "train"
	stagePredict = "predict"
	stageOutcome = "outcome"
)

type metrics struct {
	trainDuration prometheus.Histogram
	passDuration  prometheus.Histogram
	modelVersion  prometheus.Gauge
	trainRows     prometheus.Gauge
	jobs          prometheus.Gauge
	predictions   prometheus.Counter
	outcomes      prometheus.Counter
	within2x      prometheus.Gauge
	absLogError   prometheus.Gauge
	coverage      prometheus.Gauge
	rollingN      prometheus.Gauge
	dataClock     prometheus.Gauge
	futureJobs    prometheus.Gauge
	outlived      prometheus.Gauge
	abandoned     prometheus.Counter
	errors        *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, age, widen func() float64) (*metrics, error) {
	m := &metrics{
		trainDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "heliostat_predictor_train_duration_seconds",
			Help: "Time to fit a duration model (held-out and served fits, with their scoring).", Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12)}),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "heliostat_predictor_pass_duration_seconds",
			Help: "Time of one pass: load jobs, replay the window, (re)train, predict, record outcomes.", Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12)}),
		modelVersion: prometheus.NewGauge(prometheus.GaugeOpts{Name: "heliostat_predictor_model_version", Help: "Version of the model serving predictions (0: none yet)."}),
		trainRows:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "heliostat_predictor_model_train_rows", Help: "Training rows (ended jobs) of the model serving predictions."}),
		jobs:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "heliostat_predictor_window_jobs", Help: "Jobs in the predictor's window (ended or not)."}),
		predictions:  prometheus.NewCounter(prometheus.CounterOpts{Name: "heliostat_predictor_predictions_total", Help: "Job duration predictions written."}),
		outcomes:     prometheus.NewCounter(prometheus.CounterOpts{Name: "heliostat_predictor_outcomes_total", Help: "Prediction outcomes (errors of ended jobs) written."}),
		within2x: prometheus.NewGauge(prometheus.GaugeOpts{Name: "heliostat_predictor_rolling_within_2x_ratio",
			Help: "Share of the latest outcomes (jobs that ran, predicted before they ended) predicted within a factor of 2."}),
		absLogError: prometheus.NewGauge(prometheus.GaugeOpts{Name: "heliostat_predictor_rolling_abs_log_error",
			Help: "Mean |ln(predicted/actual)| over the latest outcomes."}),
		coverage: prometheus.NewGauge(prometheus.GaugeOpts{Name: "heliostat_predictor_rolling_interval_coverage_ratio",
			Help: "Share of the latest outcomes whose run time fell inside the predicted 80% interval."}),
		rollingN: prometheus.NewGauge(prometheus.GaugeOpts{Name: "heliostat_predictor_rolling_outcomes", Help: "Outcomes the rolling accuracy gauges cover."}),
		dataClock: prometheus.NewGauge(prometheus.GaugeOpts{Name: "heliostat_predictor_data_clock_seconds",
			Help: "Newest job event (Unix seconds) at the last pass, which the window is measured back from; events of live sources stamped more than 1h after ClickHouse's now() left out."}),
		futureJobs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "heliostat_predictor_future_stamped_jobs",
			Help: "Jobs of live sources (not sim or trace) with an event stamped more than 1h after ClickHouse's now(), which the data clock left out at the last pass."}),
		outlived: prometheus.NewGauge(prometheus.GaugeOpts{Name: "heliostat_predictor_outlived_jobs",
			Help: "Predicted jobs submitted before the window (--predictor.history) that had not ended at the last pass's lookup, still waited for to record their errors."}),
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{Name: "heliostat_predictor_outcomes_abandoned_total",
			Help: "Predicted jobs given up without an outcome: not seen to end within --predictor.outcome-wait of their submit."}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "heliostat_predictor_errors_total",
			Help: "Failed steps of the live predictor, by stage (load, train, predict, outcome)."}, []string{"stage"}),
	}
	ageGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "heliostat_predictor_model_age_seconds",
		Help: "Seconds since the model serving predictions was trained (0: none yet)."}, age)
	widenGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "heliostat_predictor_interval_widen",
		Help: "Online multiplier of the predicted intervals' log offsets, moved by each outcome so that 80% of run times fall inside (1: as the model calibrated them)."}, widen)
	for _, s := range []string{stageLoad, stageTrain, stagePredict, stageOutcome} {
		m.errors.WithLabelValues(s)
	}
	if err := metricsreg.Register(reg, m.trainDuration, m.passDuration, m.modelVersion, m.trainRows, m.jobs, m.predictions, m.outcomes,
		m.within2x, m.absLogError, m.coverage, m.rollingN, m.dataClock, m.futureJobs, m.outlived, m.abandoned, m.errors, ageGauge, widenGauge); err != nil {
		return nil, fmt.Errorf("live: register metrics: %w", err)
	}
	return m, nil
}

// outcomeScore is what the rolling gauges keep of one outcome.
type outcomeScore struct {
	absLog           float64
	within2x, inside bool
}

// rolling keeps the latest n outcome scores.
type rolling struct {
	buf  []outcomeScore
	next int
	full bool
}

func newRolling(n int) *rolling { return &rolling{buf: make([]outcomeScore, n)} }

func (r *rolling) add(s outcomeScore) {
	r.buf[r.next] = s
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

func (r *rolling) len() int {
	if r.full {
		return len(r.buf)
	}
	return r.next
}

// stats returns the share within 2x, the mean absolute log error and the
// interval coverage; NaN when empty.
func (r *rolling) stats() (within2x, absLog, coverage float64) {
	n := r.len()
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	for _, s := range r.buf[:n] {
		absLog += s.absLog
		if s.within2x {
			within2x++
		}
		if s.inside {
			coverage++
		}
	}
	return within2x / float64(n), absLog / float64(n), coverage / float64(n)
}

func (m *metrics) setRolling(r *rolling) {
	w, a, c := r.stats()
	m.within2x.Set(w)
	m.absLogError.Set(a)
	m.coverage.Set(c)
	m.rollingN.Set(float64(r.len()))
}

func since(now func() time.Time, t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return now().Sub(t).Seconds()
}
