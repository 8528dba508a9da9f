package nvml

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/schemas"
)

// Collector returns a Prometheus collector of the Source's own metrics, read
// at each scrape:
//
//   - heliostat_collector_nvml_read_errors_total{metric}: MetricErrors of
//     every metric;
//   - heliostat_collector_nvml_gpu_lost{gpu_index,gpu_uuid}: 1 for each GPU
//     that is lost or was left out at start-up, 0 for each that answers;
//   - heliostat_collector_nvml_gpu_losses_total: GPUs found lost since New,
//     those left out at start-up included;
//   - heliostat_collector_nvml_mig_reconfigurations_total: GPUs whose MIG
//     instances were found changed since New;
//   - heliostat_collector_nvml_gpu_stalled{gpu_index,gpu_uuid}: 1 for each GPU
//     an NVML call on which has not returned within StallTimeout, 0 for each
//     other;
//   - heliostat_collector_nvml_stalled_calls_total: calls found stalled since
//     New.
func (s *Source) Collector() prometheus.Collector {
	return metrics{
		s: s,
		readErrors: prometheus.NewDesc("heliostat_collector_nvml_read_errors_total",
			"NVML reads of a GPU metric that failed (other than not supported) or gave a value out of the metric's range, over all GPUs; each left that metric out of its tick's sample.",
			[]string{"metric"}, nil),
		gpuLost: prometheus.NewDesc("heliostat_collector_nvml_gpu_lost",
			"1 while a GPU is not sampled because it does not answer (ERROR_GPU_IS_LOST, ERROR_RESET_REQUIRED; asked again every minute) or could not be enumerated at start-up (not asked again until the collector restarts; gpu_uuid empty when unknown), 0 while it is sampled.",
			[]string{"gpu_index", "gpu_uuid"}, nil),
		losses: prometheus.NewDesc("heliostat_collector_nvml_gpu_losses_total",
			"GPUs found not answering since the collector started, those left out at start-up included; a GPU lost again after it came back counts again.",
			nil, nil),
		migChanges: prometheus.NewDesc("heliostat_collector_nvml_mig_reconfigurations_total",
			"Times a GPU's MIG instances were found changed (created or destroyed without a GPU reset) since the collector started; each rebuilt the instances sampled and listed for attribution.",
			nil, nil),
		gpuStalled: prometheus.NewDesc("heliostat_collector_nvml_gpu_stalled",
			"1 while a GPU is not sampled because an NVML call on it has not returned within the stall timeout (2s); it is not asked again until that call returns. 0 while its calls return.",
			[]string{"gpu_index", "gpu_uuid"}, nil),
		stalls: prometheus.NewDesc("heliostat_collector_nvml_stalled_calls_total",
			"NVML calls on a GPU found not returned within the stall timeout (2s) since the collector started; each left that GPU out until it returned.",
			nil, nil),
	}
}

type metrics struct {
	s                           *Source
	readErrors, gpuLost, losses *prometheus.Desc
	migChanges, gpuStalled      *prometheus.Desc
	stalls                      *prometheus.Desc
}

func (m metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.readErrors
	ch <- m.gpuLost
	ch <- m.losses
	ch <- m.migChanges
	ch <- m.gpuStalled
	ch <- m.stalls
}

func (m metrics) Collect(ch chan<- prometheus.Metric) {
	for mt := range schemas.NumMetrics {
		ch <- prometheus.MustNewConstMetric(m.readErrors, prometheus.CounterValue, float64(m.s.MetricErrors(mt)), mt.String())
	}
	for _, u := range m.s.unusable {
		ch <- prometheus.MustNewConstMetric(m.gpuLost, prometheus.GaugeValue, 1, strconv.Itoa(u.index), u.uuid)
	}
	type gpu struct {
		index uint32
		uuid  string
		lost  bool
		stall bool
	}
	var gpus []gpu
	m.s.lostMu.Lock()
	for _, d := range m.s.devices {
		if d.parent == nil {
			gpus = append(gpus, gpu{d.gpu.Index, d.gpu.UUID, d.lostErr != nil, !d.stalledSince.IsZero()})
		}
	}
	losses, migChanges, stalls := m.s.losses, m.s.migChanges, m.s.stalls
	m.s.lostMu.Unlock()
	for _, g := range gpus {
		v := 0.0
		if g.lost {
			v = 1
		}
		index := strconv.FormatUint(uint64(g.index), 10)
		ch <- prometheus.MustNewConstMetric(m.gpuLost, prometheus.GaugeValue, v, index, g.uuid)
		v = 0
		if g.stall {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(m.gpuStalled, prometheus.GaugeValue, v, index, g.uuid)
	}
	ch <- prometheus.MustNewConstMetric(m.losses, prometheus.CounterValue, float64(losses))
	ch <- prometheus.MustNewConstMetric(m.migChanges, prometheus.CounterValue, float64(migChanges))
	ch <- prometheus.MustNewConstMetric(m.stalls, prometheus.CounterValue, float64(stalls))
}
