package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

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
	child := startChild(t, "ingest", "--kafka.brokers", broker, "--kafka.partitions", "3",
		"--clickhouse.addr", cfg.Addr, "--clickhouse.database", cfg.Database,
		"--web.listen-address", "127.0.0.1:0", "--log.level", childLogLevel())
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
