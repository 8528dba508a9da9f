package slurmadapter

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/metricsreg"
)

type metrics struct {
	commands     *prometheus.CounterVec
	cmdDuration  *prometheus.HistogramVec
	decodeErrors *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_actuator_slurm_commands_total",
			Help: "Slurm commands the actuator ran, by command and result (ok, error).",
		}, []string{"command", "result"}),
		cmdDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "heliostat_actuator_slurm_command_duration_seconds",
			Help:    "Run time of the Slurm commands the actuator ran.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10),
		}, []string{"command"}),
		decodeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_actuator_slurm_decode_errors_total",
			Help: "Outputs of squeue --json, sinfo --json and scontrol show config, and answers of scontrol update, rejected, by command and kind (syntax, shape, reported, record); also, under squeue and record, each pending job read whose GPU request, bound nodes or array tasks could not be read (the job is kept, marked unreadable).",
		}, []string{"command", "kind"}),
	}
	if reg != nil {
		if err := metricsreg.Register(reg, m.commands, m.cmdDuration, m.decodeErrors); err != nil {
			return nil, fmt.Errorf("slurmadapter: register metrics: %w", err)
		}
	}
	return m, nil
}
