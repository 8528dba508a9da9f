package slurm

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/metricsreg"
	"github.com/heliostat-dev/heliostat/schemas"
)

// Values of the input label of heliostat_slurm_parse_errors_total.
const (
	inputSqueue  = "squeue"  // a job record of squeue --json
	inputJobComp = "jobcomp" // a line of the job-completion log
	inputSacct   = "sacct"   // a job record of sacct --json
	inputConfig  = "config"  // the output of scontrol show config
	// inputDbdConfig: slurmdbd's part of the output of sacctmgr show
	// configuration (read with Accounting).
	inputDbdConfig = "dbd_config"
)

// metrics are the source's self-metrics.
type metrics struct {
	polls         prometheus.Counter
	pollErrors    prometheus.Counter
	pollDuration  prometheus.Histogram
	events        *prometheus.CounterVec
	parseErrors   *prometheus.CounterVec
	unreadable    *prometheus.CounterVec
	cmdErrors     *prometheus.CounterVec
	lost          prometheus.Counter
	noGPUIndex    prometheus.Counter
	tracked       prometheus.Gauge
	jobCompBytes  prometheus.Gauge
	acctTo        prometheus.Gauge
	acctRecovered prometheus.Counter
	idReused      *prometheus.CounterVec
	altered       *prometheus.CounterVec
	requeued      prometheus.Counter
	truncated     *prometheus.CounterVec
	jobsHidden    prometheus.Gauge
}

// Values of the change label of heliostat_slurm_strings_altered_total.
const (
	alteredTruncated   = "truncated"    // longer than schemas.MaxStringLen: cut
	alteredInvalidUTF8 = "invalid_utf8" // not UTF-8: bad bytes replaced with U+FFFD
)

// Values of the record label of heliostat_slurm_job_id_reused_total.
const (
	// reuseSuperseded: Slurm showed a newer job under a tracked job's id
	// (not the same job requeued: its restart count did not grow); the
	// tracked one, if not ended, was ended as lost.
	reuseSuperseded = "superseded"
	// reuseOlderSkipped: the accounting showed an older job under a
	// tracked job's id; it was not published (see the Jobs section of
	// docs/OPERATIONS.md).
	reuseOlderSkipped = "older_skipped"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		polls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_slurm_polls_total",
			Help: "Polls of Slurm (squeue --json and the job-completion log) that ended, failed ones included; counted when each ends.",
		}),
		pollErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_slurm_poll_errors_total",
			Help: "Polls that failed (squeue not answering, its output unusable, a publish failing); the next poll retries.",
		}),
		pollDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "heliostat_slurm_poll_duration_seconds",
			Help:    "Time one poll took, publishing included.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_slurm_events_total",
			Help: "Job events published, by type (SUBMIT, START, END, UPDATE).",
		}, []string{"type"}),
		parseErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_slurm_parse_errors_total",
			Help: "Job records or log lines that could not be parsed and were skipped, by input (squeue, jobcomp, sacct; config: the output of scontrol show config read at start, which the PrivateData check then skips; dbd_config: slurmdbd's part of sacctmgr show configuration, read for the same check with accounting).",
		}, []string{"input"}),
		unreadable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_slurm_fields_unreadable_total",
			Help: "Job records published with a field the collector could not read, by input and field: gpus (a GPU request or count in a form not known; published as Slurm's allocation where it gives one, else unknown), mem (the memory request; unknown), gpu_indices (gres_detail; the job's GPUs are not attributed by index); counted at every poll that reads the record.",
		}, []string{"input", "field"}),
		cmdErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_slurm_command_errors_total",
			Help: "Slurm commands that failed, by command; a failed scontrol leaves a job's command hash empty. A scontrol that exited 0 but printed no batch script (refused to the source's user, job gone) counts as failed, as does a sacctmgr show configuration that printed nothing from slurmdbd (not answering).",
		}, []string{"command"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_slurm_jobs_lost_total",
			Help: "Jobs that vanished from squeue without an end in squeue, the job-completion log or the accounting; each was ended as UNKNOWN at the last listing that showed it.",
		}),
		requeued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_slurm_jobs_requeued_total",
			Help: "Runs of jobs that Slurm requeued (preemption with PreemptMode=REQUEUE, a node failure, scontrol requeue): each ended at the requeue, as PREEMPTED or NODE_FAIL where Slurm's records say so, else CANCELLED, and the job went on as a new run under the same id. Neither lost nor an id reuse.",
		}),
		truncated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_slurm_array_task_lists_truncated_total",
			Help: "Records of pending job arrays whose task list Slurm cut short (ending in \"...\": SLURM_BITSTR_LEN not honoured), by input (squeue, sacct); counted at every read. The tasks listed in full were used; the others are not published until a full list or their own record shows them, and are not ended as lost meanwhile.",
		}, []string{"input"}),
		jobsHidden: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_slurm_jobs_hidden",
			Help: "1 while slurm.conf's PrivateData=jobs hides other users' jobs from the source's user (neither root, SlurmUser nor a Slurm operator), so that their pending and running jobs are not recorded, or, with accounting, slurmdbd.conf's hides them from its sacct (neither root, slurmdbd's SlurmUser nor a Slurm operator), so that those that end while the source is down are ended as lost; 0 otherwise. Checked at start, and again every 10 minutes until a check finds them visible.",
		}),
		noGPUIndex: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_slurm_allocations_unknown_total",
			Help: "Started jobs with GPUs whose GPU indices Slurm did not show (started and ended between polls); no allocation intervals were published for them.",
		}),
		tracked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_slurm_tracked_jobs",
			Help: "Jobs in the source's state: not ended yet, or ended recently.",
		}),
		jobCompBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_slurm_jobcomp_offset_bytes",
			Help: "Bytes of the job-completion log handled so far.",
		}),
		acctTo: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_slurm_accounting_read_until_timestamp_seconds",
			Help: "End of the last window of job end times read from Slurm's accounting (--slurm.accounting); behind now while it catches up or while sacct fails.",
		}),
		acctRecovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_slurm_accounting_recovered_total",
			Help: "Jobs whose end (and start, or whole record) only the accounting showed: they ended while the source could not see them in squeue or the job-completion log.",
		}),
		idReused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_slurm_job_id_reused_total",
			Help: "Jobs seen under the id of another job with a different submit time and no higher restart count (slurmctld restarted with an empty state, or ids wrapped; a requeued job is not counted), by record: superseded (the tracked job gave way to a newer one) or older_skipped (an older job in the accounting, not published).",
		}, []string{"record"}),
		altered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_slurm_strings_altered_total",
			Help: "Strings Slurm gave that the wire format cannot carry as they are, in published job events, by field and change: truncated (longer than 1,024 bytes, cut) or invalid_utf8 (bad bytes replaced with U+FFFD). Counted per published message.",
		}, []string{"field", "change"}),
	}
	for _, t := range []schemas.JobEventType{schemas.JobSubmit, schemas.JobUpdate, schemas.JobStart, schemas.JobEnd} {
		m.events.WithLabelValues(t.String())
	}
	for _, in := range []string{inputSqueue, inputJobComp, inputSacct, inputConfig, inputDbdConfig} {
		m.parseErrors.WithLabelValues(in)
	}
	for _, f := range []string{fieldGPUs, fieldMem, fieldGPUIndices} {
		m.unreadable.WithLabelValues(inputSqueue, f)
	}
	for _, r := range []string{reuseSuperseded, reuseOlderSkipped} {
		m.idReused.WithLabelValues(r)
	}
	for _, in := range []string{inputSqueue, inputSacct} {
		m.truncated.WithLabelValues(in)
	}
	if err := metricsreg.Register(reg, m.polls, m.pollErrors, m.pollDuration, m.events, m.parseErrors, m.unreadable, m.cmdErrors, m.lost, m.noGPUIndex, m.tracked, m.jobCompBytes,
		m.acctTo, m.acctRecovered, m.idReused, m.altered, m.requeued, m.truncated, m.jobsHidden); err != nil {
		return nil, err
	}
	return m, nil
}
