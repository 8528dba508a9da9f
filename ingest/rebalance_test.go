package ingest_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
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

// heldWrite holds the first write whose query contains match until release
// is closed: a ClickHouse, or a client, slow to take one flush. With listed
// false it is held before the query reaches ClickHouse (the client on its
// way: a connection pool waiting, a slow network); with listed true after
// ClickHouse took the query and before its rows are sent, so that
// ClickHouse lists the INSERT as running. held is closed when the hold
// begins; sent receives the outcome of the held write once it is sent. The
// later writes that match are each slowed by slow before they are sent (a
// slow client), so that another replica's reads come first.
type heldWrite struct {
	driver.Conn
	match   string
	listed  bool
	slow    time.Duration
	once    *sync.Once
	held    chan struct{}
	release chan struct{}
	sent    chan error
}

func newHeldWrite(match string, listed bool, slow time.Duration) *heldWrite {
	return &heldWrite{match: match, listed: listed, slow: slow, once: new(sync.Once),
		held: make(chan struct{}), release: make(chan struct{}), sent: make(chan error, 1)}
}

func (c *heldWrite) wrap(conn driver.Conn) driver.Conn {
	c.Conn = conn
	return c
}

func (c *heldWrite) PrepareBatch(ctx context.Context, q string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if !strings.Contains(q, c.match) {
		return c.Conn.PrepareBatch(ctx, q, opts...)
	}
	first := false
	c.once.Do(func() { first = true })
	if !first {
		time.Sleep(c.slow)
		return c.Conn.PrepareBatch(ctx, q, opts...)
	}
	close(c.held)
	if !c.listed {
		<-c.release
	}
	b, err := c.Conn.PrepareBatch(ctx, q, opts...)
	if err != nil {
		c.sent <- err
		return nil, err
	}
	return heldSend{Batch: b, c: c}, nil
}

// heldSend is the held write's batch: it waits for the release (when
// listed) and reports the outcome.
type heldSend struct {
	driver.Batch
	c *heldWrite
}

func (b heldSend) Send() error {
	if b.c.listed {
		<-b.c.release
	}
	err := b.Batch.Send()
	b.c.sent <- err
	return err
}

// TestRebalanceDuringFlushStoresRowsOnce: replica A is inside a flush, one of
// its writes held, when replica B joins the group (session and rebalance
// timeout 1 s). A cannot rejoin while its write is held, so the rebalance
// completes without it and B gets every partition. The held write is
// released only then: A must not store a row that B stores too.
//
//   - slow intents (the reviewer's case): the intents' INSERT is held before
//     it reaches ClickHouse, B reads the partition and stores all its rows,
//     and then A's intents land, late. A must then find its generation over
//     and insert nothing; the stale intent must be harmless to a later
//     owner that settles it.
//   - slow rows, listed: the rows' INSERT is running in ClickHouse (held
//     between its query and its data). B waits for it before it reads the
//     ledger (awaitInserts); A must then write nothing more, neither the
//     next batch nor the open one it filled meanwhile (A's later INSERTs
//     are slowed by a second, so that B reads the ledger before they could
//     land).
//
// Not covered, because it is not handled (see rebalance.go): a block's
// INSERT held client-side after A checked its generation, before ClickHouse
// lists it. B does not see it, and its rows are stored twice.
func TestRebalanceDuringFlushStoresRowsOnce(t *testing.T) {
	for _, tc := range []struct {
		name      string
		match     string // the write that is held
		listed    bool
		slow      time.Duration // the later writes that match
		batchRows int           // 0: the test's 50,000, one batch for all 8,000 rows
	}{
		{"slow intents", ".ingest_intents (", false, 0, 0},
		// 8,000 rows in four batches: while the first one is held, A
		// reads the next ones.
		{"slow rows, listed", ".gpu_samples (", true, time.Second, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, conn := schematest.Database(t)
			_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
			if err := ingest.EnsureTopics(context.Background(), []string{broker}, 1, schemas.DataTopics()...); err != nil {
				t.Fatal(err)
			}
			want := uint64(produceSamples(t, broker, 100, 4, 8, 10, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			hold := newHeldWrite(tc.match, tc.listed, tc.slow)
			defer func() {
				select {
				case <-hold.release:
				default:
					close(hold.release)
				}
			}()
			small := func(c *ingest.Config) {
				if tc.batchRows > 0 {
					c.BatchRows = tc.batchRows
				}
			}
			regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
			doneA := startIngestConn(t, ctx, broker, ch, regA, small, hold.wrap)
			select {
			case <-hold.held:
			case <-time.After(30 * time.Second):
				t.Fatal("replica A wrote nothing within 30s")
			}
			doneB := startIngestWith(t, ctx, broker, ch, regB, small)
			// The rebalance completes without A: B holds all four partitions.
			waitGauge(t, regB, "heliostat_ingest_assigned_partitions", 4)
			if !tc.listed {
				// B stores everything before A's intents land.
				waitCount(t, conn, ch.Database+".gpu_samples", want, 60*time.Second)
			}
			close(hold.release)
			select {
			case err := <-hold.sent:
				if err != nil {
					t.Fatalf("the held write, released: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the held write was not sent within 30s of its release")
			}
			waitCount(t, conn, ch.Database+".gpu_samples", want, 60*time.Second)
			cancel()
			<-doneA
			<-doneB
			// Both have stopped: whatever A still had on its way has landed.
			if n := schematest.Count(t, conn, ch.Database+".gpu_samples"); n != want {
				t.Errorf("gpu_samples holds %d rows; want %d", n, want)
			}
			assertNoDuplicates(t, conn, ch.Database)

			// A later owner reads the partition again from offset 0, A's
			// late intent among the intents it settles: it stores nothing.
			commitOffset(t, broker, "g-"+ch.Database, schemas.TopicGPUSamples, 0, 0)
			ctx, cancel = context.WithCancel(context.Background())
			defer cancel()
			regC := prometheus.NewRegistry()
			doneC := startIngest(t, ctx, broker, ch, regC)
			waitMessages(t, regC, 100)
			cancel()
			<-doneC
			if n := metricSum(t, regC, "heliostat_ingest_messages_total", "outcome", "duplicate"); n != 100 {
				t.Errorf("reading the partition again found %v of its 100 messages stored; want all", n)
			}
			if n := schematest.Count(t, conn, ch.Database+".gpu_samples"); n != want {
				t.Errorf("after reading the partition again gpu_samples holds %d rows; want %d", n, want)
			}
		})
	}
}

// commitOffset commits offset as group's position in topic's partition,
// while the group has no member.
func commitOffset(t *testing.T, broker, group, topic string, partition int, offset int64) {
	t.Helper()
	resp, err := (&kafka.Client{Addr: kafka.TCP(broker)}).OffsetCommit(context.Background(), &kafka.OffsetCommitRequest{
		GroupID: group, GenerationID: -1, Topics: map[string][]kafka.OffsetCommit{topic: {{Partition: partition, Offset: offset}}}})
	if err != nil {
		t.Fatalf("commit offset %d of %s/%d for %s: %v", offset, topic, partition, group, err)
	}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("commit offset %d of %s/%d for %s: %v", offset, topic, partition, group, p.Error)
		}
	}
}

// TestShutdownFlushesOpenBatch: a batch not yet due when Run's context ends
// is written and its offsets committed before the replica leaves the group.
// When ClickHouse refuses it, Run gives up once its shutdown's time is up
// (1 s here, 15 s in production), also with the sink waiting for a flusher
// that retries, and commits nothing.
func TestShutdownFlushesOpenBatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refuse  bool
		adjust  func(*ingest.Config)
		msgs    int
		rows    bool // whether the rows are stored
		maxStop time.Duration
	}{
		{"clickhouse takes it", false, func(c *ingest.Config) {
			c.BatchInterval, c.BatchRows = time.Hour, 1_000_000 // the batch is never due
		}, 50, true, 10 * time.Second},
		// One batch per two messages: the flusher retries the first, the
		// sink waits to hand it the second.
		{"clickhouse refuses", true, func(c *ingest.Config) {
			c.BatchRows = 100
			ingest.ShortenShutdown(c, time.Second)
		}, 50, false, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, conn := schematest.Database(t)
			_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
			if err := ingest.EnsureTopics(context.Background(), []string{broker}, 1, schemas.DataTopics()...); err != nil {
				t.Fatal(err)
			}
			want := produceSamples(t, broker, tc.msgs, 2, 8, 5, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			reg := prometheus.NewRegistry()
			refuse := new(atomic.Bool)
			refuse.Store(tc.refuse)
			done := startIngestConn(t, ctx, broker, ch, reg, tc.adjust, refusing(refuse))
			// Messages are counted once stored: the lag says what
			// was read. Refused, the flusher retries one batch while
			// the sink waits to hand it the next.
			if tc.refuse {
				waitMetric(t, reg, "heliostat_ingest_errors_total", 1, "kind", "insert")
			}
			waitReadAll(t, reg, schemas.TopicGPUSamples)
			if n := schematest.Count(t, conn, ch.Database+".gpu_samples"); n != 0 {
				t.Fatalf("gpu_samples holds %d rows before shutdown; want 0", n)
			}
			begin := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
			case <-time.After(tc.maxStop + 30*time.Second):
				t.Fatalf("Run did not return within %v of its context's end", tc.maxStop+30*time.Second)
			}
			if took := time.Since(begin); took > tc.maxStop {
				t.Errorf("Run returned %v after its context ended; want at most %v", took, tc.maxStop)
			}
			wantRows, wantOffset := uint64(0), int64(-1)
			if tc.rows {
				wantRows, wantOffset = uint64(want), int64(tc.msgs)
			}
			if n := schematest.Count(t, conn, ch.Database+".gpu_samples"); n != wantRows {
				t.Errorf("after shutdown gpu_samples holds %d rows; want %d", n, wantRows)
			}
			res, err := (&kafka.Client{Addr: kafka.TCP(broker)}).OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{
				GroupID: "g-" + ch.Database, Topics: map[string][]int{schemas.TopicGPUSamples: {0}}})
			if err != nil {
				t.Fatal(err)
			}
			if p := res.Topics[schemas.TopicGPUSamples]; len(p) != 1 || p[0].CommittedOffset != wantOffset {
				t.Errorf("committed offsets of %s = %+v; want %d", schemas.TopicGPUSamples, p, wantOffset)
			}
		})
	}
}

// waitMetric polls until the series of name with the given labels sum to
// at least want.
func waitMetric(t *testing.T, reg *prometheus.Registry, name string, want float64, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for metricSum(t, reg, name, labels...) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v; want at least %v", name, labels, metricSum(t, reg, name, labels...), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
