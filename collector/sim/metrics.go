package sim

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/metricsreg"
)

// Values of the outcome label of heliostat_sim_messages_total.
const (
	outcomePublished = "published"
	outcomeFailed    = "failed"
)

// metrics are the simulator's self-metrics.
type metrics struct {
	submitted prometheus.Counter
	started   prometheus.Counter
	finished  *prometheus.CounterVec
	rejected  prometheus.Counter
	pending   prometheus.Gauge
	running   prometheus.Gauge
	gpusBusy  prometheus.Gauge
	nodes     *prometheus.GaugeVec
	messages  *prometheus.CounterVec
	samples   prometheus.Counter
	simTime   prometheus.Gauge
	resumed   prometheus.Counter
	restored  prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		submitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_sim_jobs_submitted_total",
			Help: "Jobs submitted to the simulated cluster.",
		}),
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_sim_jobs_started_total",
			Help: "Jobs the simulated scheduler started.",
		}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_sim_jobs_finished_total",
			Help: "Jobs that ended on the simulated cluster, by final state.",
		}, []string{"state"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_sim_jobs_rejected_total",
			Help: "Jobs of the workload that could never run (no GPUs, unknown or too small virtual cluster, duplicate id) and were skipped.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_sim_jobs_pending",
			Help: "Jobs waiting to start.",
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_sim_jobs_running",
			Help: "Jobs running.",
		}),
		gpusBusy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_sim_gpus_busy",
			Help: "GPUs allocated to running jobs.",
		}),
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "heliostat_sim_nodes",
			Help: "Simulated nodes by power state (up, waking, down).",
		}, []string{"state"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_sim_messages_total",
			Help: "Messages handed to the publisher, by topic and outcome (published, failed).",
		}, []string{"topic", "outcome"}),
		samples: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_sim_samples_total",
			Help: "GPU samples the simulated nodes produced.",
		}),
		simTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_sim_time_seconds",
			Help: "The simulated clock, Unix seconds.",
		}),
		resumed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_sim_nodes_resumed_total",
			Help: "Powered-down nodes the simulated scheduler powered up for a pending job (--sim.auto-resume, as Slurm's ResumeProgram).",
		}),
		restored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_sim_jobs_restored_total",
			Help: "Pending and running jobs the simulator took over from the run before it (heliostat up after a restart).",
		}),
	}
	for _, s := range []string{"COMPLETED", "FAILED", "CANCELLED"} {
		m.finished.WithLabelValues(s)
	}
	for _, s := range []NodeState{NodeUp, NodeWaking, NodeDown} {
		m.nodes.WithLabelValues(s.String())
	}
	return m
}

func (m *metrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.submitted, m.started, m.finished, m.rejected, m.pending, m.running,
		m.gpusBusy, m.nodes, m.messages, m.samples, m.simTime, m.resumed, m.restored}
}

// register registers the metrics on reg, or none of them.
func (m *metrics) register(reg prometheus.Registerer) error {
	if err := metricsreg.Register(reg, m.all()...); err != nil {
		return fmt.Errorf("sim: register metrics: %w", err)
	}
	return nil
}
