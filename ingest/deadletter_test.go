package ingest_test

import (
	"context"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestDeadLetterSentOnce: an undecodable message whose batch's rows cannot be
// written is read again by the next run, which must neither send it to the
// dead-letter topic nor count it a second time. Its ledger row is not one of
// the source table's: summed by tbl, the ledger counts the rows of
// gpu_samples and nothing more (as the dashboards' seed checks).
func TestDeadLetterSentOnce(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(context.Background(), []string{broker}, 1, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(broker), Topic: schemas.TopicGPUSamples, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	if err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte("h"), Value: []byte("not a heliostat message"),
		Headers: []kafka.Header{{Key: schemas.HeaderProducer, Value: []byte("p1")}, {Key: schemas.HeaderSequence, Value: []byte("1")}}}); err != nil {
		t.Fatal(err)
	}
	want := produceSamples(t, broker, 20, 2, 8, 3, time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))

	// The first run dead-letters the message, then fails to insert the rows.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	var refuse atomic.Bool
	refuse.Store(true)
	done := startIngestConn(t, ctx, broker, ch, regs[0], func(c *ingest.Config) { ingest.ShortenShutdown(c, time.Second) }, refusing(&refuse))
	deadline := time.Now().Add(30 * time.Second)
	for metricSum(t, regs[0], "heliostat_ingest_errors_total", "kind", "insert") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no failed insert within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if n := schematest.Count(t, conn, ch.Database+".gpu_samples"); n != 0 {
		t.Fatalf("gpu_samples holds %d rows after the failing run; want 0", n)
	}

	// The second reads it again and writes the rows.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done = startIngest(t, ctx, broker, ch, regs[1])
	waitCount(t, conn, ch.Database+".gpu_samples", uint64(want), 60*time.Second)
	cancel()
	<-done

	if msgs := schematest.ReadPartition(t, broker, schemas.TopicDeadletter, 0); len(msgs) != 1 {
		t.Errorf("dead-letter topic holds %d messages; want 1", len(msgs))
	}
	var dead, decode, again float64
	for _, reg := range regs {
		dead += metricSum(t, reg, "heliostat_ingest_messages_total", "outcome", "deadletter")
		decode += metricSum(t, reg, "heliostat_ingest_errors_total", "kind", "decode_bad_magic")
	}
	again = metricSum(t, regs[1], "heliostat_ingest_messages_total", "outcome", "duplicate")
	if dead != 1 || decode != 1 || again != 1 {
		t.Errorf("over both runs messages_total{outcome=deadletter} = %v, errors_total{kind=decode_bad_magic} = %v; second run's duplicates = %v; want 1, 1, 1",
			dead, decode, again)
	}
	rows, err := conn.Query(context.Background(), "SELECT tbl, sum(rows) FROM "+ch.Database+".ingest_ledger GROUP BY tbl")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ledger := map[string]uint64{}
	for rows.Next() {
		var tbl string
		var n uint64
		if err := rows.Scan(&tbl, &n); err != nil {
			t.Fatal(err)
		}
		ledger[tbl] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if wantLedger := map[string]uint64{"gpu_samples": uint64(want), "deadletter/gpu_samples": 1}; !maps.Equal(ledger, wantLedger) {
		t.Errorf("ingest_ledger's sum(rows) by tbl = %v; want %v", ledger, wantLedger)
	}
}
