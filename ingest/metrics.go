package ingest

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/heliostat-dev/heliostat/internal/metricsreg"
)

type metrics struct {
	rows          *prometheus.CounterVec   // table
	messages      *prometheus.CounterVec   // topic, outcome
	errors        *prometheus.CounterVec   // kind
	batchSeconds  *prometheus.HistogramVec // table
	lag           *prometheus.GaugeVec     // topic, partition
	lagAge        *prometheus.GaugeVec     // topic, partition
	flushRows     prometheus.Histogram
	assigned      prometheus.Gauge
	clickhouseUp  prometheus.Gauge
	retentionDrop *prometheus.CounterVec // table
	seqGaps       *prometheus.CounterVec // topic
	seqMarks      prometheus.Gauge
	seqForgotten  prometheus.Counter
	ledgerRepairs *prometheus.CounterVec // table, action
	unfit         *prometheus.CounterVec // column
	deadCut       prometheus.Counter
	skipped       *prometheus.CounterVec // topic
	rewound       prometheus.Gauge
	retention     *prometheus.GaugeVec // topic
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_ingest_rows_total", Help: "Rows inserted into ClickHouse, by table.",
		}, []string{"table"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_ingest_messages_total",
			Help: "Kafka messages handled, by topic and outcome (inserted; duplicate: already in ClickHouse, or already dead-lettered; resent: a copy a producer sent again, dropped; deadletter), counted once their batch is stored: a batch dropped (rebalance, failed shutdown flush) is counted by the replica that reads it again.",
		}, []string{"topic", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_ingest_errors_total",
			Help: "Errors by kind: decode_<reason>, decode (a dead-lettered message without a schemas reason), insert, intents, heads, commit, deadletter, fetch, group, ledger, retention, inventory, sequences, sequence_header.",
		}, []string{"kind"}),
		batchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "heliostat_ingest_batch_duration_seconds", Help: "Time to insert one block into ClickHouse, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"table"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "heliostat_ingest_consumer_lag_messages", Help: "Messages between the last one read and the partition's log end, for the partitions this replica reads now (refreshed from the log end also while reading waits).",
		}, []string{"topic", "partition"}),
		lagAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "heliostat_ingest_consumer_lag_seconds",
			Help: "How old the oldest message not read yet can be, for the partitions this replica reads now: the time since the later of the last message read (its broker timestamp) and the last time a check of the log end (every --ingest.log-check) found the reader there. An upper bound; compare with heliostat_ingest_topic_retention_seconds. Absent until either is known.",
		}, []string{"topic", "partition"}),
		flushRows: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "heliostat_ingest_flush_rows", Help: "Rows per flush.",
			Buckets: prometheus.ExponentialBuckets(10, 4, 9),
		}),
		assigned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_ingest_assigned_partitions", Help: "Partitions this replica owns in the current generation.",
		}),
		clickhouseUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_ingest_clickhouse_up", Help: "1 when the last ClickHouse operation succeeded, 0 while inserts fail.",
		}),
		retentionDrop: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_ingest_retention_dropped_partitions_total", Help: "Partitions dropped by retention, by table.",
		}, []string{"table"}),
		seqGaps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_ingest_sequence_gaps_total",
			Help: "Numbers missing from producers' numbered messages, by topic: messages lost before Kafka (a full spool, a rejected write). Counted once the batch of the message after the gap is stored.",
		}, []string{"topic"}),
		seqMarks: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_ingest_sequence_marks",
			Help: "Sequence marks held for the assigned partitions: one per producer and message key.",
		}),
		seqForgotten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_ingest_sequence_producers_forgotten_total",
			Help: "Producers whose sequence marks were deleted after --dedupe.window without a message in a partition, counted per partition.",
		}),
		ledgerRepairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_ingest_ledger_repairs_total",
			Help: "Repairs after a failed insert whose rows landed all the same (the server died between the parts, or a view failed), by table and action: ledger_written, the missing ingest_ledger rows written instead of inserting again; rollup_written, gpu_samples rows whose gpu_samples_1m rollup was missing (its view failed), the rollup written as the view would have instead of inserting them again; sent_again, inserted again because the gpu_samples_1m rollup lacks them and other rows of their GPUs and minutes lack theirs too (so the rollup could not be written for these alone), or because they lie at offsets of a reset partition whose old rows the table keeps and their first message is gone from Kafka; rollup_short, gpu_samples rows left without their rollup (an error is logged): sent again and still short, or with their ledger rows while other rows of their GPUs and minutes lack theirs too; jobs_written, job events that reached job_events but not jobs, whose jobs rows were written as the view would have (with or without their ledger rows); job_runs_written, the same for job_runs.",
		}, []string{"table", "action"}),
		rewound: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "heliostat_ingest_partitions_rewound",
			Help: "Assigned partitions not read because their log ends below what ingest already read, or holds another message where it read one (topic deleted and created again, or messages lost by the broker); heliostat ingest reset-partition resumes one.",
		}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_ingest_messages_expired_total",
			Help: "Kafka offsets skipped because the broker had deleted their messages (topic retention) before ingest read them, by topic: messages lost.",
		}, []string{"topic"}),
		deadCut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_ingest_deadletters_truncated_total",
			Help: "Dead letters whose value was cut to fit the size the writer and the broker accept (header heliostat-deadletter-truncated holds the original length).",
		}),
		retention: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "heliostat_ingest_topic_retention_seconds",
			Help: "How long Kafka keeps the messages of each topic ingest reads (its retention.ms, read at start; +Inf: forever): ingest stopped or behind for longer loses messages (heliostat_ingest_messages_expired_total). Absent for a topic whose broker reports no retention.ms.",
		}, []string{"topic"}),
		unfit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_ingest_values_unknown_total",
			Help: "Known values too large for their column, stored as unknown (NULL, or -1 for gpu_index), by column: exit_code and gpu_index beyond Int32, time_limit_s, node_count, cpus and gpus beyond UInt32; GPU sample ratios (sm_active, sm_occupancy, tensor_active, dram_active) that are NaN, infinite, negative or above 1 (a percentage sent as is). A producer sending them is at fault. Counted once their batch is stored.",
		}, []string{"column"}),
	}
	if err := metricsreg.Register(reg, m.rows, m.messages, m.errors, m.batchSeconds, m.lag, m.lagAge, m.flushRows, m.assigned, m.clickhouseUp, m.retentionDrop, m.seqGaps,
		m.seqMarks, m.seqForgotten, m.ledgerRepairs, m.unfit, m.deadCut, m.skipped, m.rewound, m.retention); err != nil {
		return nil, fmt.Errorf("ingest: register metrics: %w", err)
	}
	return m, nil
}

// counterValue reads a counter's current value.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// counts is what a batch's messages add to the counters, which flush adds
// once the batch is stored: a message is counted by the replica that stores
// it, not by each one that reads it. A batch dropped (its generation ended
// by a rebalance, a shutdown whose flush ran out of time, ClickHouse down
// until then) counts nothing; the next owner of its partitions reads its
// messages again and counts them. Dead letters are counted the same way
// (writeDeadLetters).
type counts struct {
	topics         map[string]*topicCounts // kept across resets
	sequenceHeader int                     // messages with malformed sequence headers
	unfit          map[string]int          // values stored as unknown, by column
}

// topicCounts is one topic's messages by outcome, and the numbers missing
// from its producers' streams.
type topicCounts struct {
	inserted, duplicate, resent int
	gaps                        uint64
}

func newCounts() counts {
	return counts{topics: map[string]*topicCounts{}, unfit: map[string]int{}}
}

// topic returns topic's share of c.
func (c *counts) topic(topic string) *topicCounts {
	t := c.topics[topic]
	if t == nil {
		t = &topicCounts{}
		c.topics[topic] = t
	}
	return t
}

// addTo adds c to m's counters.
func (c *counts) addTo(m *metrics) {
	for topic, t := range c.topics {
		addNonZero(m.messages, float64(t.inserted), topic, "inserted")
		addNonZero(m.messages, float64(t.duplicate), topic, "duplicate")
		addNonZero(m.messages, float64(t.resent), topic, "resent")
		addNonZero(m.seqGaps, float64(t.gaps), topic)
	}
	addNonZero(m.errors, float64(c.sequenceHeader), "sequence_header")
	for column, n := range c.unfit {
		addNonZero(m.unfit, float64(n), column)
	}
}

func (c *counts) reset() {
	for _, t := range c.topics {
		*t = topicCounts{}
	}
	c.sequenceHeader = 0
	clear(c.unfit)
}

// addNonZero adds n, unless 0, to vec's series of labels.
func addNonZero(vec *prometheus.CounterVec, n float64, labels ...string) {
	if n > 0 {
		vec.WithLabelValues(labels...).Add(n)
	}
}
