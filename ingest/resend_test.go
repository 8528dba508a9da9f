package ingest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/collector/publish"
	"github.com/heliostat-dev/heliostat/collector/synthetic"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// sampleMessage is one host's samples of one tick, numbered seq by producer
// (no sequence headers when producer is empty), sent at sent (zero: when
// written).
type sampleMessage struct {
	host     string
	tick     int
	producer string
	seq      string
	sent     time.Time
}

// sampleValue encodes host's 4 GPUs' samples of tick ticks after start.
func sampleValue(t *testing.T, host string, tick int, start time.Time) []byte {
	t.Helper()
	b := schemas.SampleBatch{Cluster: "test", Host: host}
	if err := synthetic.New(host, 4, 1).Collect(context.Background(), start.Add(time.Duration(tick)*time.Second), &b); err != nil {
		t.Fatal(err)
	}
	v, err := schemas.AppendSampleBatch(nil, &b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func writeSampleMessages(t *testing.T, broker string, start time.Time, msgs []sampleMessage) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(broker), Topic: schemas.TopicGPUSamples, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	var out []kafka.Message
	for _, m := range msgs {
		km := kafka.Message{Key: []byte(m.host), Value: sampleValue(t, m.host, m.tick, start), Time: m.sent}
		if m.producer != "" {
			km.Headers = []kafka.Header{{Key: schemas.HeaderProducer, Value: []byte(m.producer)}, {Key: schemas.HeaderSequence, Value: []byte(m.seq)}}
		}
		out = append(out, km)
	}
	if err := w.WriteMessages(context.Background(), out...); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// metricSum sums the series of a counter or gauge family whose labels have
// the given values (pairs of label name and value; none: every series).
func metricSum(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
					return l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}) {
					continue next
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// waitMessages polls until ingest handled want messages of every outcome.
func waitMessages(t *testing.T, reg *prometheus.Registry, want float64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for metricSum(t, reg, "heliostat_ingest_messages_total") < want {
		if time.Now().After(deadline) {
			t.Fatalf("ingest handled %v messages; want %v", metricSum(t, reg, "heliostat_ingest_messages_total"), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestResentMessagesStoredOnce writes numbered messages, copies of some of
// them (as a collector that retried or replayed its spool would), a gap and a
// malformed header, and checks that every sample is stored exactly once, also
// across a restart of ingest, with each case counted.
func TestResentMessagesStoredOnce(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(context.Background(), []string{broker}, 2, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)
	var msgs []sampleMessage
	for tick := range 6 {
		for _, h := range []string{"h0", "h1"} {
			msgs = append(msgs, sampleMessage{host: h, tick: tick, producer: "p1", seq: strconv.Itoa(tick + 1)})
		}
	}
	// Copies of h0's messages 3 to 5, sent again with their numbers.
	for tick := 2; tick < 5; tick++ {
		msgs = append(msgs, sampleMessage{host: "h0", tick: tick, producer: "p1", seq: strconv.Itoa(tick + 1)})
	}
	msgs = append(msgs,
		sampleMessage{host: "h1", tick: 8, producer: "p1", seq: "9"},   // 7 and 8 were lost upstream
		sampleMessage{host: "h0", tick: 9, producer: "p2", seq: "1"},   // another producer, same host
		sampleMessage{host: "h0", tick: 10, producer: "p1", seq: "x"},  // malformed: stored, not deduplicated
		sampleMessage{host: "h1", tick: 11, producer: "", seq: ""},     // not numbered: stored
		sampleMessage{host: "h1", tick: 8, producer: "p1", seq: "9"},   // a copy of the message after the gap
		sampleMessage{host: "h0", tick: 9, producer: "p2", seq: "1"},   // a copy of p2's message
		sampleMessage{host: "h0", tick: 6, producer: "p1", seq: "7"},   // h0 goes on
		sampleMessage{host: "h0", tick: 12, producer: "p1", seq: "08"}, // malformed too
	)
	writeSampleMessages(t, broker, start, msgs)
	const distinct = 12 + 1 + 1 + 1 + 1 + 1 + 1 // messages whose samples must be stored
	const resent = 3 + 1 + 1

	ctx, cancel := context.WithCancel(context.Background())
	reg := prometheus.NewRegistry()
	done := startIngest(t, ctx, broker, ch, reg)
	waitMessages(t, reg, float64(len(msgs)))
	waitCount(t, conn, ch.Database+".gpu_samples", distinct*4, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertNoDuplicates(t, conn, ch.Database)
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"heliostat_ingest_messages_total", []string{"outcome", "resent"}, resent},
		{"heliostat_ingest_messages_total", []string{"outcome", "inserted"}, distinct},
		{"heliostat_ingest_sequence_gaps_total", nil, 2},
		{"heliostat_ingest_errors_total", []string{"kind", "sequence_header"}, 2},
	}
	for _, c := range checks {
		if got := metricSum(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("%s%q = %v; want %v", c.name, c.labels, got, c.want)
		}
	}

	// After a restart the marks come from ClickHouse: the committed
	// offsets are past the originals, so only the stored marks can tell
	// that these are copies.
	writeSampleMessages(t, broker, start, []sampleMessage{
		{host: "h0", tick: 1, producer: "p1", seq: "2"}, // an old copy
		{host: "h1", tick: 8, producer: "p1", seq: "9"}, // a copy of the latest mark
		{host: "h0", tick: 7, producer: "p1", seq: "8"}, // new
	})
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	reg2 := prometheus.NewRegistry()
	done2 := startIngest(t, ctx2, broker, ch, reg2)
	waitMessages(t, reg2, 3)
	waitCount(t, conn, ch.Database+".gpu_samples", (distinct+1)*4, 30*time.Second)
	cancel2()
	if err := <-done2; err != nil {
		t.Fatalf("second Run: %v", err)
	}
	assertNoDuplicates(t, conn, ch.Database)
	if got := metricSum(t, reg2, "heliostat_ingest_messages_total", "outcome", "resent"); got != 2 {
		t.Errorf("resent after the restart = %v; want 2", got)
	}
	if got := metricSum(t, reg2, "heliostat_ingest_sequence_gaps_total"); got != 0 {
		t.Errorf("gaps after the restart = %v; want 0", got)
	}
}

// TestSpoolReplayedTwiceStoredOnce is the collector crash the publisher
// cannot rule out: the broker acknowledged a replay of the spool, and the
// collector died before the spool recorded it, so the next start sends the
// same messages again. Every sample must still be stored once.
func TestSpoolReplayedTwiceStoredOnce(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(context.Background(), []string{broker}, 2, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on: the first publisher spools everything.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	spoolDir := t.TempDir()
	open := func(brokers string) *publish.Publisher {
		p, err := publish.New(publish.Config{Brokers: []string{brokers}, SpoolDir: spoolDir, WriteTimeout: time.Second}, logger, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	start := time.Date(2026, 4, 2, 10, 0, 0, 0, time.UTC)
	const ticks, hosts = 20, 3
	p1 := open(down)
	for tick := range ticks {
		for h := range hosts {
			host := fmt.Sprintf("h%d", h)
			if err := p1.Publish(context.Background(), schemas.TopicGPUSamples, []byte(host), sampleValue(t, host, tick, start)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p1.Close(); err != nil {
		t.Fatal(err)
	}
	snapshot := copyDir(t, spoolDir)

	for round := range 2 {
		if round == 1 {
			// The crash: the spool as it was before the replay.
			if err := os.RemoveAll(spoolDir); err != nil {
				t.Fatal(err)
			}
			if err := os.CopyFS(spoolDir, os.DirFS(snapshot)); err != nil {
				t.Fatal(err)
			}
		}
		p := open(broker)
		if err := p.Flush(context.Background()); err != nil {
			t.Fatalf("round %d: Flush: %v", round, err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	done := startIngest(t, ctx, broker, ch, reg)
	waitMessages(t, reg, 2*ticks*hosts)
	waitCount(t, conn, ch.Database+".gpu_samples", ticks*hosts*4, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertNoDuplicates(t, conn, ch.Database)
	if got := metricSum(t, reg, "heliostat_ingest_messages_total", "outcome", "resent"); got != ticks*hosts {
		t.Errorf("resent = %v; want %d", got, ticks*hosts)
	}
}

// copyDir copies the files of dir into a new temporary directory.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestSpoolFullDropsCountedAsGaps: messages the collector's publisher drops
// because its spool is full leave gaps in its numbers, which ingest counts,
// so a loss before Kafka shows in a metric instead of passing unseen.
func TestSpoolFullDropsCountedAsGaps(t *testing.T) {
	ch, conn := schematest.Database(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	start := time.Date(2026, 4, 3, 10, 0, 0, 0, time.UTC)
	value := func(tick int) []byte { return sampleValue(t, "h0", tick, start) }
	// Room for three messages: the broker is down, so the fourth and later
	// are dropped.
	spoolBytes := int64(3*len(value(0)) + 3*200)
	p, err := publish.New(publish.Config{Brokers: []string{addr}, SpoolDir: t.TempDir(), SpoolMaxBytes: spoolBytes, WriteTimeout: time.Second},
		slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	accepted, dropped := 0, 0
	for tick := range 6 {
		if err := p.Publish(context.Background(), schemas.TopicGPUSamples, []byte("h0"), value(tick)); err != nil {
			dropped++
		} else {
			accepted++
		}
	}
	if accepted != 3 || dropped != 3 {
		t.Fatalf("with the broker down: %d accepted, %d dropped; want 3 and 3", accepted, dropped)
	}

	_, broker := schematest.Broker(t, kfake.Ports(port), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(context.Background(), []string{broker}, 1, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	// The first attempt may still see the broker as down (kafka-go keeps a
	// failed discovery for a few seconds); the publisher's Run retries the
	// same way.
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := p.Flush(context.Background())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Flush: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The broker is back: the next message goes straight out, numbered 7.
	if err := p.Publish(context.Background(), schemas.TopicGPUSamples, []byte("h0"), value(6)); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	done := startIngest(t, ctx, broker, ch, reg)
	waitMessages(t, reg, 4)
	waitCount(t, conn, ch.Database+".gpu_samples", 4*4, 30*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := metricSum(t, reg, "heliostat_ingest_sequence_gaps_total"); got != 3 {
		t.Errorf("heliostat_ingest_sequence_gaps_total = %v; want 3 (the dropped messages)", got)
	}
}

// producerRows counts the rows of producer in table.
func producerRows(t *testing.T, conn driver.Conn, table, producer string) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM "+table+" WHERE producer = ?", producer).Scan(&n); err != nil {
		t.Fatalf("count %s rows of %s: %v", producer, table, err)
	}
	return n
}

// waitProducerRows polls until table holds want rows of producer (deletes
// are mutations that ClickHouse applies in the background).
func waitProducerRows(t *testing.T, conn driver.Conn, table, producer string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for producerRows(t, conn, table, producer) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d rows of producer %s; want %d", table, producerRows(t, conn, table, producer), producer, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestIdleProducersForgotten checks that the marks of a producer that has
// sent nothing to its partition for the dedupe window are dropped from
// memory and deleted from ClickHouse, while an active producer's stay and
// still catch its copies across a restart; and that a restart stores a time
// for a producer whose marks have none (rows from before ingest_producers).
func TestIdleProducersForgotten(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(context.Background(), []string{broker}, 2, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 4, 1, 10, 0, 0, 0, time.UTC)
	now := time.Now().Truncate(time.Millisecond)
	// One key, so one partition: "old" sent an hour before "new", far more
	// than the 2 s window, measured by the messages' own timestamps.
	msgs := []sampleMessage{
		{host: "h0", tick: 0, producer: "old", seq: "1", sent: now.Add(-time.Hour)},
		{host: "h0", tick: 1, producer: "old", seq: "2", sent: now.Add(-time.Hour)},
		{host: "h0", tick: 2, producer: "new", seq: "1", sent: now},
		{host: "h0", tick: 3, producer: "new", seq: "2", sent: now},
	}
	writeSampleMessages(t, broker, start, msgs)
	window := func(c *ingest.Config) { c.DedupeWindow = 2 * time.Second }
	seqTable, prodTable := ch.Database+".ingest_sequences", ch.Database+".ingest_producers"

	ctx, cancel := context.WithCancel(context.Background())
	reg := prometheus.NewRegistry()
	done := startIngestWith(t, ctx, broker, ch, reg, window)
	waitMessages(t, reg, float64(len(msgs)))
	waitCount(t, conn, ch.Database+".gpu_samples", uint64(len(msgs))*4, 30*time.Second)
	waitProducerRows(t, conn, seqTable, "new", 1)
	waitProducerRows(t, conn, prodTable, "new", 1)
	// The sweep runs every window/8 = 250 ms of wall time.
	deadline := time.Now().Add(30 * time.Second)
	for metricSum(t, reg, "heliostat_ingest_sequence_producers_forgotten_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the idle producer was not forgotten")
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitProducerRows(t, conn, seqTable, "old", 0)
	waitProducerRows(t, conn, prodTable, "old", 0)
	if got := metricSum(t, reg, "heliostat_ingest_sequence_marks"); got != 1 {
		t.Errorf("marks held = %v; want 1 (new's)", got)
	}
	if got := metricSum(t, reg, "heliostat_ingest_sequence_producers_forgotten_total"); got != 1 {
		t.Errorf("producers forgotten = %v; want 1", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	// Rows as written before ingest_producers existed: marks, no time.
	if err := conn.Exec(context.Background(), "ALTER TABLE "+prodTable+" DELETE WHERE producer = 'new'"); err != nil {
		t.Fatal(err)
	}
	waitProducerRows(t, conn, prodTable, "new", 0)
	// A copy of new's latest message, sent again now: still recognised.
	writeSampleMessages(t, broker, start, []sampleMessage{{host: "h0", tick: 3, producer: "new", seq: "2"}})
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	reg2 := prometheus.NewRegistry()
	done2 := startIngestWith(t, ctx2, broker, ch, reg2, window)
	waitMessages(t, reg2, 1)
	if got := metricSum(t, reg2, "heliostat_ingest_messages_total", "outcome", "resent"); got != 1 {
		t.Errorf("resent after the restart = %v; want 1", got)
	}
	waitProducerRows(t, conn, prodTable, "new", 1)
	cancel2()
	if err := <-done2; err != nil {
		t.Fatalf("second Run: %v", err)
	}
	assertNoDuplicates(t, conn, ch.Database)
	if got := schematest.Count(t, conn, ch.Database+".gpu_samples"); got != uint64(len(msgs))*4 {
		t.Errorf("gpu_samples = %d rows; want %d", got, len(msgs)*4)
	}
}
