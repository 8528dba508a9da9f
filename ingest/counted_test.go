package ingest_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// refuseRows refuses every INSERT into gpu_samples and job_events:
// ClickHouse failing a batch whatever rows it holds.
type refuseRows struct{ driver.Conn }

func (c refuseRows) PrepareBatch(ctx context.Context, q string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if strings.Contains(q, ".gpu_samples (") || strings.Contains(q, ".job_events (") {
		return nil, errors.New("test: clickhouse refuses")
	}
	return c.Conn.PrepareBatch(ctx, q, opts...)
}

// TestMessagesCountedOnceStored: replica A reads numbered messages (number
// 11 missing, a copy of number 5 sent again, one with a malformed number)
// and a job event whose GPU count no column holds, while ClickHouse refuses
// their rows. A's batch is dropped (a rebalance as B joins, or a shutdown
// flush that runs out of time) and B stores everything. What the messages
// are counted as is counted once over both replicas, by B; A, which stored
// nothing, counts nothing.
func TestMessagesCountedOnceStored(t *testing.T) {
	counters := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"heliostat_ingest_messages_total", []string{"topic", schemas.TopicGPUSamples, "outcome", "inserted"}, 21},
		{"heliostat_ingest_messages_total", []string{"topic", schemas.TopicGPUSamples, "outcome", "resent"}, 1},
		{"heliostat_ingest_messages_total", []string{"outcome", "duplicate"}, 0},
		{"heliostat_ingest_messages_total", []string{"topic", schemas.TopicJobEvents, "outcome", "inserted"}, 1},
		{"heliostat_ingest_sequence_gaps_total", nil, 1},
		{"heliostat_ingest_errors_total", []string{"kind", "sequence_header"}, 1},
		{"heliostat_ingest_values_unknown_total", []string{"column", "gpus"}, 3},
		{"heliostat_ingest_rows_total", nil, 21*4 + 3},
	}
	for _, tc := range []struct {
		name      string
		rebalance bool // A's batch is dropped as B joins; otherwise A stops first
	}{
		{"rebalance", true},
		{"shutdown", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, conn := schematest.Database(t)
			_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
			if err := ingest.EnsureTopics(context.Background(), []string{broker}, 1, schemas.DataTopics()...); err != nil {
				t.Fatal(err)
			}
			start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			var msgs []sampleMessage
			for i := range 20 {
				seq := i + 1
				if i >= 10 {
					seq++ // number 11 was lost before Kafka
				}
				msgs = append(msgs, sampleMessage{host: "h1", tick: i, producer: "p1", seq: strconv.Itoa(seq)})
			}
			msgs = append(msgs,
				sampleMessage{host: "h1", tick: 4, producer: "p1", seq: "5"},  // a copy
				sampleMessage{host: "h1", tick: 30, producer: "p1", seq: "x"}, // stored, not deduplicated
			)
			writeSampleMessages(t, broker, start, msgs)
			job := testJob("9", start)
			for i := range job {
				job[i].GPUs = 1 << 33
			}
			writeJobEvents(t, broker, "c1", job)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ctxA, cancelA := context.WithCancel(ctx)
			defer cancelA()
			regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
			doneA := startIngestConn(t, ctxA, broker, ch, regA, func(c *ingest.Config) { ingest.ShortenShutdown(c, time.Second) },
				func(c driver.Conn) driver.Conn { return refuseRows{c} })
			waitMetric(t, regA, "heliostat_ingest_errors_total", 1, "kind", "insert")
			waitReadAll(t, regA, schemas.TopicGPUSamples, schemas.TopicJobEvents)
			var doneB chan error
			if tc.rebalance {
				// Once B is in the group, the generation A read in
				// is over. Either may get the partitions (a topic's
				// one partition goes to the first member); A, refused
				// again, then leaves them to B.
				var inB *ingest.Ingester
				inB, doneB = startIngester(t, ctx, broker, ch, regB, nil, nil)
				deadline := time.Now().Add(30 * time.Second)
				for inB.Ready() != nil {
					if time.Now().After(deadline) {
						t.Fatalf("B not in the group within 30s: %v", inB.Ready())
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			cancelA()
			<-doneA
			for _, c := range counters {
				if got := metricSum(t, regA, c.name, c.labels...); got != 0 {
					t.Errorf("A, having stored nothing: %s%q = %v; want 0", c.name, c.labels, got)
				}
			}
			if !tc.rebalance {
				doneB = startIngest(t, ctx, broker, ch, regB)
			}
			waitGauge(t, regB, "heliostat_ingest_assigned_partitions", 4)
			waitCount(t, conn, ch.Database+".gpu_samples", 21*4, 60*time.Second)
			waitCount(t, conn, ch.Database+".job_events", 3, 60*time.Second)
			sum := func(name string, labels []string) float64 {
				return metricSum(t, regA, name, labels...) + metricSum(t, regB, name, labels...)
			}
			deadline := time.Now().Add(30 * time.Second)
			for _, c := range counters {
				for sum(c.name, c.labels) < c.want && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
			}
			cancel()
			<-doneB
			for _, c := range counters {
				if got := sum(c.name, c.labels); got != c.want {
					t.Errorf("A and B: %s%q = %v; want %v", c.name, c.labels, got, c.want)
				}
			}
		})
	}
}

// writeJobEvents writes one job event batch of cluster to the job events
// topic.
func writeJobEvents(t *testing.T, broker, cluster string, evs []schemas.JobEvent) {
	t.Helper()
	v, err := schemas.AppendJobEventBatch(nil, &schemas.JobEventBatch{Cluster: cluster, Source: schemas.SourceSlurm, Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(broker), Topic: schemas.TopicJobEvents, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	if err := w.WriteMessages(context.Background(), kafka.Message{Key: schemas.JobKey(cluster, evs[0].JobID), Value: v}); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// waitReadAll polls until the replica of reg read its partitions of topics
// to their end: each has a lag series, at 0.
func waitReadAll(t *testing.T, reg *prometheus.Registry, topics ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lags := gather(t, reg, lagMetric)
		done := true
		for _, topic := range topics {
			found := false
			for k, v := range lags {
				if strings.Contains(k, topic) {
					found = true
					done = done && v == 0
				}
			}
			done = done && found
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not read %v to their end within 30s: lags %v", topics, lags)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
