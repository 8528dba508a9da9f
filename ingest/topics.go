package ingest

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	var cfgs []kafka.TopicConfig
	for _, t := range topics {
		cfgs = append(cfgs, kafka.TopicConfig{Topic: t, NumPartitions: partitions, ReplicationFactor: repl})
	}
	if err := cc.CreateTopics(cfgs...); err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("ingest: create topics: %w", err)
	}
	return nil
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
