package ingest_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chserver"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func gather(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				out[key] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] += m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// refuseSamples refuses every gpu_samples INSERT while refuse is set:
// ClickHouse failing them.
type refuseSamples struct {
	driver.Conn
	refuse *atomic.Bool
}

func refusing(refuse *atomic.Bool) func(driver.Conn) driver.Conn {
	return func(c driver.Conn) driver.Conn { return refuseSamples{Conn: c, refuse: refuse} }
}

func (c refuseSamples) PrepareBatch(ctx context.Context, q string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if c.refuse.Load() && strings.Contains(q, ".gpu_samples (") {
		return nil, errors.New("test: clickhouse refuses")
	}
	return c.Conn.PrepareBatch(ctx, q, opts...)
}

// TestClickHouseOutage stops the ClickHouse server mid-stream and starts it
// again: ingest waits and retries, loses nothing and duplicates nothing.
// Then it stops it again while no data flows: the idle check's ping makes
// ingest not ready, and ready again once ClickHouse is back.
func TestClickHouseOutage(t *testing.T) {
	ch, conn := schematest.Database(t)
	server := schematest.ClickHouse(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond), kfake.SeedTopics(4, schemas.TopicGPUSamples, schemas.TopicGPUEvents, schemas.TopicDeadletter))
	start := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	want := produceSamples(t, broker, 500, 10, 8, 10, start)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	in, done := startIngester(t, ctx, broker, ch, reg, func(c *ingest.Config) { c.IdleCheck = 200 * time.Millisecond }, nil)
	deadline := time.Now().Add(30 * time.Second)
	for schematest.Count(t, conn, ch.Database+".gpu_samples") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no rows within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := in.Ready(); err != nil {
		t.Errorf("Ready() with rows landing = %v; want nil", err)
	}
	if err := server.Stop(); err != nil {
		t.Fatalf("stop ClickHouse: %v", err)
	}
	// More data arrives while ClickHouse is down.
	want += produceSamples(t, broker, 500, 10, 8, 10, start.Add(time.Hour))
	time.Sleep(3 * time.Second)
	if up := gather(t, reg, "heliostat_ingest_clickhouse_up")[""]; up != 0 {
		t.Errorf("heliostat_ingest_clickhouse_up = %v during the outage; want 0", up)
	}
	if err := in.Ready(); err == nil || !strings.Contains(err.Error(), "clickhouse: failing for") {
		t.Errorf("Ready() during the outage = %v; want clickhouse failing", err)
	}
	if err := server.Restart(context.Background()); err != nil {
		t.Fatalf("restart ClickHouse: %v", err)
	}
	waitCount(t, conn, ch.Database+".gpu_samples", uint64(want), 90*time.Second)
	if err := in.Ready(); err != nil {
		t.Errorf("Ready() once every row landed = %v; want nil", err)
	}

	// Idle: no data comes, and ClickHouse goes away.
	if err := server.Stop(); err != nil {
		t.Fatalf("stop ClickHouse: %v", err)
	}
	waitReady := func(what string, ok func(error) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for err := in.Ready(); !ok(err); err = in.Ready() {
			if time.Now().After(deadline) {
				t.Fatalf("Ready() = %v after 30s; want %s", err, what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitReady("a failed ping while idle", func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "clickhouse: failing for") && strings.Contains(err.Error(), "ping (idle for 200ms)")
	})
	if up := gather(t, reg, "heliostat_ingest_clickhouse_up")[""]; up != 0 {
		t.Errorf("heliostat_ingest_clickhouse_up = %v while idle with ClickHouse down; want 0", up)
	}
	if err := server.Restart(context.Background()); err != nil {
		t.Fatalf("restart ClickHouse: %v", err)
	}
	waitReady("nil once ClickHouse is back", func(err error) bool { return err == nil })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	assertNoDuplicates(t, conn, ch.Database)
	errs := gather(t, reg, "heliostat_ingest_errors_total")
	if n := errs["intents"] + errs["insert"] + errs["ledger"] + errs["heads"]; n == 0 {
		t.Error("no intents, insert, ledger or heads errors counted during the outage")
	}
}

// TestBrokerRestart closes the broker mid-stream and starts it again on the
// same port and data directory.
func TestBrokerRestart(t *testing.T) {
	ch, conn := schematest.Database(t)
	port, err := chserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "kafka")
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(port), kfake.GroupMinSessionTimeout(100 * time.Millisecond), kfake.DataDir(dir), kfake.AllowAutoTopicCreation(),
		kfake.SeedTopics(4, schemas.TopicGPUSamples, schemas.TopicGPUEvents, schemas.TopicDeadletter)}
	b1, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	broker := "127.0.0.1:" + strconv.Itoa(port)
	start := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	want := produceSamples(t, broker, 400, 8, 8, 10, start)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startIngest(t, ctx, broker, ch, prometheus.NewRegistry())
	deadline := time.Now().Add(30 * time.Second)
	for schematest.Count(t, conn, ch.Database+".gpu_samples") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no rows within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b1.Close()
	time.Sleep(time.Second)
	b2, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("restart broker: %v", err)
	}
	defer b2.Close()
	want += produceSamples(t, broker, 400, 8, 8, 10, start.Add(time.Hour))
	waitCount(t, conn, ch.Database+".gpu_samples", uint64(want), 90*time.Second)
	cancel()
	<-done
	assertNoDuplicates(t, conn, ch.Database)
}

// TestReplicasSplitPartitions runs two ingesters in one group: both get
// partitions and together they insert every row once.
func TestReplicasSplitPartitions(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(4, schemas.TopicGPUSamples, schemas.TopicGPUEvents, schemas.TopicDeadletter))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var regs []*prometheus.Registry
	var wg sync.WaitGroup
	for i := range 2 {
		reg := prometheus.NewRegistry()
		regs = append(regs, reg)
		c, err := ch.Open(ctx, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		in, err := ingest.New(ingest.Config{Brokers: []string{broker}, Group: "replicas", ClickHouse: ch, BatchRows: 20_000,
			BatchInterval: 100 * time.Millisecond, SessionTimeout: time.Second},
			c, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("replica", i), reg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = in.Run(ctx)
			c.Close()
		}()
	}
	// Wait until both replicas hold partitions, then produce.
	deadline := time.Now().Add(30 * time.Second)
	for {
		a0 := gather(t, regs[0], "heliostat_ingest_assigned_partitions")[""]
		a1 := gather(t, regs[1], "heliostat_ingest_assigned_partitions")[""]
		if a0 > 0 && a1 > 0 && a0+a1 >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partitions not spread across replicas: %v and %v (of topics with 4 partitions each)", a0, a1)
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := produceSamples(t, broker, 400, 16, 8, 10, time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC))
	waitCount(t, conn, ch.Database+".gpu_samples", uint64(want), 60*time.Second)
	cancel()
	wg.Wait()
	assertNoDuplicates(t, conn, ch.Database)
	for i, reg := range regs {
		if rows := gather(t, reg, "heliostat_ingest_rows_total")["gpu_samples"]; rows == 0 {
			t.Errorf("replica %d inserted no rows", i)
		}
	}
}
