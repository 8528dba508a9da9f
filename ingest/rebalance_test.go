package ingest_test

import (
	"context"
	"strings"
	"sync"
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

// slowWrite delays the first write whose query contains match: a ClickHouse
// slow to take one flush (a loaded server, a slow network, a connection pool
// waiting), longer than the consumer group's session timeout. started is
// closed when the delay begins, over when it ends.
type slowWrite struct {
	driver.Conn
	match         string
	delay         time.Duration
	once          *sync.Once
	started, over chan struct{}
}

func (c slowWrite) PrepareBatch(ctx context.Context, q string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if strings.Contains(q, c.match) {
		c.once.Do(func() {
			close(c.started)
			time.Sleep(c.delay)
			close(c.over)
		})
	}
	return c.Conn.PrepareBatch(ctx, q, opts...)
}

// TestEvictedReplicaWritesNothingTwice: replica A is inside a slow flush when
// replica B joins the group. The rebalance must not give A's partitions to B
// while A's write is still on its way: B would read the offsets A is
// writing and store their rows a second time.
func TestEvictedReplicaWritesNothingTwice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match string // the write that is slow
	}{
		{"slow intents", ".ingest_intents "},
		{"slow rows", ".gpu_samples ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, conn := schematest.Database(t)
			_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
			if err := ingest.EnsureTopics(context.Background(), []string{broker}, 1, schemas.DataTopics()...); err != nil {
				t.Fatal(err)
			}
			want := produceSamples(t, broker, 100, 4, 8, 10, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			slow := slowWrite{match: tc.match, delay: 6 * time.Second, once: new(sync.Once),
				started: make(chan struct{}), over: make(chan struct{})}
			// The session timeout (1 s) is far shorter than the delay.
			doneA := startIngestConn(t, ctx, broker, ch, prometheus.NewRegistry(), nil, func(c driver.Conn) driver.Conn {
				slow.Conn = c
				return slow
			})
			select {
			case <-slow.started:
			case <-time.After(30 * time.Second):
				t.Fatal("replica A wrote nothing within 30s")
			}
			doneB := startIngest(t, ctx, broker, ch, prometheus.NewRegistry())
			<-slow.over
			waitCount(t, conn, ch.Database+".gpu_samples", uint64(want), 60*time.Second)
			cancel()
			<-doneA
			<-doneB
			// Both have stopped: whatever A still had on its way has landed.
			if n := schematest.Count(t, conn, ch.Database+".gpu_samples"); n != uint64(want) {
				t.Errorf("gpu_samples holds %d rows; want %d", n, want)
			}
			assertNoDuplicates(t, conn, ch.Database)
		})
	}
}

// TestShutdownFlushesOpenBatch: a batch not yet due when Run's context ends is
// written and its offsets committed before the replica leaves the group.
func TestShutdownFlushesOpenBatch(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(context.Background(), []string{broker}, 1, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	const msgs = 50
	want := produceSamples(t, broker, msgs, 2, 8, 10, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	done := startIngestWith(t, ctx, broker, ch, reg, func(c *ingest.Config) {
		c.BatchInterval, c.BatchRows = time.Hour, 1_000_000 // the batch is never due
	})
	waitMessages(t, reg, msgs)
	if n := schematest.Count(t, conn, ch.Database+".gpu_samples"); n != 0 {
		t.Fatalf("gpu_samples holds %d rows before shutdown; want 0 (the batch is not due)", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := schematest.Count(t, conn, ch.Database+".gpu_samples"); n != uint64(want) {
		t.Errorf("after shutdown gpu_samples holds %d rows; want %d", n, want)
	}
	res, err := (&kafka.Client{Addr: kafka.TCP(broker)}).OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{
		GroupID: "g-" + ch.Database, Topics: map[string][]int{schemas.TopicGPUSamples: {0}}})
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Topics[schemas.TopicGPUSamples]; len(p) != 1 || p[0].CommittedOffset != msgs {
		t.Errorf("committed offsets of %s = %+v; want %d", schemas.TopicGPUSamples, p, msgs)
	}
}
