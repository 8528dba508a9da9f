package nvml

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/schemas"
)

// readErrorsDesc describes MetricErrors as a Prometheus counter.
func readErrorsDesc() *prometheus.Desc {
	return prometheus.NewDesc("heliostat_collector_nvml_read_errors_total",
		"NVML reads of a GPU metric that failed (other than not supported) or gave a value out of the metric's range, over all GPUs; each left that metric out of its tick's sample.",
		[]string{"metric"}, nil)
}

// Collector returns a Prometheus collector of
// heliostat_collector_nvml_read_errors_total{metric}: MetricErrors of every
// metric, read at each scrape.
func (s *Source) Collector() prometheus.Collector { return readErrors{s: s, desc: readErrorsDesc()} }

type readErrors struct {
	s    *Source
	desc *prometheus.Desc
}

func (r readErrors) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

func (r readErrors) Collect(ch chan<- prometheus.Metric) {
	for m := range schemas.NumMetrics {
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.CounterValue, float64(r.s.MetricErrors(m)), m.String())
	}
}
