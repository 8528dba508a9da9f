package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/collector/synthetic"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// childEnv makes the test binary run `heliostat` with the JSON-encoded
// arguments instead of the tests, as main does (signals, exit status), so
// that the crash test can SIGKILL a real, separate ingest process.
const childEnv = "HELIOSTAT_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if os.Getenv(slowStopEnv) != "" {
		slowStopChild()
	}
	if args := os.Getenv(childEnv); args != "" {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			fmt.Fprintln(os.Stderr, "bad", childEnv, err)
			os.Exit(2)
		}
		os.Exit(cli(argv, os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(schematest.Main(m))
}

// childCommand returns the command that runs `heliostat args…` in a child
// process (see childEnv), not started.
func childCommand(args ...string) *exec.Cmd {
	b, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(b))
	return cmd
}

func startChild(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := childCommand(args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ingest process: %v", err)
	}
	return cmd
}

func countRows(t *testing.T, conn driver.Conn, db string) (total, distinct uint64) {
	t.Helper()
	if err := conn.QueryRow(context.Background(), "SELECT count(), uniqExact(host, gpu_uuid, ts, ts_millis) FROM "+db+".gpu_samples").Scan(&total, &distinct); err != nil {
		t.Fatalf("count rows: %v", err)
	}
	return total, distinct
}

// TestIngestSurvivesSIGKILL streams 1,000,000 samples, with copies of some
// messages among them, while an ingest process is SIGKILLed again and again,
// at random moments, then lets a last one finish: ClickHouse must hold every
// sample exactly once.
func TestIngestSurvivesSIGKILL(t *testing.T) {
	schematest.SkipOnCHDB(t, "a million rows through ingest processes killed ten times")
	if testing.Short() {
		t.Skip("crash test streams a million samples; skipped with -short")
	}
	// Parallel, like the package's other two longest tests
	// (TestAlertsOnFaults, TestBacktestAccuracyFloors): the three run beside
	// each other once the other tests are done. This one mostly waits on
	// ingest and its restarts.
	t.Parallel()
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(4, schemas.DataTopics()...))

	const (
		hosts  = 125
		gpus   = 8
		ticks  = 10
		msgs   = 12_500 // × 80 samples = 1,000,000
		chunks = 50
	)
	want := uint64(msgs * gpus * ticks)

	// The producer streams the samples over about 6 s while kills go on.
	produced := make(chan error, 1)
	go func() {
		w := &kafka.Writer{Addr: kafka.TCP(broker), Topic: schemas.TopicGPUSamples, Balancer: &kafka.Hash{},
			RequiredAcks: kafka.RequireAll, BatchSize: 250, BatchTimeout: 2 * time.Millisecond}
		defer w.Close()
		srcs := make([]*synthetic.Source, hosts)
		for h := range srcs {
			srcs[h] = synthetic.New(fmt.Sprintf("node%03d", h), gpus, uint64(h))
		}
		// Ten minutes before today's midnight: the stream crosses into a new day
		// partition, and stays within the default retention.
		start := time.Now().UTC().Truncate(24 * time.Hour).Add(-10 * time.Minute)
		for c := range chunks {
			var batch []kafka.Message
			for i := c * msgs / chunks; i < (c+1)*msgs/chunks; i++ {
				h := i % hosts
				b := schemas.SampleBatch{Cluster: "crash", Host: fmt.Sprintf("node%03d", h)}
				for k := range ticks {
					at := start.Add(time.Duration((i/hosts)*ticks+k) * time.Second)
					_ = srcs[h].Collect(context.Background(), at, &b)
				}
				v, err := schemas.AppendSampleBatch(nil, &b)
				if err != nil {
					produced <- err
					return
				}
				// Numbered as the collector numbers its messages (per host,
				// from 1), so the kills also hit ingest's sequence marks.
				seq := schemas.Sequence{Producer: "crash", Seq: uint64(i/hosts + 1)}
				batch = append(batch, kafka.Message{Key: []byte(b.Host), Value: v, Headers: []kafka.Header{
					{Key: schemas.HeaderProducer, Value: []byte(seq.Producer)}, {Key: schemas.HeaderSequence, Value: seq.FormatSeq()}}})
			}
			// Copies of the chunk's last messages, as a collector that
			// timed out or replayed its spool sends them: stored once.
			batch = append(batch, batch[len(batch)-20:]...)
			if err := w.WriteMessages(context.Background(), batch...); err != nil {
				produced <- err
				return
			}
			// The stream lasts about 6 s, past the first kill (at most 4 s
			// in): at least that kill lands while messages are still to
			// come, however fast ingest keeps up (at 40 ms a chunk, a run
			// had stored all of them by the first kill).
			time.Sleep(120 * time.Millisecond)
		}
		produced <- nil
	}()

	args := []string{"ingest", "--kafka.brokers", broker, "--clickhouse.addr", ch.Addr, "--clickhouse.database", ch.Database,
		"--ingest.group", "crash", "--ingest.batch-rows", "40000", "--ingest.batch-interval", "100ms",
		"--kafka.session-timeout", "3s", "--web.listen-address", "127.0.0.1:0", "--log.level", childLogLevel()}
	rng := rand.New(rand.NewPCG(1, 2))
	kills, midway := 0, 0
	for kills < 10 {
		child := startChild(t, args...)
		time.Sleep(time.Duration(1000+rng.IntN(3000)) * time.Millisecond)
		if err := child.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill: %v", err)
		}
		_ = child.Wait()
		kills++
		n, _ := countRows(t, conn, ch.Database)
		t.Logf("kill %d: %d of %d rows in ClickHouse", kills, n, want)
		if n > 0 && n < want {
			midway++
		}
		if n >= want {
			break
		}
	}
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	if midway < 3 {
		t.Errorf("only %d kills hit a run in progress; the test did not exercise crashes", midway)
	}

	// kfake (the in-process broker) keeps a member forever when it is killed
	// while waiting in JoinGroup and another member leads the completed
	// rebalance: its JoinGroup reply cannot be delivered, so no session timer
	// is armed, and the leader's SyncGroup clears the pending-sync timer that
	// would have removed it. A real Kafka coordinator expires such a member
	// after its session timeout. Until the dead members are gone, a new member
	// would share the partitions with a ghost that never reads them, so the
	// last process starts once the group is empty; alone, a dead member is
	// removed within two rebalance timeouts.
	waitGroupEmpty(t, broker, "crash", 30*time.Second)
	last := startChild(t, args...)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, _ := countRows(t, conn, ch.Database)
		if n >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n, _ := countRows(t, conn, ch.Database); n < want {
		// Stuck: say who holds the partitions, and let the process print its
		// goroutines before the test fails.
		t.Logf("consumer group: %s", describeGroup(broker, "crash"))
		_ = last.Process.Signal(syscall.SIGQUIT)
		_ = last.Wait()
		t.Fatalf("last ingest process stalled at %d of %d rows (goroutine dump above)", n, want)
	}
	time.Sleep(time.Second) // a duplicate would show up now
	_ = last.Process.Signal(syscall.SIGTERM)
	if err := last.Wait(); err != nil {
		t.Errorf("last ingest process did not stop cleanly on SIGTERM: %v", err)
	}
	total, distinct := countRows(t, conn, ch.Database)
	if total != want || distinct != want {
		t.Fatalf("after %d SIGKILLs ClickHouse holds %d rows, %d distinct; want %d and %d", kills, total, distinct, want, want)
	}
	t.Logf("%d SIGKILLs (%d mid-run): %d rows, exactly once", kills, midway, total)
}

// childLogLevel is the ingest processes' log level: warn, or
// $HELIOSTAT_TEST_CHILD_LOG to see what they do.
func childLogLevel() string {
	if l := os.Getenv("HELIOSTAT_TEST_CHILD_LOG"); l != "" {
		return l
	}
	return "warn"
}

// describeGroup returns the state and members of a consumer group, with the
// partitions each member holds, or the error that kept it from knowing.
func describeGroup(broker, group string) string {
	g, err := groupState(broker, group)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	b.WriteString(g.GroupState)
	for _, m := range g.Members {
		fmt.Fprintf(&b, "; member %s from %s holds", m.MemberID, m.ClientHost)
		for _, tp := range m.MemberAssignments.Topics {
			fmt.Fprintf(&b, " %s%v", tp.Topic, tp.Partitions)
		}
	}
	return b.String()
}

func groupState(broker, group string) (kafka.DescribeGroupsResponseGroup, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := &kafka.Client{Addr: kafka.TCP(broker), Timeout: 5 * time.Second}
	resp, err := c.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		return kafka.DescribeGroupsResponseGroup{}, fmt.Errorf("describe group %s: %w", group, err)
	}
	if len(resp.Groups) != 1 {
		return kafka.DescribeGroupsResponseGroup{}, fmt.Errorf("describe group %s: %d groups in the answer", group, len(resp.Groups))
	}
	g := resp.Groups[0]
	if g.Error != nil {
		return g, fmt.Errorf("describe group %s: %w", group, g.Error)
	}
	return g, nil
}

// waitGroupEmpty waits until the consumer group has no members left.
func waitGroupEmpty(t *testing.T, broker, group string, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		g, err := groupState(broker, group)
		if err == nil && len(g.Members) == 0 {
			t.Logf("consumer group %s empty after %v", group, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer group %s still has members after %v: %s", group, timeout, describeGroup(broker, group))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
