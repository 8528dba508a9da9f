package publish

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/collector/spool"
	"github.com/heliostat-dev/heliostat/internal/tmpfs"
	"github.com/heliostat-dev/heliostat/schemas"
)

// The GPU attributor and the Slurm source reach PublishRetried through
// collector.JobPublisher.
var _ collector.RetriedPublisher = (*Publisher)(nil)

const partitions = 4

// startCluster starts an in-process Kafka-protocol broker with topic seeded.
func startCluster(t *testing.T, topic string, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.SeedTopics(partitions, topic)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start kfake broker: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// closedAddr returns an address nothing listens on, and its port.
func closedAddr(t *testing.T) (string, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().(*net.TCPAddr)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr.String(), addr.Port
}

// logBuffer collects log output; tests search it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	t   *testing.T
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.t.Log(strings.TrimSuffix(string(p), "\n"))
	return b.buf.Write(p)
}

func (b *logBuffer) count(msg string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), "msg=\""+msg+"\"")
}

type testPublisher struct {
	*Publisher
	reg  *prometheus.Registry
	logs *logBuffer
}

func newPublisher(t *testing.T, cfg Config) *testPublisher {
	t.Helper()
	logs := &logBuffer{t: t}
	reg := prometheus.NewRegistry()
	p, err := New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), reg)
	if err != nil {
		t.Fatalf("New(%+v) = %v", cfg, err)
	}
	p.backoffMin, p.backoffMax = 10*time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() { _ = p.Close() })
	return &testPublisher{Publisher: p, reg: reg, logs: logs}
}

// run starts p.Run and returns a function that stops it and checks its
// result.
func (p *testPublisher) run(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-errc:
				if err != nil {
					t.Errorf("Run() = %v; want nil", err)
				}
			case <-time.After(15 * time.Second):
				t.Errorf("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func (p *testPublisher) count(topic, outcome string) int {
	return int(testutil.ToFloat64(p.m.messages.WithLabelValues(topic, outcome)))
}

// publishRange publishes messages from..to-1 to topic, keyed host-0..2.
func publishRange(t *testing.T, p *testPublisher, topic string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := p.Publish(context.Background(), topic, key(i), []byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("Publish(%s, message %d) = %v", topic, i, err)
		}
	}
}

func key(i int) []byte { return fmt.Appendf(nil, "host-%d", i%3) }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// delivered is one message as read back: its value and sequence headers.
type delivered struct {
	v   int
	seq schemas.Sequence
}

// readAll reads every message of topic with kafka-go's Reader and returns
// them per key in partition order.
func readAll(t *testing.T, addr, topic string) map[string][]delivered {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(addr)}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
	}
	res, err := client.ListOffsets(ctx, req)
	if err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	got := map[string][]delivered{}
	for _, po := range res.Topics[topic] {
		if po.Error != nil {
			t.Fatalf("list offsets of %s/%d: %v", topic, po.Partition, po.Error)
		}
		if po.LastOffset == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   []string{addr},
			Topic:     topic,
			Partition: po.Partition,
			MaxWait:   50 * time.Millisecond,
		})
		for range po.LastOffset {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("read %s/%d: %v", topic, po.Partition, err)
			}
			v, err := strconv.Atoi(string(m.Value))
			if err != nil {
				t.Fatalf("message %s/%d@%d value %q: %v", topic, po.Partition, m.Offset, m.Value, err)
			}
			var producer, seq []byte
			for _, h := range m.Headers {
				switch h.Key {
				case schemas.HeaderProducer:
					producer = h.Value
				case schemas.HeaderSequence:
					seq = h.Value
				}
			}
			sq, err := schemas.ParseSequence(producer, seq)
			if err != nil {
				t.Fatalf("message %s/%d@%d: %v", topic, po.Partition, m.Offset, err)
			}
			got[string(m.Key)] = append(got[string(m.Key)], delivered{v: v, seq: sq})
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// checkDelivered checks that exactly the messages 0..n-1 arrived, each once,
// in order per key.
func checkDelivered(t *testing.T, addr, topic string, n int) {
	t.Helper()
	checkValues(t, addr, topic, valueRange(0, n))
}

func valueRange(from, to int) []int {
	var vs []int
	for i := from; i < to; i++ {
		vs = append(vs, i)
	}
	return vs
}

// checkValues checks that exactly the messages numbered values arrived, each
// once, in order per key.
func checkValues(t *testing.T, addr, topic string, values []int) {
	t.Helper()
	want := map[string][]int{}
	for _, i := range values {
		want[string(key(i))] = append(want[string(key(i))], i)
	}
	got := readAll(t, addr, topic)
	for k, w := range want {
		var vs []int
		for _, d := range got[k] {
			vs = append(vs, d.v)
		}
		if !slices.Equal(vs, w) {
			t.Errorf("messages of key %s on %s = %v; want %v", k, topic, vs, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("keys on %s = %d; want %d", topic, len(got), len(want))
	}
}

// checkSequences checks the sequence headers of what reached topic: messages
// below split came from producer first and the rest from second, and each
// producer numbered its messages of each key 1, 2, 3, … in order.
func checkSequences(t *testing.T, addr, topic string, split int, first, second string) {
	t.Helper()
	if first == second {
		t.Fatalf("two publishers share producer id %q", first)
	}
	for k, ds := range readAll(t, addr, topic) {
		next := map[string]uint64{}
		for _, d := range ds {
			want := first
			if d.v >= split {
				want = second
			}
			next[want]++
			if d.seq != (schemas.Sequence{Producer: want, Seq: next[want]}) {
				t.Errorf("message %d (key %s) has sequence %+v; want producer %s, seq %d", d.v, k, d.seq, want, next[want])
			}
		}
	}
}

func TestPublishDirect(t *testing.T) {
	const topic = "direct"
	c := startCluster(t, topic)
	addr := c.ListenAddrs()[0]
	p := newPublisher(t, Config{Brokers: []string{addr}, SpoolDir: t.TempDir()})

	publishRange(t, p, topic, 0, 30)

	if got := p.count(topic, outcomeSent); got != 30 {
		t.Errorf("sent = %d; want 30", got)
	}
	if got := p.count(topic, outcomeSpooled); got != 0 {
		t.Errorf("spooled = %d; want 0", got)
	}
	checkDelivered(t, addr, topic, 30)
	checkSequences(t, addr, topic, 30, p.Producer(), "none")
}

// TestPublishCancelledByCaller: a caller that gives up (a shutdown) while
// the brokers are fine loses nothing, and the publisher does not claim the
// brokers are unreachable.
func TestPublishCancelledByCaller(t *testing.T) {
	const topic = "cancelled"
	c := startCluster(t, topic)
	addr := c.ListenAddrs()[0]
	p := newPublisher(t, Config{Brokers: []string{addr}, SpoolDir: t.TempDir()})
	publishRange(t, p, topic, 0, 2)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Publish(ctx, topic, key(2), []byte("2")); err != nil {
		t.Fatalf("Publish with a cancelled context = %v; want nil (spooled)", err)
	}
	if got := p.logs.count("broker unreachable, spooling"); got != 0 {
		t.Errorf("%d logs of the broker being unreachable after a caller cancelled; want 0", got)
	}
	p.run(t)
	waitFor(t, "spool to drain", func() bool { return p.spool.Len() == 0 })
	checkDelivered(t, addr, topic, 3)
}

func TestBrokerDownAtStart(t *testing.T) {
	const topic = "down-at-start"
	addr, port := closedAddr(t)
	p := newPublisher(t, Config{Brokers: []string{addr}, SpoolDir: t.TempDir(), WriteTimeout: 2 * time.Second})
	p.run(t)

	publishRange(t, p, topic, 0, 40)
	if got := p.count(topic, outcomeSpooled); got != 40 {
		t.Fatalf("spooled = %d; want 40", got)
	}
	if got := p.logs.count("broker unreachable, spooling"); got != 1 {
		t.Errorf("%d logs of entering spooling; want 1", got)
	}
	if err := p.Ready(); err == nil || !strings.Contains(err.Error(), "kafka: failing for") || !strings.Contains(err.Error(), "messages spooled)") {
		t.Errorf("Ready() while spooling = %v; want the brokers failing and the spooled count", err)
	}

	startCluster(t, topic, kfake.Ports(port))
	// The spool commits the replayed messages a moment before readiness
	// turns: wait for both.
	waitFor(t, "spool to drain", func() bool { return p.spool.Len() == 0 })
	waitFor(t, "Ready() to be nil once the spool drained", func() bool { return p.Ready() == nil })
	// Once drained, publishing goes straight to the broker again.
	publishRange(t, p, topic, 40, 45)

	checkDelivered(t, addr, topic, 45)
	if got := p.count(topic, outcomeReplayed); got != 40 {
		t.Errorf("replayed = %d; want 40", got)
	}
	if got := p.count(topic, outcomeSent); got != 5 {
		t.Errorf("sent = %d; want 5", got)
	}
	if got := p.logs.count("broker reachable again, replayed spooled messages"); got != 1 {
		t.Errorf("%d logs of recovery; want 1", got)
	}
	if got := testutil.ToFloat64(p.m.spoolMessages); got != 0 {
		t.Errorf("spool messages gauge = %v; want 0", got)
	}
}

// TestBrokerRestart stops the broker while messages flow and restarts it on
// the same port with its data.
func TestBrokerRestart(t *testing.T) {
	const topic = "restart"
	dataDir := t.TempDir()
	_, port := closedAddr(t)
	c := startCluster(t, topic, kfake.Ports(port), kfake.DataDir(dataDir))
	addr := c.ListenAddrs()[0]
	p := newPublisher(t, Config{Brokers: []string{addr}, SpoolDir: t.TempDir(), WriteTimeout: 2 * time.Second})
	p.run(t)

	publishRange(t, p, topic, 0, 10)
	c.Close()
	publishRange(t, p, topic, 10, 30)
	if got := p.count(topic, outcomeSpooled); got != 20 {
		t.Fatalf("spooled while the broker was down = %d; want 20", got)
	}

	startCluster(t, topic, kfake.Ports(port), kfake.DataDir(dataDir))
	waitFor(t, "spool to drain", func() bool { return p.spool.Len() == 0 })
	publishRange(t, p, topic, 30, 35)
	checkDelivered(t, addr, topic, 35)
}

func TestRestartReplaysSpool(t *testing.T) {
	const topic = "publisher-restart"
	spoolDir := t.TempDir()
	down, _ := closedAddr(t)
	p1 := newPublisher(t, Config{Brokers: []string{down}, SpoolDir: spoolDir})
	publishRange(t, p1, topic, 0, 25)
	if err := p1.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := p1.Publish(context.Background(), topic, nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Publish after Close = %v; want ErrClosed", err)
	}

	c := startCluster(t, topic)
	addr := c.ListenAddrs()[0]
	p2 := newPublisher(t, Config{Brokers: []string{addr}, SpoolDir: spoolDir})
	if got := testutil.ToFloat64(p2.m.spoolMessages); got != 25 {
		t.Fatalf("spool messages gauge after restart = %v; want 25", got)
	}
	// Until the spool drains, new messages queue behind the old ones.
	publishRange(t, p2, topic, 25, 30)
	p2.run(t)
	waitFor(t, "spool to drain", func() bool { return p2.spool.Len() == 0 })
	checkDelivered(t, addr, topic, 30)
	// The spooled messages keep the numbers p1 gave them.
	checkSequences(t, addr, topic, 25, p1.Producer(), p2.Producer())
	if got := p2.count(topic, outcomeReplayed); got != 30 {
		t.Errorf("replayed = %d; want 30", got)
	}
}

func TestFlush(t *testing.T) {
	const topic = "flush"
	spoolDir := t.TempDir()
	down, _ := closedAddr(t)
	p1 := newPublisher(t, Config{Brokers: []string{down}, SpoolDir: spoolDir, WriteTimeout: time.Second})
	publishRange(t, p1, topic, 0, 10)
	if err := p1.Flush(context.Background()); err == nil {
		t.Errorf("Flush with the broker down = nil; want error")
	}
	if err := p1.Close(); err != nil {
		t.Fatal(err)
	}

	c := startCluster(t, topic)
	addr := c.ListenAddrs()[0]
	p2 := newPublisher(t, Config{Brokers: []string{addr}, SpoolDir: spoolDir})
	if err := p2.Flush(context.Background()); err != nil {
		t.Fatalf("Flush() = %v", err)
	}
	checkDelivered(t, addr, topic, 10)
}

func TestSpoolFull(t *testing.T) {
	const topic = "full"
	down, _ := closedAddr(t)
	p := newPublisher(t, Config{Brokers: []string{down}, SpoolDir: t.TempDir(), SpoolMaxBytes: 750})
	// The clock is also read by the publisher's background probe.
	var now atomic.Pointer[time.Time]
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now.Store(&start)
	p.now = func() time.Time { return *now.Load() }

	value := bytes.Repeat([]byte("x"), 100)
	publish := func() error { return p.Publish(context.Background(), topic, []byte("host-0"), value) }
	accepted := 0
	for publish() == nil {
		accepted++
		if accepted > 10 {
			t.Fatal("spool of 750 bytes took more than 10 messages of 100 bytes")
		}
	}
	if accepted != 4 {
		t.Errorf("accepted %d messages of 186 bytes (with headers) into a 750-byte spool; want 4", accepted)
	}
	for range 4 {
		if err := publish(); !errors.Is(err, spool.ErrFull) {
			t.Fatalf("Publish into a full spool = %v; want an error wrapping spool.ErrFull", err)
		}
	}
	if got := p.count(topic, outcomeDropped); got != 5 {
		t.Errorf("dropped = %d; want 5", got)
	}
	if got := p.logs.count("spool full, dropping messages"); got != 1 {
		t.Errorf("%d drop logs within 10s; want 1", got)
	}
	later := start.Add(dropLogInterval)
	now.Store(&later)
	_ = publish()
	if got := p.logs.count("spool full, dropping messages"); got != 2 {
		t.Errorf("%d drop logs after 10s; want 2", got)
	}
	if !strings.Contains(p.logs.buf.String(), "dropped=5") {
		t.Errorf("second drop log does not report the 5 drops since the first")
	}
	if got := testutil.ToFloat64(p.m.spoolMessages); got != 4 {
		t.Errorf("spool messages gauge = %v; want 4", got)
	}
}

func TestMetricsLint(t *testing.T) {
	down, _ := closedAddr(t)
	p := newPublisher(t, Config{Brokers: []string{down}, SpoolDir: t.TempDir()})
	publishRange(t, p, "lint", 0, 1)
	problems, err := testutil.GatherAndLint(p.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("metric %s: %s", pr.Metric, pr.Text)
	}
	n, err := testutil.GatherAndCount(p.reg)
	// messages{lint,spooled}, write errors, rotations, spool bytes, spool
	// messages, spool corrupt records, spool discarded bytes, spool lost
	// messages, spool errors{read,commit}
	if err != nil || n != 10 {
		t.Errorf("GatherAndCount() = %d, %v; want 10 series", n, err)
	}
	for name, want := range map[string]int{
		"heliostat_publisher_spool_corrupt_records_total": 1,
		"heliostat_publisher_spool_discarded_bytes_total": 1,
		"heliostat_publisher_spool_lost_messages_total":   1,
		"heliostat_publisher_spool_errors_total":          2,
	} {
		if n, err := testutil.GatherAndCount(p.reg, name); err != nil || n != want {
			t.Errorf("GatherAndCount(%s) = %d, %v; want %d", name, n, err, want)
		}
	}
}

func TestPermanent(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{kafka.MessageSizeTooLarge, true},
		{fmt.Errorf("wrapped: %w", kafka.InvalidTopic), true},
		{kafka.MessageTooLargeError{}, true},
		{kafka.NotLeaderForPartition, false},
		{kafka.LeaderNotAvailable, false},
		{context.DeadlineExceeded, false},
		{errors.New("dial tcp: connection refused"), false},
		{kafka.WriteErrors{nil, kafka.MessageSizeTooLarge}, true},
		{fmt.Errorf("wrapped: %w", kafka.WriteErrors{kafka.MessageSizeTooLarge}), true},
		{kafka.WriteErrors{kafka.MessageSizeTooLarge, kafka.NotLeaderForPartition}, false},
		{kafka.WriteErrors{nil}, false},
	}
	for _, tt := range tests {
		if got := permanent(tt.err); got != tt.want {
			t.Errorf("permanent(%v) = %v; want %v", tt.err, got, tt.want)
		}
	}
}

func TestNewRegistersOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, err := New(Config{SpoolDir: t.TempDir()}, nil, reg)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	defer p.Close()
	// A second publisher on the same registry is refused, and leaves no
	// spool lock behind.
	dir := t.TempDir()
	if p2, err := New(Config{SpoolDir: dir}, nil, reg); err == nil {
		_ = p2.Close()
		t.Fatalf("second New() on the same registry = nil error; want a registration error")
	}
	p3, err := New(Config{SpoolDir: dir}, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("New() after a failed New on the same spool = %v", err)
	}
	_ = p3.Close()
}

// TestRejected checks that a message the broker refuses for good is dropped,
// directly and from the spool, without blocking the messages behind it.
func TestRejected(t *testing.T) {
	const topic = "rejected"
	big := bytes.Repeat([]byte("x"), 4000)
	addr, port := closedAddr(t)
	p := newPublisher(t, Config{Brokers: []string{addr}, SpoolDir: t.TempDir(), WriteTimeout: 2 * time.Second})

	// Spooled while the broker is down: 0, the big one, 1, 2.
	publishRange(t, p, topic, 0, 1)
	if err := p.Publish(context.Background(), topic, key(0), big); err != nil {
		t.Fatalf("Publish(big, broker down) = %v; want nil (spooled)", err)
	}
	publishRange(t, p, topic, 1, 3)

	startCluster(t, topic, kfake.Ports(port), kfake.BrokerConfigs(map[string]string{"message.max.bytes": "2000"}))
	p.run(t)
	waitFor(t, "spool to drain", func() bool { return p.spool.Len() == 0 })
	if got := p.count(topic, outcomeDropped); got != 1 {
		t.Errorf("dropped = %d; want 1", got)
	}

	// Directly: the error is returned, nothing is spooled.
	if err := p.Publish(context.Background(), topic, key(0), big); err == nil || !permanent(err) {
		t.Errorf("Publish(big) = %v; want a permanent error", err)
	}
	if got := p.count(topic, outcomeDropped); got != 2 {
		t.Errorf("dropped = %d; want 2", got)
	}
	publishRange(t, p, topic, 3, 6)
	if got := p.count(topic, outcomeSent); got != 3 {
		t.Errorf("sent = %d; want 3", got)
	}
	checkDelivered(t, addr, topic, 6)
}

func TestProducerRotatesAtKeyBound(t *testing.T) {
	const topic = "rotate"
	c := startCluster(t, topic)
	addr := c.ListenAddrs()[0]
	p := newPublisher(t, Config{Brokers: []string{addr}, SpoolDir: t.TempDir(), SequenceKeys: 2})
	first := p.Producer()

	// The third key ("c") exceeds the bound: a new id numbers it and every
	// key after it from 1 again.
	keys := []string{"a", "a", "b", "a", "c", "c", "a"}
	for i, k := range keys {
		if err := p.Publish(context.Background(), topic, []byte(k), []byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("Publish(message %d) = %v", i, err)
		}
	}
	second := p.Producer()
	if second == first {
		t.Fatalf("Producer() = %q after the bound; want a new id", second)
	}
	if got := testutil.ToFloat64(p.m.rotations); got != 1 {
		t.Errorf("rotations = %v; want 1", got)
	}
	want := map[string][]delivered{
		"a": {{0, schemas.Sequence{Producer: first, Seq: 1}}, {1, schemas.Sequence{Producer: first, Seq: 2}},
			{3, schemas.Sequence{Producer: first, Seq: 3}}, {6, schemas.Sequence{Producer: second, Seq: 1}}},
		"b": {{2, schemas.Sequence{Producer: first, Seq: 1}}},
		"c": {{4, schemas.Sequence{Producer: second, Seq: 1}}, {5, schemas.Sequence{Producer: second, Seq: 2}}},
	}
	got := readAll(t, addr, topic)
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("key %s: %+v; want %+v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("keys = %d; want %d", len(got), len(want))
	}
}

// spoolSegment returns the path of the spool's only segment file.
func spoolSegment(t *testing.T, dir string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segment files in %s = %q, %v; want one", dir, segs, err)
	}
	return segs[0]
}

// TestReplayAfterSpoolDamage damages the spool of a running publisher while
// the broker is down, then starts the broker: replay skips what the disk
// lost and counts it, or pauses while the spool fails and goes on once it
// works, and Run keeps running throughout.
func TestReplayAfterSpoolDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		// op is the spool operation that fails until undo, "" if none.
		op   string
		undo func(t *testing.T, dir string)
		want []int // of the 20 messages spooled
		lost float64
	}{
		{
			name:   "segment deleted",
			damage: func(t *testing.T, dir string) { mustRemove(t, spoolSegment(t, dir)) },
			lost:   20,
		},
		{
			name: "length damaged",
			damage: func(t *testing.T, dir string) {
				p := spoolSegment(t, dir)
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				off := 0
				for range 10 {
					off += 8 + int(binary.BigEndian.Uint32(b[off:]))
				}
				copy(b[off:], []byte{0xff, 0xff, 0xff, 0xff})
				if err := os.WriteFile(p, b, 0o640); err != nil {
					t.Fatal(err)
				}
			},
			want: valueRange(0, 10),
			lost: 10,
		},
		{
			// A directory in the segment's place fails reads as EIO
			// would.
			name: "segment unreadable for a while",
			damage: func(t *testing.T, dir string) {
				p := spoolSegment(t, dir)
				if err := os.Rename(p, filepath.Join(dir, "aside")); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(p, 0o750); err != nil {
					t.Fatal(err)
				}
			},
			op: opRead,
			undo: func(t *testing.T, dir string) {
				p := strings.TrimSuffix(spoolSegment(t, dir), "/")
				mustRemove(t, p)
				if err := os.Rename(filepath.Join(dir, "aside"), p); err != nil {
					t.Fatal(err)
				}
			},
			want: valueRange(0, 20),
		},
		{
			// The spool drained: the next segment cannot be created,
			// so the commit cannot finish.
			name: "commit cannot finish for a while",
			damage: func(t *testing.T, dir string) {
				if err := os.Mkdir(nextSegment(t, dir), 0o750); err != nil {
					t.Fatal(err)
				}
			},
			op:   opCommit,
			undo: func(t *testing.T, dir string) { mustRemove(t, nextSegment(t, dir)) },
			want: valueRange(0, 20),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := strings.ReplaceAll(tt.name, " ", "-")
			addr, port := closedAddr(t)
			dir := t.TempDir()
			p := newPublisher(t, Config{Brokers: []string{addr}, SpoolDir: dir, WriteTimeout: 2 * time.Second})
			publishRange(t, p, topic, 0, 20)
			tt.damage(t, dir)
			startCluster(t, topic, kfake.Ports(port))
			p.run(t)

			if tt.op != "" {
				failures := func() float64 { return testutil.ToFloat64(p.m.spoolErrors.WithLabelValues(tt.op)) }
				waitFor(t, "the spool to fail twice", func() bool { return failures() >= 2 })
				if err := p.Ready(); err == nil || !strings.Contains(err.Error(), "spool: failing for") || !strings.Contains(err.Error(), "replay paused") {
					t.Errorf("Ready() while the spool fails = %v; want the spool failing, replay paused", err)
				}
				if got := p.logs.count("spool failed, replay paused and retried"); got != 1 {
					t.Errorf("%d logs of the spool failing within a minute; want 1", got)
				}
				tt.undo(t, dir)
			}
			waitFor(t, "spool to drain and Ready() to be nil", func() bool { return p.spool.Len() == 0 && p.Ready() == nil })
			// Where no replay wrote to the broker yet, kafka-go may still
			// hold its failed dial and spool these: wait for them too.
			publishRange(t, p, topic, 20, 25)
			waitFor(t, "spool to drain", func() bool { return p.spool.Len() == 0 })
			checkValues(t, addr, topic, append(tt.want, valueRange(20, 25)...))
			if got := testutil.ToFloat64(p.m.spoolLost); got != tt.lost {
				t.Errorf("heliostat_publisher_spool_lost_messages_total = %v; want %v", got, tt.lost)
			}
			if tt.lost > 0 && p.logs.count("spool segment unreadable, skipping the rest of it; its messages are lost") != 1 {
				t.Errorf("the loss was not logged once")
			}
			if tt.op != "" && p.logs.count("spool works again, replay goes on") != 1 {
				t.Errorf("the spool working again was not logged once")
			}
		})
	}
}

// nextSegment returns the path of the segment the spool in dir starts when
// its only one drained.
func nextSegment(t *testing.T, dir string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segment files in %s = %q, %v", dir, segs, err)
	}
	slices.Sort(segs)
	seq, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(segs[0]), ".seg"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, fmt.Sprintf("%020d.seg", seq+1))
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// TestPublishRetriedSpoolFull: a message the spool refuses keeps its number
// when the caller drops it (Publish: ingest counts the gap as a lost
// message) and gives it back when the caller sends it again (PublishRetried:
// no gap for a message that is not lost), whether the spool reached its
// bound (spool.ErrFull) or its disk is full (ENOSPC, each logged as such).
// Before, a message refused by a full disk used up a number at every retry,
// and ingest counted each as a message lost. Only where the failed write may
// have stayed on disk (spool.ErrTorn), to be replayed under its number by
// the next start, does the message keep its number all the same.
func TestPublishRetriedSpoolFull(t *testing.T) {
	const topic = "full"
	value := bytes.Repeat([]byte("x"), 100)
	for _, tc := range []struct {
		name     string
		dir      func(t *testing.T) string
		maxBytes int64
		refused  error  // what every refusal wraps
		log      string // the refusals' log line
		kept     bool   // every refused message keeps its number
	}{
		{"spool at its bound", func(t *testing.T) string { return t.TempDir() }, 750, spool.ErrFull, "spool full, dropping messages", false},
		{"disk full", func(t *testing.T) string { return tmpfs.Mount(t, 16<<10) }, 1 << 30, syscall.ENOSPC, "spool disk full, dropping messages", false},
		{"failed write not cut off", devFullSpool, 1 << 30, spool.ErrTorn, "spool disk full, dropping messages", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			down, _ := closedAddr(t)
			p := newPublisher(t, Config{Brokers: []string{down}, SpoolDir: tc.dir(t), SpoolMaxBytes: tc.maxBytes})
			last := func() uint64 {
				p.mu.Lock()
				defer p.mu.Unlock()
				return p.seqs[topic+"\x00host-0"]
			}
			accepted := uint64(0)
			for {
				err := p.PublishRetried(context.Background(), topic, []byte("host-0"), value)
				if err != nil {
					if !errors.Is(err, tc.refused) {
						t.Fatalf("PublishRetried(message %d) = %v; want nil or an error wrapping %v", accepted+1, err, tc.refused)
					}
					break
				}
				if accepted++; accepted > 1000 {
					t.Fatal("the spool took 1000 messages without refusing one")
				}
			}
			// A refused message keeps its number where the caller drops
			// it (Publish), and where the write may be on disk.
			want := accepted
			if tc.kept {
				want++
			}
			if got := last(); got != want {
				t.Errorf("first refusal: last number given = %d; want %d", got, want)
			}
			for _, st := range []struct {
				name    string
				retried bool
			}{
				{"PublishRetried refused again", true},
				{"Publish refused", false},
				{"PublishRetried refused after a drop", true},
			} {
				publish := p.Publish
				if st.retried {
					publish = p.PublishRetried
				}
				if err := publish(context.Background(), topic, []byte("host-0"), value); !errors.Is(err, tc.refused) {
					t.Fatalf("%s: error = %v; want an error wrapping %v", st.name, err, tc.refused)
				}
				if !st.retried || tc.kept {
					want++
				}
				if got := last(); got != want {
					t.Errorf("%s: last number given = %d; want %d", st.name, got, want)
				}
			}
			if got := p.count(topic, outcomeDropped); got != 4 {
				t.Errorf("dropped = %d; want 4 (a refused message is counted either way)", got)
			}
			if got := p.logs.count(tc.log); got != 1 {
				t.Errorf("%d logs %q within %v; want 1", got, tc.log, dropLogInterval)
			}
			// A key whose first message is refused and gives its number
			// back is numbered from 1 again.
			if err := p.PublishRetried(context.Background(), topic, []byte("host-9"), value); !errors.Is(err, tc.refused) {
				t.Fatalf("PublishRetried(host-9) = %v; want an error wrapping %v", err, tc.refused)
			}
			p.mu.Lock()
			_, numbered := p.seqs[topic+"\x00host-9"]
			p.mu.Unlock()
			if numbered != tc.kept {
				t.Errorf("host-9 holds a number after its only message was refused: %v; want %v", numbered, tc.kept)
			}
		})
	}
}

// devFullSpool returns a spool directory whose segments are /dev/full,
// which refuses every write (ENOSPC) and cannot be truncated: a failed
// append that cannot be cut off (spool.ErrTorn). The spool starts a new
// segment after each such append; the first 64 are /dev/full too.
func devFullSpool(t *testing.T) string {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full here (%v); test skipped", err)
	}
	dir := t.TempDir()
	// A new spool appends to segment 1.
	for seq := 1; seq <= 64; seq++ {
		if err := os.Symlink("/dev/full", filepath.Join(dir, fmt.Sprintf("%020d.seg", seq))); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
