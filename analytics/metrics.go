package analytics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/metricsreg"
)

type metrics struct {
	runs     prometheus.Counter
	errors   prometheus.Counter
	duration prometheus.Histogram
	lastOK   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		runs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_analytics_window_runs_total",
			Help: "Characterization runs of a window, failed ones included.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_analytics_window_run_errors_total",
			Help: "Characterization runs of a window that failed.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "heliostat_analytics_window_run_duration_seconds",
			Help:    "Time to characterize one window (all jobs).",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_analytics_last_success_timestamp_seconds",
			Help: "Unix time (wall clock) of the last window run that succeeded.",
		}),
	}
	if err := metricsreg.Register(reg, m.runs, m.errors, m.duration, m.lastOK); err != nil {
		return nil, fmt.Errorf("analytics: register metrics: %w", err)
	}
	return m, nil
}

func (m *metrics) observe(err error, d time.Duration, now time.Time) {
	m.runs.Inc()
	m.duration.Observe(d.Seconds())
	if err != nil {
		m.errors.Inc()
		return
	}
	m.lastOK.Set(float64(now.UnixNano()) / 1e9)
}
