package audit

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/metricsreg"
	"github.com/heliostat-dev/heliostat/schemas"
)

// Publisher sends one message to a Kafka topic: *publish.Publisher, which
// spools messages while the brokers are unreachable.
type Publisher interface {
	Publish(ctx context.Context, topic string, key, value []byte) error
}

// Published is a Log that also publishes each settled action, with its
// outcome, to schemas.TopicActions (an ActionBatch per cluster and Settle,
// keyed by cluster so that one cluster's actions stay in order) for
// consumers outside heliostat. The table stays the record: an action is
// published once its outcome is in the table, so one cut off between its
// plan and its outcome is in the table as planned and never published. A
// publish that fails (the spool is full, or the action cannot be encoded)
// is logged and counted, and does not fail the Settle. A batch over
// MaxActionMessageBytes goes out as several messages, in order.
type Published struct {
	*Log
	pub    Publisher
	logger *slog.Logger
	sent   prometheus.Counter
	failed prometheus.Counter
}

// NewPublished returns l publishing through pub. Metrics are registered on
// reg unless it is nil.
func NewPublished(l *Log, pub Publisher, logger *slog.Logger, reg prometheus.Registerer) (*Published, error) {
	if l == nil || pub == nil {
		return nil, fmt.Errorf("audit: publishing needs a log and a publisher")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Published{Log: l, pub: pub, logger: logger,
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_actuator_actions_published_total",
			Help: "Settled actions published to " + schemas.TopicActions + " (taken by the broker or its spool).",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "heliostat_actuator_actions_publish_failures_total",
			Help: "Settled actions not published to " + schemas.TopicActions + " (spool full, or not encodable); they are in the actions table all the same.",
		}),
	}
	if reg != nil {
		if err := metricsreg.Register(reg, p.sent, p.failed); err != nil {
			return nil, fmt.Errorf("audit: register metrics: %w", err)
		}
	}
	return p, nil
}

// Settle writes recs with their outcomes, then publishes them.
func (p *Published) Settle(ctx context.Context, recs []Record) error {
	if err := p.Log.Settle(ctx, recs); err != nil {
		return err
	}
	recorded := p.now().UnixMilli()
	var order []string
	byCluster := map[string][]schemas.Action{}
	for _, r := range recs {
		if _, ok := byCluster[r.Cluster]; !ok {
			order = append(order, r.Cluster)
		}
		byCluster[r.Cluster] = append(byCluster[r.Cluster], toWire(r, recorded))
	}
	for _, c := range order {
		p.publish(ctx, c, byCluster[c])
	}
	return nil
}

// MaxActionMessageBytes bounds one message on TopicActions, below Kafka's
// default limit of 1 MB a message. One action alone is at most about 50 KiB.
const MaxActionMessageBytes = 512 << 10

// publish sends acts as one message, or splits them in halves, in order,
// until each part holds at most schemas.MaxActionsPerMessage actions and
// MaxActionMessageBytes bytes (a first pass over a long queue, long
// reasons).
func (p *Published) publish(ctx context.Context, cluster string, acts []schemas.Action) {
	var (
		msg []byte
		err error
	)
	if len(acts) <= schemas.MaxActionsPerMessage {
		msg, err = schemas.AppendActionBatch(nil, &schemas.ActionBatch{Cluster: cluster, Actions: acts})
	}
	if len(acts) > schemas.MaxActionsPerMessage || (err == nil && len(msg) > MaxActionMessageBytes && len(acts) > 1) {
		half := len(acts) / 2
		p.publish(ctx, cluster, acts[:half])
		p.publish(ctx, cluster, acts[half:])
		return
	}
	if err == nil {
		err = p.pub.Publish(ctx, schemas.TopicActions, []byte(cluster), msg)
	}
	if err != nil {
		p.failed.Add(float64(len(acts)))
		p.logger.Warn("actions not published (they are in the actions table)", "topic", schemas.TopicActions,
			"cluster", cluster, "actions", len(acts), "first", acts[0].ID, "err", err)
		return
	}
	p.sent.Add(float64(len(acts)))
}

// toWire is r as the wire message carries it.
func toWire(r Record, recordedMillis int64) schemas.Action {
	return schemas.Action{ID: r.ID, Adapter: r.Adapter, Kind: r.Kind, Target: r.Target, Partition: r.Partition,
		Value: r.Value, Previous: r.Previous, Reason: r.Reason, Basis: r.Basis, ModelVersion: r.ModelVersion,
		DryRun: r.DryRun, Outcome: r.Outcome, Error: r.Error,
		DecidedAtMillis: r.DecidedAt.UnixMilli(), RecordedAtMillis: recordedMillis}
}
