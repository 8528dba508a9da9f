package ingest

import (
	"context"
	"errors"
	"fmt"
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
	req := &kafka.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: t, ConfigNames: []string{"cleanup.policy"}})
	}
	resp, err := client.DescribeConfigs(ctx, req)
	if err != nil {
		return fmt.Errorf("ingest: describe cleanup.policy of topics: %w", err)
	}
	var errs []error
	for _, r := range resp.Resources {
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("ingest: describe cleanup.policy of topic %s: %w", r.ResourceName, r.Error))
			continue
		}
		for _, c := range r.ConfigEntries {
			if c.ConfigName == "cleanup.policy" && slices.Contains(strings.Split(c.ConfigValue, ","), "compact") {
				errs = append(errs, fmt.Errorf("topic %s has cleanup.policy=%s: %w", r.ResourceName, c.ConfigValue, ErrCompactedTopic))
			}
		}
	}
	return errors.Join(errs...)
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
