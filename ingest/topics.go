package ingest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
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
// (replication factor 3 when the cluster has at least 3 brokers, else 1),
// over connections secured by sec (nil: plaintext).
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
	var cfgs []kafka.TopicConfig
	for _, t := range topics {
		cfgs = append(cfgs, kafka.TopicConfig{Topic: t, NumPartitions: spec.Partitions, ReplicationFactor: repl, ConfigEntries: entries})
	}
	if err := cc.CreateTopics(cfgs...); err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("ingest: create topics: %w", err)
	}
	if !spec.SetOnExisting || len(entries) == 0 {
		return nil
	}
	// Set on every topic: on one just created with them, a no-op.
	var res []kafka.IncrementalAlterConfigsRequestResource
	for _, t := range topics {
		r := kafka.IncrementalAlterConfigsRequestResource{ResourceType: kafka.ResourceTypeTopic, ResourceName: t}
		for _, e := range entries {
			r.Configs = append(r.Configs, kafka.IncrementalAlterConfigsRequestConfig{Name: e.ConfigName, Value: e.ConfigValue, ConfigOperation: kafka.ConfigOperationSet})
		}
		res = append(res, r)
	}
	ctrlAddr := net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port))
	tr := sec.Transport("heliostat-topics")
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(ctrlAddr), Timeout: topicOpTimeout, Transport: tr}
	resp, err := client.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Addr: kafka.TCP(ctrlAddr), Resources: res})
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
