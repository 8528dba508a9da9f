package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestEnsureTopicsNotKafka: a listener that accepts connections and never
// answers (a wrong port: ClickHouse's HTTP, an idle proxy) does not hang
// EnsureTopics past its context, and the error asks whether it is Kafka.
func TestEnsureTopicsNotKafka(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent, until the listener closes
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ingest.EnsureTopics(ctx, []string{ln.Addr().String()}, 1, "t") }()
	time.Sleep(300 * time.Millisecond)
	cancel() // Ctrl-C
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "is it a Kafka broker?") {
			t.Errorf("EnsureTopics against a silent listener = %v; want an error asking whether it is Kafka", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("EnsureTopics still blocked 10 s after its context ended")
	}
}

// topicConfig returns the value of config name set on topic itself (not a
// broker default), or "".
func topicConfig(t *testing.T, broker, topic, name string) string {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(broker), Timeout: 10 * time.Second}
	resp, err := client.DescribeConfigs(t.Context(), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
		{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{name}}}})
	if err != nil {
		t.Fatalf("describe configs of %s: %v", topic, err)
	}
	for _, r := range resp.Resources {
		for _, c := range r.ConfigEntries {
			// 1: DYNAMIC_TOPIC_CONFIG. kfake reports its defaults with
			// IsDefault false.
			if c.ConfigName == name && c.ConfigSource == 1 {
				return c.ConfigValue
			}
		}
	}
	return ""
}

// TestEnsureTopicsConfigs: EnsureTopicsWith creates topics with the configs
// it is given, and sets them on topics that exist only when told to;
// EnsureTopics sets none. Before, it could not give a topic a config, so
// heliostat up's topics had no retention and its broker kept every message.
func TestEnsureTopicsConfigs(t *testing.T) {
	week := map[string]string{"retention.ms": "604800000"}
	for _, tc := range []struct {
		name     string
		existing bool // the topic exists, without configs
		spec     *ingest.TopicSpec
		want     string
	}{
		{"EnsureTopics", false, nil, ""},
		{"created with configs", false, &ingest.TopicSpec{Partitions: 2, Configs: week}, "604800000"},
		{"existing left as it is", true, &ingest.TopicSpec{Partitions: 2, Configs: week}, ""},
		{"existing set", true, &ingest.TopicSpec{Partitions: 2, Configs: week, SetOnExisting: true}, "604800000"},
		{"created and set", false, &ingest.TopicSpec{Partitions: 2, Configs: week, SetOnExisting: true}, "604800000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, broker := schematest.Broker(t)
			const topic = "heliostat.test"
			if tc.existing {
				if err := ingest.EnsureTopics(t.Context(), []string{broker}, 2, topic); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			if tc.spec == nil {
				err = ingest.EnsureTopics(t.Context(), []string{broker}, 2, topic)
			} else {
				err = ingest.EnsureTopicsWith(t.Context(), nil, []string{broker}, *tc.spec, topic)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := topicConfig(t, broker, topic, "retention.ms"); got != tc.want {
				t.Errorf("retention.ms of %s = %q; want %q", topic, got, tc.want)
			}
		})
	}
}

// TestEnsureTopicsCompacted: a topic whose cleanup.policy compacts it, which
// keeps only the latest message of each key (a host's samples, a job's
// events) and so deletes messages before ingest reads them, fails
// EnsureTopics with ErrCompactedTopic naming the topic. Before, it was
// accepted: of three sample messages of one host, ingest stored one after a
// compaction, with no error and nothing counted.
func TestEnsureTopicsCompacted(t *testing.T) {
	for _, tc := range []struct {
		policy string // "": created by EnsureTopics
		bad    bool
	}{
		{"", false},
		{"delete", false},
		{"compact", true},
		{"compact,delete", true},
		{"delete,compact", true},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			c, broker := schematest.Broker(t)
			if tc.policy != "" {
				if err := c.CreateTopic(schemas.TopicGPUSamples, 1, map[string]string{"cleanup.policy": tc.policy}); err != nil {
					t.Fatal(err)
				}
			}
			err := ingest.EnsureTopics(t.Context(), []string{broker}, 1, schemas.TopicGPUSamples, schemas.TopicJobEvents)
			if got := errors.Is(err, ingest.ErrCompactedTopic); got != tc.bad || (err != nil && !tc.bad) {
				t.Fatalf("EnsureTopics(cleanup.policy %q) = %v; want ErrCompactedTopic: %v", tc.policy, err, tc.bad)
			}
			if tc.bad && (!strings.Contains(err.Error(), schemas.TopicGPUSamples) || strings.Contains(err.Error(), schemas.TopicJobEvents)) {
				t.Errorf("EnsureTopics(cleanup.policy %q) = %v; want it to name %s alone", tc.policy, err, schemas.TopicGPUSamples)
			}
		})
	}
}

// TestEnsureTopicsMinInsync: on a cluster of three brokers, topics are
// created with replication factor 3 and min.insync.replicas 2, so that a
// message the producers' acks=all got acknowledged is on two brokers.
// Before, they had the brokers' default (1): acks=all could be the leader
// alone, and its disk lost the message.
func TestEnsureTopicsMinInsync(t *testing.T) {
	_, broker := schematest.Broker(t, kfake.NumBrokers(3))
	if err := ingest.EnsureTopics(t.Context(), []string{broker}, 2, schemas.TopicGPUSamples); err != nil {
		t.Fatal(err)
	}
	if got := topicConfig(t, broker, schemas.TopicGPUSamples, "min.insync.replicas"); got != "2" {
		t.Errorf("min.insync.replicas of %s on 3 brokers = %q; want \"2\"", schemas.TopicGPUSamples, got)
	}
	_, one := schematest.Broker(t)
	if err := ingest.EnsureTopics(t.Context(), []string{one}, 2, schemas.TopicGPUSamples); err != nil {
		t.Fatal(err)
	}
	if got := topicConfig(t, one, schemas.TopicGPUSamples, "min.insync.replicas"); got != "" {
		t.Errorf("min.insync.replicas of %s on 1 broker = %q; want none set", schemas.TopicGPUSamples, got)
	}
}

// TestTopicRetentions: the retention.ms of each topic, negative for
// forever; a value that is not a number is an error naming its topic, the
// other topics still read.
func TestTopicRetentions(t *testing.T) {
	c, broker := schematest.Broker(t)
	for topic, ms := range map[string]string{schemas.TopicGPUSamples: "3600000", schemas.TopicJobEvents: "-1", "heliostat.test.bad": "soon"} {
		if err := c.CreateTopic(topic, 1, map[string]string{"retention.ms": ms}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ingest.TopicRetentions(t.Context(), nil, []string{broker}, schemas.TopicGPUSamples, schemas.TopicJobEvents, "heliostat.test.bad")
	if err == nil || !strings.Contains(err.Error(), "heliostat.test.bad") || !strings.Contains(err.Error(), `"soon"`) {
		t.Errorf("TopicRetentions error %v; want one naming heliostat.test.bad and its value", err)
	}
	if got[schemas.TopicGPUSamples] != time.Hour || got[schemas.TopicJobEvents] >= 0 || len(got) != 2 {
		t.Errorf("TopicRetentions = %v; want %s 1h, %s negative (forever), nothing else", got, schemas.TopicGPUSamples, schemas.TopicJobEvents)
	}
	if _, err := ingest.TopicRetentions(t.Context(), nil, nil, schemas.TopicGPUSamples); err == nil {
		t.Error("TopicRetentions without brokers: no error")
	}
}

// TestCheckRetention: ingest exports each topic's retention
// (heliostat_ingest_topic_retention_seconds, +Inf for forever) and warns,
// naming the topic, where it is under a day.
func TestCheckRetention(t *testing.T) {
	c, broker := schematest.Broker(t)
	for topic, ms := range map[string]string{schemas.TopicGPUSamples: "3600000", schemas.TopicJobEvents: "-1"} {
		if err := c.CreateTopic(topic, 1, map[string]string{"retention.ms": ms}); err != nil {
			t.Fatal(err)
		}
	}
	// The other topics ingest reads, at the broker's default retention.
	if err := ingest.EnsureTopics(t.Context(), []string{broker}, 1, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	cfg := ingest.Config{Brokers: []string{broker}, ClickHouse: chconn.Config{Addr: "127.0.0.1:9000", Database: "heliostat"}}
	in, err := ingest.New(cfg, nil, slog.New(slog.NewTextHandler(&logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.CheckRetention(t.Context()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "heliostat_ingest_topic_retention_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	if got[schemas.TopicGPUSamples] != 3600 || !math.IsInf(got[schemas.TopicJobEvents], 1) {
		t.Errorf("heliostat_ingest_topic_retention_seconds = %v; want %s 3600, %s +Inf", got, schemas.TopicGPUSamples, schemas.TopicJobEvents)
	}
	var warned []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "topic="+schemas.TopicGPUSamples) || !strings.Contains(warned[0], "retention=1h0m0s") {
		t.Errorf("warnings %q; want one, for %s at 1h", warned, schemas.TopicGPUSamples)
	}
}
