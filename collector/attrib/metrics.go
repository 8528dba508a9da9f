package attrib

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/metricsreg"
)

// Stages of a poll, the values of the stage label of
// heliostat_attrib_errors_total.
const (
	stageList    = "list"    // listing the GPUs' processes failed (all or some GPUs)
	stageResolve = "resolve" // a process's /proc files could not be read or parsed
	stagePublish = "publish" // the publisher did not take the records (kept, retried)
	stageState   = "state"   // the state file could not be read or written
)

var stages = [...]string{stageList, stageResolve, stagePublish, stageState}

// metrics are the attributor's self-metrics.
type metrics struct {
	polls        prometheus.Counter
	pollDuration prometheus.Histogram
	pollSuccess  prometheus.Gauge
	errors       *prometheus.CounterVec
	vanished     prometheus.Counter
	environ      *prometheus.CounterVec
	unattributed *prometheus.GaugeVec
	opened       prometheus.Counter
	closed       prometheus.Counter
	open         prometheus.Gauge
	pending      prometheus.Gauge
	dropped      prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		polls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_attrib_polls_total",
			Help: "Polls of the GPUs' processes for job attribution, failed ones included.",
		}),
		pollDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "heliostat_attrib_poll_duration_seconds",
			Help: "Time one attribution poll took: listing, reading /proc, publishing and saving state.",
			// 1ms to about 4s.
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 13),
		}),
		pollSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_attrib_poll_success",
			Help: "Whether the last attribution poll went without error (1) or not (0).",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_attrib_errors_total",
			Help: "Attribution failures by stage: list (GPU processes), resolve (a process's /proc files), publish, state (state file).",
		}, []string{"stage"}),
		vanished: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_attrib_vanished_processes_total",
			Help: "GPU processes that ended between being listed and their /proc files being read.",
		}),
		environ: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_attrib_malformed_environ_total",
			Help: "GPU processes whose /proc/PID/environ could not be parsed, by reason (bad_id, incomplete_array, bad_user), counted at every poll that read one; the job is taken from the cgroup, and without a job there the process is not resolved.",
		}, []string{"reason"}),
		unattributed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "heliostat_attrib_unattributed_processes",
			Help: "Compute processes in no Slurm job, per GPU or MIG instance, at the last poll.",
		}, []string{"gpu_uuid", "mig_uuid"}),
		opened: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_attrib_intervals_opened_total",
			Help: "Allocation intervals opened: a job seen on a GPU it was not on.",
		}),
		closed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_attrib_intervals_closed_total",
			Help: "Allocation intervals closed: a job absent from its GPU for the grace number of polls.",
		}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_attrib_open_intervals",
			Help: "Allocation intervals open after the last poll.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_attrib_pending_allocations",
			Help: "Allocation records not yet taken by the publisher, kept for the next poll.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_attrib_dropped_allocations_total",
			Help: "Allocation records dropped, oldest first, because too many were pending.",
		}),
	}
	for _, s := range stages {
		m.errors.WithLabelValues(s)
	}
	for _, r := range environReasons {
		m.environ.WithLabelValues(r)
	}
	return m
}

// register registers every metric on reg, or none.
func (m *metrics) register(reg prometheus.Registerer) error {
	return metricsreg.Register(reg, m.polls, m.pollDuration, m.pollSuccess, m.errors, m.vanished,
		m.environ, m.unattributed, m.opened, m.closed, m.open, m.pending, m.dropped)
}
