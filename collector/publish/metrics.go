package publish

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/collector/spool"
	"github.com/heliostat-dev/heliostat/internal/metricsreg"
)

// Values of the outcome label of heliostat_publisher_messages_total.
const (
	outcomeSent     = "sent"     // written straight to the brokers
	outcomeSpooled  = "spooled"  // appended to the spool
	outcomeReplayed = "replayed" // written to the brokers from the spool
	outcomeDropped  = "dropped"  // lost: spool full or rejected by the brokers
)

type metrics struct {
	messages      *prometheus.CounterVec
	writeErrors   prometheus.Counter
	rotations     prometheus.Counter
	spoolBytes    prometheus.GaugeFunc
	spoolMessages prometheus.GaugeFunc
	spoolCorrupt  prometheus.CounterFunc
	spoolCut      prometheus.CounterFunc
	spoolLost     prometheus.CounterFunc
	spoolErrors   *prometheus.CounterVec
}

func newMetrics(sp *spool.Spool) *metrics {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_publisher_messages_total",
			Help: "Messages handled by the Kafka publisher, by topic and outcome (sent, spooled, replayed, dropped).",
		}, []string{"topic", "outcome"}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_publisher_write_errors_total",
			Help: "Failed writes to the Kafka brokers, direct or replay.",
		}),
		rotations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_publisher_producer_rotations_total",
			Help: "New producer ids drawn because the message keys numbered under one reached the bound.",
		}),
		spoolBytes: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "heliostat_publisher_spool_bytes",
			Help: "Size of the messages waiting in the on-disk spool.",
		}, func() float64 { return float64(sp.Bytes()) }),
		spoolMessages: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "heliostat_publisher_spool_messages",
			Help: "Number of messages waiting in the on-disk spool.",
		}, func() float64 { return float64(sp.Len()) }),
		spoolCorrupt: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "heliostat_publisher_spool_corrupt_records_total",
			Help: "Records of the on-disk spool found corrupt (bad checksum) and skipped: messages lost on this disk.",
		}, func() float64 { return float64(sp.Skipped()) }),
		spoolCut: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "heliostat_publisher_spool_discarded_bytes_total",
			Help: "Bytes of torn or unreadable spool segment tails cut off when the spool was opened or skipped by the replay: a record torn by a crash, the rest of a damaged segment, or a segment file deleted.",
		}, func() float64 { return float64(sp.DiscardedBytes()) }),
		spoolLost: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "heliostat_publisher_spool_lost_messages_total",
			Help: "Spooled messages the replay skipped because the rest of their segment could not be read (damaged framing, file cut short or deleted): messages lost on this disk.",
		}, func() float64 { return float64(sp.LostRecords()) }),
		spoolErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "heliostat_publisher_spool_errors_total",
			Help: "Replays failed by the spool, by operation (read: taking the next messages; commit: recording them as replayed); each pauses the replay until a retry, with backoff, succeeds.",
		}, []string{"op"}),
	}
	for _, op := range []string{opRead, opCommit} {
		m.spoolErrors.WithLabelValues(op)
	}
	return m
}

// register registers all metrics on reg, or none of them.
func (m *metrics) register(reg prometheus.Registerer) error {
	return metricsreg.Register(reg, m.messages, m.writeErrors, m.rotations, m.spoolBytes, m.spoolMessages, m.spoolCorrupt, m.spoolCut,
		m.spoolLost, m.spoolErrors)
}
