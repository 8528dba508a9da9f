package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/collector/synthetic"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestMain(m *testing.M) { os.Exit(schematest.Main(m)) }

// produceSamples writes msgs messages of ticks×gpus samples each, hosts
// round-robin, starting at start and stepping tick by tick.
func produceSamples(t testing.TB, broker string, msgs, hosts, gpus, ticks int, start time.Time) int {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(broker), Topic: schemas.TopicGPUSamples, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchSize: 200, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	srcs := make([]*synthetic.Source, hosts)
	for h := range srcs {
		srcs[h] = synthetic.New(fmt.Sprintf("node%03d", h), gpus, 1)
	}
	var out []kafka.Message
	rows := 0
	now := start
	for i := range msgs {
		h := i % hosts
		b := schemas.SampleBatch{Cluster: "test", Host: fmt.Sprintf("node%03d", h)}
		for range ticks {
			if err := srcs[h].Collect(context.Background(), now, &b); err != nil {
				t.Fatal(err)
			}
			now = now.Add(100 * time.Millisecond)
		}
		v, err := schemas.AppendSampleBatch(nil, &b)
		if err != nil {
			t.Fatal(err)
		}
		rows += len(b.Samples)
		out = append(out, kafka.Message{Key: []byte(b.Host), Value: v})
		if len(out) == 500 || i == msgs-1 {
			if err := w.WriteMessages(context.Background(), out...); err != nil {
				t.Fatalf("produce: %v", err)
			}
			out = out[:0]
		}
	}
	return rows
}

func startIngest(t *testing.T, ctx context.Context, broker string, ch chconn.Config, reg prometheus.Registerer) chan error {
	t.Helper()
	return startIngestWith(t, ctx, broker, ch, reg, nil)
}

// startIngestWith is startIngest with the test's configuration changed by
// adjust (when not nil).
func startIngestWith(t *testing.T, ctx context.Context, broker string, ch chconn.Config, reg prometheus.Registerer, adjust func(*ingest.Config)) chan error {
	t.Helper()
	return startIngestConn(t, ctx, broker, ch, reg, adjust, nil)
}

// startIngestConn is startIngestWith on a connection wrapped by wrap (when
// not nil).
func startIngestConn(t *testing.T, ctx context.Context, broker string, ch chconn.Config, reg prometheus.Registerer,
	adjust func(*ingest.Config), wrap func(driver.Conn) driver.Conn) chan error {
	t.Helper()
	_, done := startIngester(t, ctx, broker, ch, reg, adjust, wrap)
	return done
}

// startIngester is startIngestConn that also returns the running Ingester.
func startIngester(t *testing.T, ctx context.Context, broker string, ch chconn.Config, reg prometheus.Registerer,
	adjust func(*ingest.Config), wrap func(driver.Conn) driver.Conn) (*ingest.Ingester, chan error) {
	t.Helper()
	conn, err := ch.Open(ctx, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ingestConn := conn
	if wrap != nil {
		ingestConn = wrap(conn)
	}
	cfg := ingest.Config{Brokers: []string{broker}, Group: "g-" + ch.Database, ClickHouse: ch, BatchRows: 50_000, BatchInterval: 200 * time.Millisecond, SessionTimeout: time.Second}
	if adjust != nil {
		adjust(&cfg)
	}
	in, err := ingest.New(cfg, ingestConn, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), reg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx); conn.Close() }()
	return in, done
}

// waitCount polls until from holds want rows or the deadline passes.
func waitCount(t *testing.T, conn driver.Conn, from string, want uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var n uint64
	for time.Now().Before(deadline) {
		n = schematest.Count(t, conn, from)
		if n >= want {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n != want {
		t.Fatalf("count(%s) = %d; want %d", from, n, want)
	}
}

func assertNoDuplicates(t *testing.T, conn driver.Conn, db string) {
	t.Helper()
	var total, uniq uint64
	if err := conn.QueryRow(context.Background(), "SELECT count(), uniqExact(host, gpu_uuid, ts, ts_millis) FROM "+db+".gpu_samples").Scan(&total, &uniq); err != nil {
		t.Fatal(err)
	}
	if total != uniq {
		t.Fatalf("gpu_samples holds %d rows but %d distinct samples: duplicates", total, uniq)
	}
}

func TestEndToEndExactCount(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(context.Background(), []string{broker}, 4, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	// Ticks straddle midnight so that one message's rows land in two daily
	// partitions.
	start := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	want := produceSamples(t, broker, 300, 6, 8, 10, start)

	ctx, cancel := context.WithCancel(context.Background())
	reg := prometheus.NewRegistry()
	done := startIngest(t, ctx, broker, ch, reg)
	waitCount(t, conn, ch.Database+".gpu_samples", uint64(want), 60*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertNoDuplicates(t, conn, ch.Database)
	var parts uint64
	if err := conn.QueryRow(context.Background(), "SELECT uniqExact(toYYYYMMDD(ts)) FROM "+ch.Database+".gpu_samples").Scan(&parts); err != nil {
		t.Fatal(err)
	}
	if parts != 2 {
		t.Errorf("rows span %d days; want 2 (the test straddles midnight)", parts)
	}
	if got := metricSum(t, reg, "heliostat_ingest_rows_total"); got != float64(want) {
		t.Errorf("heliostat_ingest_rows_total = %v; want %d", got, want)
	}
	// The rollup and the inventory follow the raw table.
	if n := schematest.Count(t, conn, "(SELECT host, gpu_uuid FROM "+ch.Database+".gpu_inventory FINAL)"); n != 48 {
		t.Errorf("gpu_inventory has %d GPUs; want 48", n)
	}
	var rolled uint64
	if err := conn.QueryRow(context.Background(), "SELECT sum(n) FROM (SELECT countMerge(samples) AS n FROM "+ch.Database+".gpu_samples_1m GROUP BY minute, host, gpu_uuid)").Scan(&rolled); err != nil {
		t.Fatal(err)
	}
	if rolled != uint64(want) {
		t.Errorf("gpu_samples_1m counts %d samples; want %d", rolled, want)
	}

	// A second run of the same group finds nothing new and inserts nothing.
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := startIngest(t, ctx2, broker, ch, prometheus.NewRegistry())
	time.Sleep(2 * time.Second)
	cancel2()
	<-done2
	if n := schematest.Count(t, conn, ch.Database+".gpu_samples"); n != uint64(want) {
		t.Fatalf("after a restart count = %d; want %d", n, want)
	}
}

func TestDeadletterDoesNotBlockPartition(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(context.Background(), []string{broker}, 1, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(broker), Topic: schemas.TopicGPUSamples, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, BatchBytes: 4 << 20}
	defer w.Close()
	// The third is as large as the broker takes (max.message.bytes
	// 1,048,588): with the dead-letter headers it would not be.
	big := bytes.Repeat([]byte{'x'}, 1_048_400)
	bad := []kafka.Message{{Key: []byte("h"), Value: []byte("not a heliostat message")}, {Key: []byte("h"), Value: []byte{'H', 'S', 'G', 9},
		Headers: []kafka.Header{{Key: schemas.HeaderProducer, Value: []byte("p1")}, {Key: schemas.HeaderSequence, Value: []byte("1")}}},
		{Key: []byte("h"), Value: big}}
	for _, m := range bad { // one by one: together they are more than a request takes
		if err := w.WriteMessages(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	want := produceSamples(t, broker, 20, 2, 8, 3, time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	done := startIngest(t, ctx, broker, ch, reg)
	waitCount(t, conn, ch.Database+".gpu_samples", uint64(want), 60*time.Second)

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: schemas.TopicDeadletter, Partition: 0, MaxWait: 100 * time.Millisecond, MaxBytes: 4 << 20})
	defer r.Close()
	for i, b := range bad {
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		m, err := r.ReadMessage(rctx)
		rcancel()
		if err != nil {
			t.Fatalf("read dead letter %d: %v", i, err)
		}
		h := map[string]string{}
		for _, x := range m.Headers {
			h[x.Key] = string(x.Value)
		}
		if i == 2 {
			if len(m.Value) == 0 || len(m.Value) >= len(big) || !bytes.HasPrefix(big, m.Value) || h[schemas.HeaderDeadletterTruncated] != fmt.Sprint(len(big)) {
				t.Errorf("large dead letter: value of %d bytes, %s header %q; want the start of the %d-byte value, and its length",
					len(m.Value), schemas.HeaderDeadletterTruncated, h[schemas.HeaderDeadletterTruncated], len(big))
			}
		} else if string(m.Value) != string(b.Value) || h[schemas.HeaderDeadletterTruncated] != "" {
			t.Errorf("dead letter %d value = %q, truncated header %q; want %q, none", i, m.Value, h[schemas.HeaderDeadletterTruncated], b.Value)
		}
		if h[schemas.HeaderDeadletterOffset] != fmt.Sprint(i) || h[schemas.HeaderDeadletterReason] == "" || h[schemas.HeaderDeadletterTopic] != schemas.TopicGPUSamples {
			t.Errorf("dead letter %d headers = %v; want source offset %d, a reason and the source topic", i, h, i)
		}
		want := "" // the first bad message carries no headers of its own
		if i == 1 {
			want = "p1"
		}
		if h[schemas.HeaderProducer] != want {
			t.Errorf("dead letter %d keeps producer header %q; want %q (the original's)", i, h[schemas.HeaderProducer], want)
		}
	}
	cancel()
	<-done
	mfs, _ := reg.Gather()
	kinds := map[string]float64{}
	cut := 0.0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "heliostat_ingest_errors_total":
			for _, m := range mf.GetMetric() {
				kinds[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		case "heliostat_ingest_deadletters_truncated_total":
			cut = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if kinds["decode_bad_magic"] != 2 || kinds["decode_unsupported_version"] != 1 || cut != 1 {
		t.Errorf("decode errors by kind = %v, dead letters cut %v; want two bad_magic, one unsupported_version, one cut", kinds, cut)
	}
}
