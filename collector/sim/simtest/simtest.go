// Package simtest runs, for tests, the path of `heliostat up`'s simulated
// cluster: a publisher, a Kafka-protocol broker (kfake), ingest and a
// ClickHouse database of the test's own.
package simtest

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/collector/publish"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// Pipeline is the running path. Ingest can be stopped and started again.
type Pipeline struct {
	CH     chconn.Config
	Conn   driver.Conn
	DB     string
	Broker string
	Group  string // ingest's consumer group
	Pub    *publish.Publisher
	Logger *slog.Logger
	stop   func() // stops ingest; nil while it is stopped
}

// New starts the path, ingest running; everything stops when t ends.
func New(t testing.TB) *Pipeline {
	t.Helper()
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	ctx := context.Background()
	if err := ingest.EnsureTopics(ctx, []string{broker}, 2, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pub, err := publish.New(publish.Config{Brokers: []string{broker}, SpoolDir: t.TempDir()}, logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	pubCtx, stopPub := context.WithCancel(ctx)
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.Run(pubCtx) }()
	p := &Pipeline{CH: ch, Conn: conn, DB: ch.Database, Broker: broker, Group: "g-" + ch.Database, Pub: pub, Logger: logger}
	t.Cleanup(func() {
		p.StopIngest(t)
		stopPub()
		if err := <-pubDone; err != nil {
			t.Errorf("publisher Run: %v", err)
		}
		if err := pub.Close(); err != nil {
			t.Errorf("publisher Close: %v", err)
		}
	})
	p.StartIngest(t)
	return p
}

// StartIngest starts ingest (after StopIngest).
func (p *Pipeline) StartIngest(t testing.TB) {
	t.Helper()
	in, err := ingest.New(ingest.Config{Brokers: []string{p.Broker}, Group: p.Group, ClickHouse: p.CH,
		BatchRows: 50_000, BatchInterval: 200 * time.Millisecond, SessionTimeout: time.Second}, p.Conn, p.Logger, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	p.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ingest Run: %v", err)
		}
	}
}

// StopIngest stops ingest, which commits what it wrote.
func (p *Pipeline) StopIngest(t testing.TB) {
	t.Helper()
	if p.stop != nil {
		p.stop()
		p.stop = nil
	}
}

// Flush delivers what was published to the broker.
func (p *Pipeline) Flush(t testing.TB) {
	t.Helper()
	if err := p.Pub.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// WaitFor waits up to a minute until query (a count) gives want.
func (p *Pipeline) WaitFor(t testing.TB, what, query string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var n uint64
	for time.Now().Before(deadline) {
		if err := p.Conn.QueryRow(context.Background(), query).Scan(&n); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n == want {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: %d; want %d", what, n, want)
}

// Job is a job as ClickHouse's jobs table has it, times in seconds after
// a test's t0 (-1: NULL).
type Job struct {
	State      string
	Start, End int64
}

// Jobs returns cluster's jobs (jobs FINAL) by job ID.
func (p *Pipeline) Jobs(t testing.TB, cluster string, t0 time.Time) map[string]Job {
	t.Helper()
	rows, err := p.Conn.Query(context.Background(), `SELECT job_id, state, ifNull(toInt64(start_time), -1), ifNull(toInt64(end_time), -1)
		FROM `+p.DB+`.jobs FINAL WHERE cluster = ?`, cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]Job{}
	for rows.Next() {
		var id string
		var j Job
		if err := rows.Scan(&id, &j.State, &j.Start, &j.End); err != nil {
			t.Fatal(err)
		}
		for _, v := range []*int64{&j.Start, &j.End} {
			if *v >= 0 {
				*v -= t0.Unix()
			}
		}
		out[id] = j
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
