package collector

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/schemas"
)

// Values of the outcome label of heliostat_collector_messages_total.
const (
	outcomePublished = "published" // the Publisher accepted it (sent or spooled)
	outcomeFailed    = "failed"    // lost: not encodable or the Publisher dropped it
)

// metrics are the collector's self-metrics. The vectors may be shared by
// several Collectors on one registry (one per source); the fields below the
// vectors are the children of this Collector's source.
type metrics struct {
	collectDuration *prometheus.HistogramVec
	collectSuccess  *prometheus.GaugeVec
	collectErrors   *prometheus.CounterVec
	samples         *prometheus.CounterVec
	messages        *prometheus.CounterVec
	events          *prometheus.CounterVec
	gpus            *prometheus.GaugeVec

	duration         prometheus.Observer
	success          prometheus.Gauge
	errors           prometheus.Counter
	samplesN         prometheus.Counter
	gpusN            prometheus.Gauge
	samplesPublished prometheus.Counter
	samplesFailed    prometheus.Counter
	eventsPublished  prometheus.Counter
	eventsFailed     prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		collectDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "heliostat_collector_collect_duration_seconds",
			Help: "Time one tick of a source took to collect, failed ticks included.",
			// 1ms to about 4s: NVML on a loaded 8-GPU host takes tens of ms.
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 13),
		}, []string{"source"}),
		collectSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "heliostat_collector_collect_success",
			Help: "Whether the last tick of a source succeeded (1) or failed (0).",
		}, []string{"source"}),
		collectErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_collector_collect_errors_total",
			Help: "Ticks of a source that failed; their samples were discarded.",
		}, []string{"source"}),
		samples: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_collector_samples_total",
			Help: "GPU samples collected from a source by successful ticks.",
		}, []string{"source"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_collector_messages_total",
			Help: "Messages handed to the publisher, by topic and outcome (published, failed).",
		}, []string{"topic", "outcome"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_collector_events_total",
			Help: "GPU events received from a source, by event type.",
		}, []string{"source", "type"}),
		gpus: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "heliostat_collector_gpus",
			Help: "GPUs and MIG instances a source reported in its last successful tick.",
		}, []string{"source"}),
	}
}

// register registers the vectors on reg, or none of them. A vector that is
// already registered, by another Collector on the same registry, is reused.
func (m *metrics) register(reg prometheus.Registerer) error {
	var done []prometheus.Collector
	err := registerVec(reg, &m.collectDuration, &done)
	if err == nil {
		err = registerVec(reg, &m.collectSuccess, &done)
	}
	if err == nil {
		err = registerVec(reg, &m.collectErrors, &done)
	}
	if err == nil {
		err = registerVec(reg, &m.samples, &done)
	}
	if err == nil {
		err = registerVec(reg, &m.messages, &done)
	}
	if err == nil {
		err = registerVec(reg, &m.events, &done)
	}
	if err == nil {
		err = registerVec(reg, &m.gpus, &done)
	}
	if err != nil {
		for _, d := range done {
			reg.Unregister(d)
		}
	}
	return err
}

// registerVec registers *c on reg and appends it to done, or replaces *c with
// the identical vector already registered there.
func registerVec[T prometheus.Collector](reg prometheus.Registerer, c *T, done *[]prometheus.Collector) error {
	err := reg.Register(*c)
	if err == nil {
		*done = append(*done, *c)
		return nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			*c = existing
			return nil
		}
	}
	return err
}

// bind picks the children of source, so that the hot path does no label
// lookups, and creates the series that should read 0 before anything
// happened.
func (m *metrics) bind(source string) {
	m.duration = m.collectDuration.WithLabelValues(source)
	m.success = m.collectSuccess.WithLabelValues(source)
	m.errors = m.collectErrors.WithLabelValues(source)
	m.samplesN = m.samples.WithLabelValues(source)
	m.gpusN = m.gpus.WithLabelValues(source)
	m.samplesPublished = m.messages.WithLabelValues(schemas.TopicGPUSamples, outcomePublished)
	m.samplesFailed = m.messages.WithLabelValues(schemas.TopicGPUSamples, outcomeFailed)
	m.eventsPublished = m.messages.WithLabelValues(schemas.TopicGPUEvents, outcomePublished)
	m.eventsFailed = m.messages.WithLabelValues(schemas.TopicGPUEvents, outcomeFailed)
}
