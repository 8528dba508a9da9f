package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestIngestCreatesTopics: ingest creates, at start, the topics it reads,
// the dead-letter topic and the actuator's actions topic, with
// --kafka.partitions partitions, so that a Kafka whose brokers do not create
// topics on first use needs nothing made by hand before the parts start.
func TestIngestCreatesTopics(t *testing.T) {
	cfg, _ := schematest.Database(t)
	_, broker := schematest.Broker(t)
	child := startChild(t, append([]string{"ingest", "--kafka.brokers", broker, "--kafka.partitions", "3",
		"--web.listen-address", "127.0.0.1:0", "--log.level", childLogLevel()}, chFlags(cfg)...)...)
	defer func() {
		_ = child.Process.Signal(syscall.SIGTERM)
		_ = child.Wait()
	}()
	want := append(schemas.DataTopics(), schemas.TopicDeadletter, schemas.TopicActions)
	var got map[string]int
	for deadline := time.Now().Add(30 * time.Second); ; {
		got = topicPartitions(t, broker)
		missing := 0
		for _, topic := range want {
			if got[topic] == 0 {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, topic := range want {
		if got[topic] != 3 {
			t.Errorf("topic %s has %d partitions; want 3 (topics: %v)", topic, got[topic], got)
		}
	}
}

// topicPartitions lists the broker's topics and their partition counts
// (a metadata request for every topic creates none).
func topicPartitions(t *testing.T, broker string) map[string]int {
	t.Helper()
	conn, err := kafka.Dial("tcp", broker)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ps, err := conn.ReadPartitions()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range ps {
		if !strings.HasPrefix(p.Topic, "__") {
			out[p.Topic]++
		}
	}
	return out
}

// TestIngestRefusesCompactedTopic: ingest does not start on a topic that
// Kafka compacts (cleanup.policy compact, keeping only the latest message
// of each host or job), saying which topic and what to set. Before, it
// started and lost all but the latest message of each key unseen.
func TestIngestRefusesCompactedTopic(t *testing.T) {
	cfg, _ := schematest.Database(t)
	c, broker := schematest.Broker(t)
	if err := c.CreateTopic(schemas.TopicJobEvents, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := run(ctx, append([]string{"ingest", "--kafka.brokers", broker,
		"--web.listen-address", "127.0.0.1:0", "--log.level", childLogLevel()}, chFlags(cfg)...), noEnv, io.Discard, io.Discard)
	if !errors.Is(err, ingest.ErrCompactedTopic) || !strings.Contains(err.Error(), schemas.TopicJobEvents) || ctx.Err() != nil {
		t.Errorf("heliostat ingest on a compacted %s = %v; want ingest.ErrCompactedTopic naming it, at once", schemas.TopicJobEvents, err)
	}
}
