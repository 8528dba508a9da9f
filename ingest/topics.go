package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/internal/kafkaconn"
)

// EnsureTopics creates the topics that do not exist yet, with the given
// partitions (replication factor 3 when the cluster has at least 3 brokers,
// else 1),
// over a plaintext connection. Existing topics are left as they are.
func EnsureTopics(ctx context.Context, brokers []string, partitions int, topics ...string) error {
	return EnsureTopicsVia(ctx, nil, brokers, partitions, topics...)
}

// EnsureTopicsVia is EnsureTopics over connections secured by sec (nil:
// plaintext).
func EnsureTopicsVia(ctx context.Context, sec *kafkaconn.Security, brokers []string, partitions int, topics ...string) error {
	return EnsureTopicsWith(ctx, sec, brokers, TopicSpec{Partitions: partitions}, topics...)
}

// TopicSpec says how EnsureTopicsWith creates topics.
type TopicSpec struct {
	// Partitions of each topic created. Required.
	Partitions int
	// Configs are the topic configs of each topic created ("retention.ms":
	// "604800000"). Default none: the brokers' defaults.
	Configs map[string]string
	// SetOnExisting also sets Configs on the topics that exist. Default
	// false: existing topics are left as they are, as a deployment's
	// operators set them. heliostat up sets it on its own broker, so that
	// a data directory from a release that created its topics without a
	// retention gets one.
	SetOnExisting bool
}

// EnsureTopicsWith creates the topics that do not exist yet as spec says
// (replication factor 3 when the cluster has at least 3 brokers, with
// min.insync.replicas 2 unless spec.Configs sets it; else 1),
// over connections secured by sec (nil: plaintext). Then it checks every
// topic's cleanup.policy: one that compacts the topic fails it with an
// error wrapping ErrCompactedTopic, naming the topic.
func EnsureTopicsWith(ctx context.Context, sec *kafkaconn.Security, brokers []string, spec TopicSpec, topics ...string) error {
	if len(brokers) == 0 {
		return errors.New("ingest: no brokers")
	}
	d := sec.Dialer(5 * time.Second)
	conn, err := d.DialContext(ctx, "tcp", brokers[0])
	if err != nil {
		return fmt.Errorf("ingest: connect to %s: %w", brokers[0], err)
	}
	defer conn.Close()
	// A listener that is not a Kafka broker (a wrong port) accepts the
	// connection and never answers: bound every exchange, and end them
	// when ctx ends.
	defer bound(ctx, conn)()
	ctrl, err := conn.Controller()
	if err != nil {
		return fmt.Errorf("ingest: find controller at %s (is it a Kafka broker?): %w", brokers[0], err)
	}
	bs, err := conn.Brokers()
	if err != nil {
		return fmt.Errorf("ingest: list brokers: %w", err)
	}
	repl := 1
	if len(bs) >= 3 {
		repl = 3
	}
	cc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		return fmt.Errorf("ingest: connect to controller: %w", err)
	}
	defer cc.Close()
	defer bound(ctx, cc)()
	// In a stable order, so that the requests are the same every time.
	names := make([]string, 0, len(spec.Configs))
	for k := range spec.Configs {
		names = append(names, k)
	}
	slices.Sort(names)
	var entries []kafka.ConfigEntry
	for _, k := range names {
		entries = append(entries, kafka.ConfigEntry{ConfigName: k, ConfigValue: spec.Configs[k]})
	}
	create := entries
	if _, ok := spec.Configs["min.insync.replicas"]; !ok && repl == 3 {
		// With Kafka's default of 1, a write acknowledged by all the
		// in-sync replicas (the producers' acks=all) may be on the
		// leader alone, and lost with its disk: 2 of 3 keeps every
		// acknowledged message on two brokers.
		create = append(slices.Clip(entries), kafka.ConfigEntry{ConfigName: "min.insync.replicas", ConfigValue: "2"})
	}
	var cfgs []kafka.TopicConfig
	for _, t := range topics {
		cfgs = append(cfgs, kafka.TopicConfig{Topic: t, NumPartitions: spec.Partitions, ReplicationFactor: repl, ConfigEntries: create})
	}
	if err := cc.CreateTopics(cfgs...); err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("ingest: create topics: %w", err)
	}
	ctrlAddr := net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port))
	tr := sec.Transport("heliostat-topics")
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(ctrlAddr), Timeout: topicOpTimeout, Transport: tr}
	if spec.SetOnExisting && len(entries) > 0 {
		if err := setConfigs(ctx, client, names, entries, topics); err != nil {
			return err
		}
	}
	return checkCleanup(ctx, client, topics)
}

// ErrCompactedTopic is EnsureTopicsWith's error for a topic whose
// cleanup.policy (its own, or the brokers' log.cleanup.policy) compacts it:
// Kafka would keep only the latest message of each key (a host's samples, a
// job's events), deleting the others before ingest reads them, unseen.
var ErrCompactedTopic = errors.New("ingest: topic is compacted (cleanup.policy compact), which deletes all but the latest message of each key: set cleanup.policy=delete")

// checkCleanup returns an error wrapping ErrCompactedTopic for each of
// topics whose effective cleanup.policy includes compact.
func checkCleanup(ctx context.Context, client *kafka.Client, topics []string) error {
	policies, errs := describeTopics(ctx, client, "cleanup.policy", topics)
	for _, t := range topics {
		if p, ok := policies[t]; ok && slices.Contains(strings.Split(p, ","), "compact") {
			errs = append(errs, fmt.Errorf("topic %s has cleanup.policy=%s: %w", t, p, ErrCompactedTopic))
		}
	}
	return errors.Join(errs...)
}

// describeTopics returns the value of config name of each of topics (a
// topic whose broker reports none is left out), and an error for each
// topic that could not be described, or one for all when the request
// failed.
func describeTopics(ctx context.Context, client *kafka.Client, name string, topics []string) (map[string]string, []error) {
	req := &kafka.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: t, ConfigNames: []string{name}})
	}
	resp, err := client.DescribeConfigs(ctx, req)
	if err != nil {
		return nil, []error{fmt.Errorf("ingest: describe %s of topics: %w", name, err)}
	}
	out := map[string]string{}
	var errs []error
	for _, r := range resp.Resources {
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("ingest: describe %s of topic %s: %w", name, r.ResourceName, r.Error))
			continue
		}
		for _, c := range r.ConfigEntries {
			if c.ConfigName == name {
				out[r.ResourceName] = c.ConfigValue
			}
		}
	}
	return out, errs
}

// setConfigs sets entries (named names) on every one of topics.
func setConfigs(ctx context.Context, client *kafka.Client, names []string, entries []kafka.ConfigEntry, topics []string) error {
	// Set on every topic: on one just created with them, a no-op.
	var res []kafka.IncrementalAlterConfigsRequestResource
	for _, t := range topics {
		r := kafka.IncrementalAlterConfigsRequestResource{ResourceType: kafka.ResourceTypeTopic, ResourceName: t}
		for _, e := range entries {
			r.Configs = append(r.Configs, kafka.IncrementalAlterConfigsRequestConfig{Name: e.ConfigName, Value: e.ConfigValue, ConfigOperation: kafka.ConfigOperationSet})
		}
		res = append(res, r)
	}
	resp, err := client.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Resources: res})
	if err != nil {
		return fmt.Errorf("ingest: set configs %v of topics: %w", names, err)
	}
	var errs []error
	for _, r := range resp.Resources {
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("ingest: set configs %v of topic %s: %w", names, r.ResourceName, r.Error))
		}
	}
	return errors.Join(errs...)
}

// topicOpTimeout bounds the exchanges of EnsureTopics with one broker.
const topicOpTimeout = 30 * time.Second

// bound sets conn's deadline to topicOpTimeout from now or ctx's deadline,
// whichever is sooner, and closes conn if ctx ends first. Call the function
// it returns when done with conn.
func bound(ctx context.Context, conn *kafka.Conn) (stop func() bool) {
	dl := time.Now().Add(topicOpTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = conn.SetDeadline(dl)
	return context.AfterFunc(ctx, func() { _ = conn.Close() })
}

// TopicRetentions returns how long the brokers keep the messages of each of
// topics (their retention.ms; negative: forever), over connections secured
// by sec (nil: plaintext). A topic whose broker reports no retention.ms is
// left out; Kafka and kfake report the broker's default for a topic
// without one of its own. A value that is not a number is an error naming
// the topic.
func TopicRetentions(ctx context.Context, sec *kafkaconn.Security, brokers []string, topics ...string) (map[string]time.Duration, error) {
	if len(brokers) == 0 {
		return nil, errors.New("ingest: no brokers")
	}
	tr := sec.Transport("heliostat-topics")
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: topicOpTimeout, Transport: tr}
	values, errs := describeTopics(ctx, client, "retention.ms", topics)
	out := map[string]time.Duration{}
	for _, t := range topics {
		v, ok := values[t]
		if !ok {
			continue
		}
		d, err := parseRetention(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("ingest: topic %s: %w", t, err))
			continue
		}
		out[t] = d
	}
	return out, errors.Join(errs...)
}

// parseRetention reads a retention.ms value: milliseconds, or -1 (any
// negative) for forever, returned as -1.
func parseRetention(s string) (time.Duration, error) {
	ms, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("retention.ms %q is not a whole number of milliseconds", s)
	}
	if ms < 0 {
		return -1, nil
	}
	if ms > int64(math.MaxInt64/time.Millisecond) {
		return 0, fmt.Errorf("retention.ms %q is beyond %d", s, int64(math.MaxInt64/time.Millisecond))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// ShortRetention is the retention below which CheckRetention warns: an
// ingest outage of a day (a ClickHouse down over a night) must not lose
// messages.
const ShortRetention = 24 * time.Hour

// CheckRetention reads the retention of the topics the Ingester reads
// (TopicRetentions), logs it, warns for each topic that keeps messages for
// less than ShortRetention, and exports it as
// heliostat_ingest_topic_retention_seconds. A failure to read it is
// counted (heliostat_ingest_errors_total{kind="topic_config"}) and
// returned; ingest runs on without it.
func (in *Ingester) CheckRetention(ctx context.Context) error {
	topics := in.Topics()
	ret, err := TopicRetentions(ctx, in.sec, in.cfg.Brokers, topics...)
	if err != nil {
		in.m.errors.WithLabelValues("topic_config").Inc()
	}
	for _, t := range topics {
		d, ok := ret[t]
		switch {
		case !ok:
			in.logger.Info("topic retention unknown: the broker reported no retention.ms for the topic, or describing it failed (see the warning after this)", "topic", t)
		case d < 0:
			in.m.retention.WithLabelValues(t).Set(math.Inf(1))
			in.logger.Info("topic keeps messages forever", "topic", t)
		default:
			in.m.retention.WithLabelValues(t).Set(d.Seconds())
			if d < ShortRetention {
				in.logger.Warn("topic keeps messages for less than a day: an ingest outage longer than its retention loses them (heliostat_ingest_messages_expired_total); raise retention.ms",
					"topic", t, "retention", d.String())
			} else {
				in.logger.Info("topic retention", "topic", t, "retention", d.String())
			}
		}
	}
	return err
}
