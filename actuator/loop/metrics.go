package loop

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/internal/metricsreg"
)

// outcomeNotRecorded counts actions not sent because their audit row
// could not be written.
const outcomeNotRecorded = "not_recorded"

type metrics struct {
	actions     *prometheus.CounterVec
	predictions *prometheus.CounterVec
	duration    prometheus.Histogram
	lastSuccess prometheus.Gauge
	errors      prometheus.Counter
	pending     prometheus.Gauge
	excluded    *prometheus.GaugeVec
	poweredOff  *prometheus.GaugeVec

	forecastErrors prometheus.Counter
	demandStore    *prometheus.CounterVec
	demandRejected prometheus.Counter
	demandRebuilt  prometheus.Counter

	powerHistoryErrors prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_actuator_actions_total",
			Help: "Actions the actuator decided on, by kind (set_priority, power_down, power_up) and outcome (applied, skipped, failed, not_recorded).",
		}, []string{"kind", "outcome"}),
		predictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_actuator_predictions_total",
			Help: "Pending-job run-time predictions the loop used, by source (model, time_limit, unknown).",
		}, []string{"source"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "heliostat_actuator_loop_duration_seconds",
			Help:    "Duration of one pass of the control loop.",
			Buckets: prometheus.ExponentialBuckets(0.001, 3, 10),
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_actuator_loop_last_success_timestamp_seconds",
			Help: "Unix time of the end of the last pass that succeeded.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_actuator_loop_errors_total",
			Help: "Passes of the control loop that failed.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_actuator_pending_jobs",
			Help: "Pending jobs (not held) seen by the last pass.",
		}),
		excluded: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "heliostat_actuator_demand_excluded_jobs",
			Help: "Pending jobs the last pass left out of node demand because they cannot start however many nodes are powered (held, waiting for a dependency, over a partition's limits, bound for a down node, …), by the scheduler's reason (Slurm's state_reason); reason unreadable: jobs whose GPU request, bound nodes or array tasks the adapter could not read, which are not ranked and, unless held or unable to start yet, keep every node of their partitions from being powered down while they wait; always exported, 0 when there are none.",
		}, []string{"reason"}),
		poweredOff: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "heliostat_actuator_node_powered_off",
			Help: "1 for each node the scheduler reported powered down or powering down in the last pass (Slurm's POWERED_DOWN, POWERING_DOWN or POWER_DOWN, whoever powered it down: the actuator or Slurm's own power saving), 0 for the others (on, waking); one series per node of the cluster, by node (Slurm's node name). HeliostatComponentDown does not page for the collector of a node reported 1 in the last 10 minutes.",
		}, []string{"node"}),
		forecastErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_actuator_forecast_errors_total",
			Help: "Demand-model forecasts that failed, so that a power plan fell back to the watched peak.",
		}),
		demandStore: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_actuator_demand_store_errors_total",
			Help: "Failures keeping the demand history in ClickHouse, by op: load (the saved history could not be read; retried next pass), save (retried next pass), given_up (a step not saved before it left the 30 days kept), rebuild (the job records could not be read to rebuild the history from before the saved one; tried up to 3 passes), rebuild_kind_use (the job records could not be read to rebuild a partition's node kinds' recent use at its first pass; not tried again).",
		}, []string{"op"}),
		demandRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_actuator_demand_rejected_total",
			Help: "Saved demand steps read back and rejected (not a node count, no partition, or after the time of the read); the log says why.",
		}),
		demandRebuilt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_actuator_demand_rebuilt_steps_total",
			Help: "Demand steps rebuilt from the job records for the time before the saved demand history (so a new actuator forecasts without watching the cluster for a day first).",
		}),
		powerHistoryErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_actuator_power_history_errors_total",
			Help: "Failed reads, at start, of the last hour's power actions (and the last minute's priority changes) from the actions table, which the rate caps count across a restart; power-downs are held until a read succeeds (retried each pass).",
		}),
	}
	// Every kind and outcome starts at zero: increase() and rate() see no
	// increase in a series' first sample, so a first failure would not
	// fire HeliostatActuatorActionsFailing if its series appeared at 1.
	for _, k := range []adapter.Kind{adapter.SetPriority, adapter.PowerDown, adapter.PowerUp} {
		for _, o := range []string{string(adapter.Applied), string(adapter.Skipped), string(adapter.Failed), outcomeNotRecorded} {
			m.actions.WithLabelValues(string(k), o)
		}
	}
	// HeliostatActuatorJobsUnreadable reads this series: present, at 0,
	// while every pending job is read in full.
	m.excluded.WithLabelValues("unreadable")
	if reg != nil {
		if err := metricsreg.Register(reg, m.actions, m.predictions, m.duration, m.lastSuccess, m.errors, m.pending, m.excluded, m.poweredOff, m.forecastErrors, m.demandStore, m.demandRejected, m.demandRebuilt, m.powerHistoryErrors); err != nil {
			return nil, fmt.Errorf("loop: register metrics: %w", err)
		}
	}
	return m, nil
}

// setNodePower sets heliostat_actuator_node_powered_off to the nodes of one
// snapshot of the scheduler, dropping the series of nodes no longer in it.
// A waking node counts as on: its collector is expected back soon, and one
// that stays waking is a fault (HeliostatComponentDown grants a node's
// collector a bounded grace after it was last reported off instead). One
// series per node: thousands on the largest clusters, which Prometheus holds
// easily. A scrape between Reset and the last Set misses some nodes; the
// alert reads the gauge's max over 10 minutes, which one such scrape does not
// change.
func (m *metrics) setNodePower(nodes []adapter.Node) {
	m.poweredOff.Reset()
	for _, n := range nodes {
		off := 0.0
		if n.Power == adapter.PowerOff || n.Power == adapter.PowerGoingDown {
			off = 1
		}
		m.poweredOff.WithLabelValues(n.Name).Set(off)
	}
}
