package api

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/metricsreg"
)

type metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	badRequests  *prometheus.CounterVec
	authFailures prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_actuator_api_requests_total",
			Help: "Requests to the advisory API, by route and status class.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "heliostat_actuator_api_request_duration_seconds",
			Help:    "Time to answer a request to the advisory API, by route.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 10),
		}, []string{"route"}),
		badRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_actuator_api_bad_requests_total",
			Help: "Requests rejected as malformed, by the field at fault.",
		}, []string{"field"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_actuator_api_auth_failures_total",
			Help: "Requests to endpoints that change anything without the right bearer token.",
		}),
	}
	if reg != nil {
		if err := metricsreg.Register(reg, m.requests, m.duration, m.badRequests, m.authFailures); err != nil {
			return nil, fmt.Errorf("api: register metrics: %w", err)
		}
	}
	return m, nil
}
