// Package schematest starts the real servers that integration tests need — a
// local ClickHouse child process (or, with HELIOSTAT_TEST_CLICKHOUSE=chdb, a
// current ClickHouse in the test process) and an in-process Kafka-protocol
// broker (kfake) — and gives each test its own database with the schema
// applied.
package schematest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/internal/chlocal"
	"github.com/heliostat-dev/heliostat/internal/chserver"
	"github.com/heliostat-dev/heliostat/schemas/migrate"
)

// EnvClickHouse chooses the ClickHouse the tests run on: unset, Debian's
// clickhouse-server (18.16 on bookworm) started as a child process; "chdb",
// a current ClickHouse in the test process (chlocal, from the libchdb.so
// that $HELIOSTAT_CHDB_LIB names) reached over its HTTP interface. `make
// test` runs the packages that query ClickHouse both ways, so their SQL is
// checked on the oldest and a current release.
const EnvClickHouse = "HELIOSTAT_TEST_CLICKHOUSE"

var (
	once    sync.Once
	server  *chserver.Server
	dir     string
	startEr error

	local     *chlocal.DB
	localHTTP *http.Server
	localAddr string
)

// onCHDB reports whether the tests run on chDB (EnvClickHouse).
func onCHDB() bool { return os.Getenv(EnvClickHouse) == "chdb" }

// Main runs a test binary's tests and stops the shared ClickHouse afterwards.
// Use it from TestMain: os.Exit(schematest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if server != nil {
		_ = server.Stop()
	}
	if localHTTP != nil {
		_ = localHTTP.Close()
		local.Close()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	return code
}

// ClickHouse returns the package's shared ClickHouse server, starting it on
// first use (installing Debian's package when missing and running as root). It
// fails the test with the reason when the server cannot start.
func ClickHouse(t testing.TB) *chserver.Server {
	t.Helper()
	SkipOnCHDB(t, "a ClickHouse server process")
	once.Do(func() {
		dir, startEr = os.MkdirTemp("", "heliostat-ch-*")
		if startEr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		server, startEr = chserver.Start(ctx, chserver.Config{Dir: dir, Install: true}, slog.New(slog.DiscardHandler))
	})
	if startEr != nil {
		t.Fatalf("start ClickHouse for tests: %v", startEr)
	}
	return server
}

// SkipOnCHDB skips t in the chDB pass (EnvClickHouse), for a test that needs
// what only a server process does: the process itself (restarts, its PID),
// or queries that run at the same time, seen in system.processes or refused
// by their query id. why says what it needs.
func SkipOnCHDB(t testing.TB, why string) {
	t.Helper()
	if onCHDB() {
		t.Skipf("%s=chdb runs ClickHouse in the test process, one query at a time; this test needs %s: it runs in the pass on Debian's ClickHouse", EnvClickHouse, why)
	}
}

// Config returns the settings that reach the tests' ClickHouse, whichever
// it is (EnvClickHouse), starting it on first use; Database is left empty.
func Config(t testing.TB) chconn.Config {
	t.Helper()
	if onCHDB() {
		return chconn.Config{Addr: chdb(t), Protocol: "http", Compression: "none"}
	}
	return chconn.Config{Addr: ClickHouse(t).Addr()}
}

// chdb returns the address of the test binary's chDB engine's HTTP
// interface, starting it on first use.
func chdb(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		lib := os.Getenv(chlocal.EnvLib)
		if lib == "" {
			startEr = fmt.Errorf("%s=chdb but $%s (the path of libchdb.so) is not set; `make test` fetches it", EnvClickHouse, chlocal.EnvLib)
			return
		}
		if dir, startEr = os.MkdirTemp("", "heliostat-chdb-*"); startEr != nil {
			return
		}
		if local, startEr = chlocal.Open(lib, filepath.Join(dir, "data")); startEr != nil {
			return
		}
		var ln net.Listener
		if ln, startEr = net.Listen("tcp", "127.0.0.1:0"); startEr != nil {
			local.Close()
			return
		}
		localAddr = ln.Addr().String()
		localHTTP = &http.Server{Handler: chlocal.NewHandler(local, dir, slog.New(slog.DiscardHandler)), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = localHTTP.Serve(ln) }()
	})
	if startEr != nil {
		t.Fatalf("start chDB for tests: %v", startEr)
	}
	return localAddr
}

// Database creates a fresh database on the shared server, applies the
// migrations, and drops it when the test ends. It returns the connection
// settings and an open connection.
func Database(t testing.TB) (chconn.Config, driver.Conn) {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	cfg := Config(t)
	cfg.Database = fmt.Sprintf("t_%s_%s", name, hex.EncodeToString(b[:]))
	ctx := context.Background()
	conn, err := cfg.Open(ctx, func(string) string { return "" })
	if err != nil {
		t.Fatalf("connect to test ClickHouse: %v", err)
	}
	if _, err := migrate.Apply(ctx, conn, cfg.Database, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("apply migrations: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+cfg.Database)
		conn.Close()
	})
	return cfg, conn
}

// Broker starts an in-process Kafka-protocol broker for the test and returns
// its address. opts are added to the defaults (one broker, topic
// auto-creation).
func Broker(t testing.TB, opts ...kfake.Opt) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatalf("start kfake broker: %v", err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()[0]
}

// ReadPartition reads every message of one partition of topic, from its first
// offset to its end when called.
func ReadPartition(t testing.TB, addr, topic string, partition int) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(addr)}
	res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{topic: {kafka.FirstOffsetOf(partition), kafka.LastOffsetOf(partition)}},
	})
	if err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	var po kafka.PartitionOffsets
	for _, p := range res.Topics[topic] {
		if p.Partition == partition {
			po = p
		}
	}
	if po.Error != nil {
		t.Fatalf("list offsets of %s/%d: %v", topic, partition, po.Error)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: partition, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	if err := r.SetOffset(po.FirstOffset); err != nil {
		t.Fatalf("seek %s/%d to %d: %v", topic, partition, po.FirstOffset, err)
	}
	var msgs []kafka.Message
	for range po.LastOffset - po.FirstOffset {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %s/%d: %v", topic, partition, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// Count returns SELECT count() of a query's FROM clause, e.g.
// Count(t, conn, "db.gpu_samples").
func Count(t testing.TB, conn driver.Conn, from string) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), "SELECT count() FROM "+from).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", from, err)
	}
	return n
}

// FillJobs inserts n synthetic jobs straight into db.jobs (not through
// job_events), submitted one every span/n so that the last is submitted at
// last: for each a SUBMIT row and, two hours after the submit, the END row of
// a completed run that started a minute after it; user u0..u499, partition
// "gpu", 1-8 GPUs, cluster "c1", job ids "0".."n-1", each row stamped
// (inserted_at) at its event time. Benchmarks use it to give queries a large
// table.
func FillJobs(t testing.TB, conn driver.Conn, db string, n int, span time.Duration, last time.Time) {
	t.Helper()
	step := int64(span/time.Second) / int64(n)
	base := last.Unix() - int64(n-1)*step
	for _, ev := range []struct {
		kind, state string
		offset      int64 // event time after submit
		version     int   // the JOB event order: SUBMIT 1, END 4
	}{{"SUBMIT", "PENDING", 0, 1}, {"END", "COMPLETED", 7200, 4}} {
		at := fmt.Sprintf("toDateTime(%d + number * %d + %d)", base, step, ev.offset)
		start, end := "NULL", "NULL"
		if ev.kind == "END" {
			start, end = fmt.Sprintf("toDateTime(%d + number * %d + 60)", base, step), at
		}
		q := fmt.Sprintf(`INSERT INTO %s.jobs (cluster, job_id, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version)
SELECT 'c1', toString(number), concat('u', toString(number %% 500)), 'gpu', '%s', toDateTime(%d + number * %d), %s, %s,
  toUInt32(1 + number %% 8), '%s', %s, %s, toUInt64(%d + number * %d + %d) * 8 + %d
FROM system.numbers LIMIT %d`, db, ev.state, base, step, start, end, ev.kind, at, at, base, step, ev.offset, ev.version, n)
		if err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("fill %s.jobs: %v", db, err)
		}
	}
}

// InsertJobRows writes rows straight into db's jobs and job_runs (not
// through job_events and their views), the same rows to both, each row the
// values of columns: a test that seeds one row per job gives each job one
// run. The analytics and the panels of GPUs held and wanted read job_runs;
// the predictor and the job listings read jobs.
func InsertJobRows(tb testing.TB, conn driver.Conn, db, columns string, rows ...[]any) {
	tb.Helper()
	ctx := context.Background()
	for _, table := range []string{"jobs", "job_runs"} {
		b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+"."+table+" ("+columns+")")
		if err != nil {
			tb.Fatalf("insert into %s.%s: %v", db, table, err)
		}
		for _, r := range rows {
			if err := b.Append(r...); err != nil {
				tb.Fatalf("insert into %s.%s: %v", db, table, err)
			}
		}
		if err := b.Send(); err != nil {
			tb.Fatalf("insert into %s.%s: %v", db, table, err)
		}
	}
}
