package chlocal

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// shared is the test binary's one engine (chDB allows one per process).
type shared struct {
	once sync.Once
	db   *DB
	err  error
}

var engine shared

func open(t *testing.T) (*DB, *httptest.Server) {
	t.Helper()
	lib := os.Getenv(EnvLib)
	if lib == "" {
		t.Skipf("$%s is not set: `make test` fetches libchdb.so and sets it", EnvLib)
	}
	engine.once.Do(func() {
		dir, err := os.MkdirTemp("", "chlocal-test-*")
		if err != nil {
			engine.err = err
			return
		}
		engine.db, engine.err = Open(lib, dir)
	})
	if engine.err != nil {
		t.Fatal(engine.err)
	}
	srv := httptest.NewServer(NewHandler(engine.db, t.TempDir(), slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return engine.db, srv
}

func connect(t *testing.T, addr string) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Protocol: clickhouse.HTTP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.Ping(context.Background()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	return conn
}

func TestHTTPRoundTrip(t *testing.T) {
	_, srv := open(t)
	conn := connect(t, strings.TrimPrefix(srv.URL, "http://"))
	ctx := context.Background()
	v, err := conn.ServerVersion()
	if err != nil || v.Version.Major < 24 {
		t.Fatalf("server version %v, %v: want a current ClickHouse", v, err)
	}
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS rt",
		"CREATE TABLE rt.t (a UInt32, b Nullable(String), c DateTime, d Array(String), e Float64, f UInt8, g UInt16, h Int64, i String, j UInt64) ENGINE = MergeTree ORDER BY a",
	} {
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	at := time.Date(2026, 11, 25, 1, 2, 3, 0, time.UTC)
	b, err := conn.PrepareBatch(ctx, "INSERT INTO rt.t (a, b, c, d, e, f, g, h, i, j)")
	if err != nil {
		t.Fatal(err)
	}
	s := "x"
	for i := range 3 {
		var bp *string
		if i != 1 {
			bp = &s
		}
		if err := b.Append(uint32(i), bp, at, []string{"p", "q"}, 1.5, uint8(1), uint16(2), int64(-3), "y", uint64(4)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatalf("send: %v", err)
	}
	var (
		n     uint64
		nulls uint64
		last  time.Time
	)
	if err := conn.QueryRow(ctx, "SELECT count(), countIf(b IS NULL), max(c) FROM rt.t WHERE a < ?", 10).Scan(&n, &nulls, &last); err != nil {
		t.Fatal(err)
	}
	if n != 3 || nulls != 1 || !last.Equal(at) {
		t.Fatalf("count %d, nulls %d, max %v: want 3, 1, %v", n, nulls, last, at)
	}
	if err := conn.Exec(ctx, "SELECT no_such_column FROM rt.t"); err == nil || !strings.Contains(err.Error(), "no_such_column") {
		t.Fatalf("bad column: err %v, want ClickHouse's exception naming it", err)
	}
}

// TestHandlerRequests checks the interface's edges on plain requests:
// settings hold for their statement alone, an exception is a 500 with its
// code, and what the handler does not implement is refused, not ignored.
func TestHandlerRequests(t *testing.T) {
	_, srv := open(t)
	for _, tc := range []struct {
		name   string
		params url.Values
		body   string
		status int
		want   string // the body, or a substring of it for errors
		code   string // X-ClickHouse-Exception-Code
	}{
		{"setting applied", url.Values{"max_threads": {"3"}}, "SELECT getSetting('max_threads')", 200, "3\n", ""},
		{"setting reset after", url.Values{"max_threads": {"4"}, "query": {"SELECT getSetting('max_threads') = 4"}}, "", 200, "1\n", ""},
		{"then the default again", nil, "SELECT getSetting('max_threads') IN (3, 4)", 200, "0\n", ""},
		{"statement in the query parameter", url.Values{"query": {"SELECT 2 + 2"}}, "", 200, "4\n", ""},
		{"exception", nil, "SELECT no_such_function()", 500, "no_such_function", "46"},
		{"empty", nil, "", 500, "Empty query", "62"},
		{"compressed response", url.Values{"compress": {"1"}}, "SELECT 1", 400, "compressed responses", ""},
		{"query parameter", url.Values{"param_x": {"1"}}, "SELECT {x:UInt8}", 400, "param_x", ""},
		{"bad setting name", url.Values{"max threads": {"1"}}, "SELECT 1", 400, "not a setting name", ""},
		{"unknown setting", url.Values{"no_such_setting": {"1"}}, "SELECT 1", 500, "no_such_setting", "115"},
	} {
		res, err := http.Post(srv.URL+"/?"+tc.params.Encode(), "text/plain", strings.NewReader(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		got := string(b)
		if res.StatusCode != tc.status || (tc.status == 200 && got != tc.want) || (tc.status != 200 && !strings.Contains(got, tc.want)) {
			t.Errorf("%s: %d %q; want %d with %q", tc.name, res.StatusCode, got, tc.status, tc.want)
		}
		if c := res.Header.Get("X-ClickHouse-Exception-Code"); c != tc.code {
			t.Errorf("%s: exception code %q; want %q", tc.name, c, tc.code)
		}
	}
}
