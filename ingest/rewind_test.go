package ingest_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// waitGauge polls until the metric name sums to want.
func waitGauge(t *testing.T, reg *prometheus.Registry, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for metricSum(t, reg, name) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v; want %v", name, metricSum(t, reg, name), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newAdmin returns an Ingester for ch's test group that is never run: the
// one `heliostat ingest reset-partition` makes.
func newAdmin(t *testing.T, broker string, ch chconn.Config, conn driver.Conn) *ingest.Ingester {
	t.Helper()
	cfg := ingest.Config{Brokers: []string{broker}, Group: "g-" + ch.Database, ClickHouse: ch}
	admin, err := ingest.New(cfg, conn, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return admin
}

// resetAndResume resets the samples topic's partitions from offset from,
// as the operator would once every replica is stopped, then runs an
// ingester until gpu_samples holds want rows, and checks that none is
// rewound and no sample is stored twice.
func resetAndResume(t *testing.T, broker string, ch chconn.Config, conn driver.Conn, partitions int, from int64, want uint64, adjust func(*ingest.Config)) {
	t.Helper()
	// The old rows stay, and ingest_resets says where, so that a failed
	// insert at their offsets is not taken for landed.
	var rows uint64
	if err := conn.QueryRow(t.Context(), "SELECT count() FROM "+ch.Database+".gpu_samples WHERE kafka_offset >= ?", uint64(from)).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	admin := newAdmin(t, broker, ch, conn)
	for p := range partitions {
		if err := admin.ResetPartition(t.Context(), schemas.TopicGPUSamples, p, from, true); err != nil {
			t.Fatal(err)
		}
	}
	var kept uint64
	if err := conn.QueryRow(t.Context(), "SELECT sum(rows) FROM "+ch.Database+".ingest_resets WHERE tbl = 'gpu_samples'").Scan(&kept); err != nil {
		t.Fatal(err)
	}
	if kept != rows || rows == 0 && from == 0 {
		t.Errorf("after the reset from %d: ingest_resets counts %d kept rows of gpu_samples; want all %d at or past that offset", from, kept, rows)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	reg := prometheus.NewRegistry()
	_, done := startIngester(t, ctx, broker, ch, reg, adjust, nil)
	waitCount(t, conn, ch.Database+".gpu_samples", want, 60*time.Second)
	if v := metricSum(t, reg, "heliostat_ingest_partitions_rewound"); v != 0 {
		t.Errorf("heliostat_ingest_partitions_rewound = %v after the reset; want 0", v)
	}
	cancel()
	<-done
	assertNoDuplicates(t, conn, ch.Database)
}

// TestTopicRecreated deletes the samples topic while ingest reads it and
// creates it again, as an operator resetting Kafka would: its offsets start
// at 0 again, where the ledger holds the old messages. Ingest must not take
// the new messages for stored ones: it stops reading both partitions and
// reports them, first while it runs (the reader waits at its old position)
// and again when it starts anew (the ledger lies past the log end). After
// reset-partition from 0, every new sample is stored once.
func TestTopicRecreated(t *testing.T) {
	ch, conn := schematest.Database(t)
	cluster, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(2, schemas.TopicGPUSamples, schemas.TopicGPUEvents, schemas.TopicDeadletter))
	samples := ch.Database + ".gpu_samples"
	start := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	old := produceSamples(t, broker, 200, 4, 2, 5, start)
	fast := func(c *ingest.Config) { c.LogCheck = 200 * time.Millisecond }

	ctx, cancel := context.WithCancel(t.Context())
	reg := prometheus.NewRegistry()
	in, done := startIngester(t, ctx, broker, ch, reg, fast, nil)
	waitCount(t, conn, samples, uint64(old), 60*time.Second)

	if err := cluster.DeleteTopic(schemas.TopicGPUSamples); err != nil {
		t.Fatal(err)
	}
	if err := cluster.CreateTopic(schemas.TopicGPUSamples, 2, nil); err != nil {
		t.Fatal(err)
	}
	fresh := produceSamples(t, broker, 40, 4, 2, 5, start.Add(time.Hour))
	waitGauge(t, reg, "heliostat_ingest_partitions_rewound", 2)
	if err := in.Ready(); err == nil || !strings.Contains(err.Error(), "rewound") {
		t.Errorf("Ready() = %v; want the rewound partitions", err)
	}
	if n := schematest.Count(t, conn, samples); n != uint64(old) {
		t.Fatalf("gpu_samples holds %d rows after the topic was recreated; want the %d old ones only", n, old)
	}
	cancel()
	<-done

	// A new replica finds the same from the ledger: the group's offsets
	// went with the topic, and the new partitions start at 0.
	ctx, cancel = context.WithCancel(t.Context())
	reg = prometheus.NewRegistry()
	_, done = startIngester(t, ctx, broker, ch, reg, fast, nil)
	waitGauge(t, reg, "heliostat_ingest_partitions_rewound", 2)
	cancel()
	<-done

	admin := newAdmin(t, broker, ch, conn)
	var ledger uint64
	if err := conn.QueryRow(t.Context(), "SELECT count() FROM "+ch.Database+".ingest_ledger WHERE tbl = 'gpu_samples'").Scan(&ledger); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		if err := admin.ResetPartition(t.Context(), schemas.TopicGPUSamples, p, 0, false); err != nil {
			t.Fatalf("dry run: %v", err)
		}
	}
	if n := schematest.Count(t, conn, ch.Database+".ingest_ledger WHERE tbl = 'gpu_samples'"); n != ledger {
		t.Fatalf("the dry run changed the ledger: %d rows, had %d", n, ledger)
	}
	resetAndResume(t, broker, ch, conn, 2, 0, uint64(old+fresh), fast)
}

// TestResetPartitionRefuses: a reset while a replica runs, past the log end
// or of a topic ingest does not read is refused, and changes nothing.
func TestResetPartitionRefuses(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(2, schemas.TopicGPUSamples, schemas.TopicGPUEvents, schemas.TopicDeadletter))
	n := produceSamples(t, broker, 20, 2, 2, 5, time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC))
	admin := newAdmin(t, broker, ch, conn)
	cases := []struct {
		name      string
		topic     string
		partition int
		from      int64
		want      string
	}{
		{"unknown topic", "heliostat.nope", 0, 0, "not one ingest reads"},
		{"negative partition", schemas.TopicGPUSamples, -1, 0, "negative"},
		{"past the end", schemas.TopicGPUSamples, 0, 1 << 40, "past the end"},
		{"no such partition", schemas.TopicGPUSamples, 7, 0, "gpu.samples/7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := admin.ResetPartition(t.Context(), c.topic, c.partition, c.from, true)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ResetPartition = %v; want an error with %q", err, c.want)
			}
		})
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, done := startIngester(t, ctx, broker, ch, prometheus.NewRegistry(), nil, nil)
	waitCount(t, conn, ch.Database+".gpu_samples", uint64(n), 60*time.Second)
	err := admin.ResetPartition(t.Context(), schemas.TopicGPUSamples, 0, 0, true)
	if err == nil || !strings.Contains(err.Error(), "stop every ingest replica") {
		t.Fatalf("ResetPartition with a replica running = %v; want a refusal", err)
	}
	cancel()
	<-done
	if l := schematest.Count(t, conn, ch.Database+".ingest_ledger WHERE tbl = 'gpu_samples'"); l == 0 {
		t.Fatal("the refused resets emptied the ledger")
	}
}

// TestTopicRecreatedWhileStopped recreates the topic while ingest is
// stopped and writes more messages than it held, so that neither the
// group's offset (gone with the topic) nor the ledger lies past the new log
// end. The last head ingest stored (ingest_heads) names a message that the
// new log does not hold at its offset: ingest must stop there too, not skip
// the new messages below its old position as stored. It holds whether the
// collector kept its producer id (numbers go on) or started anew, and for
// messages that carry no numbers at all.
func TestTopicRecreatedWhileStopped(t *testing.T) {
	for _, tc := range []struct {
		name     string
		producer string // of the messages written after the topic is recreated; "": none are numbered, before or after
		seq0     int    // their first number
	}{
		{"collector restarted", "p2", 1},
		{"collector went on", "p1", 21},
		{"messages not numbered", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, conn := schematest.Database(t)
			cluster, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond),
				kfake.SeedTopics(1, schemas.TopicGPUSamples, schemas.TopicGPUEvents, schemas.TopicDeadletter))
			samples := ch.Database + ".gpu_samples"
			start := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
			var before, after []sampleMessage
			for i := range 20 {
				m := sampleMessage{host: "h1", tick: i}
				if tc.producer != "" {
					m.producer, m.seq = "p1", strconv.Itoa(i+1)
				}
				before = append(before, m)
			}
			for i := range 30 {
				m := sampleMessage{host: "h1", tick: 100 + i}
				if tc.producer != "" {
					m.producer, m.seq = tc.producer, strconv.Itoa(tc.seq0+i)
				}
				after = append(after, m)
			}
			writeSampleMessages(t, broker, start, before)
			ctx, cancel := context.WithCancel(t.Context())
			_, done := startIngester(t, ctx, broker, ch, prometheus.NewRegistry(), nil, nil)
			waitCount(t, conn, samples, 80, 60*time.Second)
			cancel()
			<-done

			if err := cluster.DeleteTopic(schemas.TopicGPUSamples); err != nil {
				t.Fatal(err)
			}
			if err := cluster.CreateTopic(schemas.TopicGPUSamples, 1, nil); err != nil {
				t.Fatal(err)
			}
			writeSampleMessages(t, broker, start, after)
			ctx, cancel = context.WithCancel(t.Context())
			reg := prometheus.NewRegistry()
			in, done := startIngester(t, ctx, broker, ch, reg, nil, nil)
			waitGauge(t, reg, "heliostat_ingest_partitions_rewound", 1)
			if err := in.Ready(); err == nil || !strings.Contains(err.Error(), "offset 19 holds another message") {
				t.Errorf("Ready() = %v; want the replaced message named", err)
			}
			if n := schematest.Count(t, conn, samples); n != 80 {
				t.Fatalf("gpu_samples holds %d rows; want the 80 old ones only", n)
			}
			cancel()
			<-done

			if tc.producer != "" {
				resetAndResume(t, broker, ch, conn, 1, 0, 80+120, nil)
				return
			}
			// From an offset past the old log's end, the new log's first 25
			// messages are skipped. The last head, at offset 19, lies below
			// it and names an old message: the reset forgets every head, so
			// that ingest does not find the partition rewound again when it
			// resumes, or when it starts again later.
			resetAndResume(t, broker, ch, conn, 1, 25, 80+20, nil)
			var more []sampleMessage
			for i := range 5 {
				more = append(more, sampleMessage{host: "h1", tick: 200 + i})
			}
			writeSampleMessages(t, broker, start, more)
			ctx, cancel = context.WithCancel(t.Context())
			reg = prometheus.NewRegistry()
			_, done = startIngester(t, ctx, broker, ch, reg, nil, nil)
			waitCount(t, conn, samples, 80+20+20, 60*time.Second)
			if v := metricSum(t, reg, "heliostat_ingest_partitions_rewound"); v != 0 {
				t.Errorf("heliostat_ingest_partitions_rewound = %v when started again after the reset; want 0", v)
			}
			cancel()
			<-done
		})
	}
}
