package chconn

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/internal/chlocal"
	"github.com/heliostat-dev/heliostat/internal/chserver"
	"github.com/heliostat-dev/heliostat/internal/testpki"
)

func noenv(string) string { return "" }

func TestValidate(t *testing.T) {
	base := Config{Addr: "127.0.0.1:9000", Database: "heliostat"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // substring of the error; "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"empty addr", func(c *Config) { c.Addr = "" }, "--clickhouse.addr is empty"},
		{"bad database", func(c *Config) { c.Database = "a-b" }, "--clickhouse.database"},
		{"bad compression", func(c *Config) { c.Compression = "zstd" }, "--clickhouse.compression"},
		{"http", func(c *Config) { c.Protocol = "http" }, ""},
		{"native", func(c *Config) { c.Protocol = "native" }, ""},
		{"bad protocol", func(c *Config) { c.Protocol = "grpc" }, "--clickhouse.protocol \"grpc\": want native or http"},
		{"tls alone", func(c *Config) { c.TLS = true }, ""},
		{"ca only", func(c *Config) { c.TLSCAFile = "ca.pem" }, ""},
		{"cert and key", func(c *Config) { c.TLSCertFile, c.TLSKeyFile = "c.pem", "k.pem" }, ""},
		{"cert without key", func(c *Config) { c.TLSCertFile = "c.pem" }, "--clickhouse.tls.cert and --clickhouse.tls.key"},
		{"key without cert", func(c *Config) { c.TLSKeyFile = "k.pem" }, "--clickhouse.tls.cert and --clickhouse.tls.key"},
		{"server name", func(c *Config) { c.TLSServerName = "ch.example" }, ""},
		{"skip verify", func(c *Config) { c.TLSInsecureSkipVerify = true }, ""},
		{"negative dial timeout", func(c *Config) { c.DialTimeout = -time.Second }, "--clickhouse.dial-timeout"},
	} {
		c := base
		tc.edit(&c)
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v; want nil", tc.name, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s: Validate() = nil; want error with %q", tc.name, tc.want)
		case tc.want != "" && (!strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "chconn: ")):
			t.Errorf("%s: Validate() = %q; want chconn: … %q", tc.name, err, tc.want)
		}
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		tls  bool
	}{
		{nil, false},
		{[]string{"--clickhouse.tls"}, true},
		{[]string{"--clickhouse.tls.ca=/ca.pem"}, true},
		{[]string{"--clickhouse.tls.cert=/c.pem", "--clickhouse.tls.key=/k.pem"}, true},
		{[]string{"--clickhouse.tls.server-name=ch.example"}, true},
		{[]string{"--clickhouse.tls.insecure-skip-verify"}, true},
		{[]string{"--clickhouse.tls=false"}, false},
	} {
		var c Config
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		c.RegisterFlags(fs, noenv)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("parse %q: %v", tc.args, err)
		}
		if got := c.TLSEnabled(); got != tc.tls {
			t.Errorf("TLSEnabled() after %q = %v; want %v", tc.args, got, tc.tls)
		}
	}
	var c Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.RegisterFlags(fs, noenv)
	if err := fs.Parse([]string{"--clickhouse.tls.ca=/ca.pem", "--clickhouse.tls.cert=/c.pem", "--clickhouse.tls.key=/k.pem",
		"--clickhouse.tls.server-name=ch.example", "--clickhouse.tls.insecure-skip-verify"}); err != nil {
		t.Fatal(err)
	}
	want := Config{Addr: "127.0.0.1:9000", Protocol: "native", Database: "heliostat", User: "default", DialTimeout: 5 * time.Second, Compression: "lz4",
		TLSCAFile: "/ca.pem", TLSCertFile: "/c.pem", TLSKeyFile: "/k.pem", TLSServerName: "ch.example", TLSInsecureSkipVerify: true}
	if c != want {
		t.Errorf("flags = %+v; want %+v", c, want)
	}
}

// TestOpenHTTP opens connections over ClickHouse's HTTP interface, served
// by a current ClickHouse in the process (chlocal; make test sets
// $HELIOSTAT_CHDB_LIB): --clickhouse.protocol http reaches it, queries
// and batches go through, and the default native protocol pointed at the
// HTTP port fails at its ping rather than later.
func TestOpenHTTP(t *testing.T) {
	lib := os.Getenv(chlocal.EnvLib)
	if lib == "" {
		t.Skipf("$%s is not set: `make test` fetches libchdb.so and sets it", chlocal.EnvLib)
	}
	db, err := chlocal.Open(lib, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	srv := httptest.NewServer(chlocal.NewHandler(db, t.TempDir(), slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	cfg := Config{Addr: strings.TrimPrefix(srv.URL, "http://"), Protocol: "http", Compression: "none", Database: "heliostat"}
	ctx := context.Background()
	conn, err := cfg.Open(ctx, noenv)
	if err != nil {
		t.Fatalf("open over HTTP: %v", err)
	}
	defer conn.Close()
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.numbers LIMIT 10 WHERE number < ?", 5).Scan(&n); err == nil || n != 0 {
		// a malformed statement: the exception reaches the caller
		t.Fatalf("malformed query: n %d, err %v; want ClickHouse's syntax error", n, err)
	}
	if err := conn.QueryRow(ctx, "SELECT count() FROM (SELECT number FROM system.numbers LIMIT 10) WHERE number < ?", 5).Scan(&n); err != nil || n != 5 {
		t.Fatalf("count over HTTP = %d, %v; want 5", n, err)
	}
	native := cfg
	native.Protocol = ""
	native.DialTimeout = 2 * time.Second
	if c, err := native.Open(ctx, noenv); err == nil {
		c.Close()
		t.Fatal("the native protocol against an HTTP port opened; want its ping to fail")
	}
}

// TestOpenTLS runs one real ClickHouse with a secure native port that
// requires a client certificate signed by the test CA, and opens connections
// to it with the flags' settings.
func TestOpenTLS(t *testing.T) {
	pki := testpki.New(t)
	other := testpki.New(t) // a second CA that signed nothing the server trusts
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := chserver.Start(ctx, chserver.Config{
		Dir:     dir,
		Install: true,
		TLS:     &chserver.TLSFiles{CertFile: pki.CertFile, KeyFile: pki.KeyFile, ClientCAFile: pki.CAFile},
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start ClickHouse with TLS: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop ClickHouse: %v", err)
		}
	})
	if srv.SecureAddr() == "" || srv.SecureAddr() == srv.Addr() {
		t.Fatalf("SecureAddr() = %q with plain Addr() %q; want a second port", srv.SecureAddr(), srv.Addr())
	}

	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	client := func(c *Config) { c.TLSCertFile, c.TLSKeyFile = pki.ClientCertFile, pki.ClientKeyFile }
	for _, tc := range []struct {
		name  string
		plain bool // connect to the plain port instead of the secure one
		edit  func(*Config)
		want  []string // substrings of the error; nil means SELECT 1 works
	}{
		{name: "ca and client cert", edit: func(c *Config) { c.TLSCAFile = pki.CAFile; client(c) }},
		{name: "server name localhost", edit: func(c *Config) { c.TLSCAFile, c.TLSServerName = pki.CAFile, "localhost"; client(c) }},
		{name: "skip verify", edit: func(c *Config) { c.TLSInsecureSkipVerify = true; client(c) }},
		{name: "no tls flags on the plain port", plain: true, edit: func(*Config) {}},
		{name: "system pool", edit: func(c *Config) { c.TLS = true; client(c) },
			want: []string{"over TLS", "certificate"}},
		{name: "other ca", edit: func(c *Config) { c.TLSCAFile = other.CAFile; client(c) },
			want: []string{"over TLS", "certificate"}},
		{name: "wrong server name", edit: func(c *Config) { c.TLSCAFile, c.TLSServerName = pki.CAFile, "ch.example"; client(c) },
			want: []string{"over TLS", "ch.example"}},
		// TLS 1.3 finishes the client's handshake before the server checks
		// the client certificate, so the refusal comes on the first read or
		// write: "tls: certificate required" or a reset, depending on timing.
		{name: "no client cert", edit: func(c *Config) { c.TLSCAFile = pki.CAFile },
			want: []string{"over TLS"}},
		{name: "client cert from another ca", edit: func(c *Config) {
			c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile = pki.CAFile, other.ClientCertFile, other.ClientKeyFile
		}, want: []string{"over TLS"}},
		{name: "tls on the plain port", plain: true, edit: func(c *Config) { c.TLSCAFile = pki.CAFile; client(c) },
			want: []string{"over TLS"}},
		{name: "garbage ca", edit: func(c *Config) { c.TLSCAFile = garbage; client(c) },
			want: []string{"--clickhouse.tls.ca", garbage, "no PEM certificate"}},
		{name: "missing ca", edit: func(c *Config) { c.TLSCAFile = garbage + ".missing"; client(c) },
			want: []string{"--clickhouse.tls.ca", garbage + ".missing"}},
		{name: "key of another cert", edit: func(c *Config) {
			c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile = pki.CAFile, pki.ClientCertFile, pki.KeyFile
		}, want: []string{"--clickhouse.tls.cert", "--clickhouse.tls.key", pki.KeyFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Addr: srv.SecureAddr(), Database: "default", DialTimeout: 5 * time.Second}
			if tc.plain {
				c.Addr = srv.Addr()
			}
			tc.edit(&c)
			conn, err := c.Open(ctx, noenv)
			if tc.want != nil {
				if err == nil {
					conn.Close()
					t.Fatalf("Open(%+v) = nil error; want one with %q", c, tc.want)
				}
				t.Logf("error: %v", err)
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) || !strings.HasPrefix(err.Error(), "chconn: ") {
						t.Errorf("Open(%+v) = %q; want chconn: … %q", c, err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%+v) = %v", c, err)
			}
			defer conn.Close()
			var one uint8
			if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
				t.Fatalf("SELECT 1 = %d, %v; want 1", one, err)
			}
		})
	}
}

// TestOpenWait starts waiting for a ClickHouse that is not there yet, then
// starts one on the awaited port: OpenWait reports each failed attempt,
// retries prepare until it succeeds, and returns a working connection.
// Settings that cannot work fail at once, and a canceled wait returns.
func TestOpenWait(t *testing.T) {
	port, err := chserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Addr: "127.0.0.1:" + strconv.Itoa(port), Database: "default", DialTimeout: time.Second}
	never := func(error, int, time.Duration) { t.Error("report called for settings that cannot work") }
	nop := func(context.Context, driver.Conn) error { return nil }

	t.Run("unreadable password file", func(t *testing.T) {
		bad := c
		bad.PasswordFile = filepath.Join(t.TempDir(), "missing")
		if _, err := bad.OpenWait(context.Background(), noenv, nop, never); err == nil || !strings.Contains(err.Error(), "password file") {
			t.Fatalf("OpenWait = %v; want the password file's error at once", err)
		}
	})
	t.Run("canceled while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var attempts int
		_, err := c.OpenWait(ctx, noenv, nop, func(err error, attempt int, _ time.Duration) {
			attempts = attempt
			cancel()
		})
		if !errors.Is(err, context.Canceled) || attempts != 1 {
			t.Fatalf("OpenWait = %v after %d attempts; want context.Canceled after 1", err, attempts)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type result struct {
		conn driver.Conn
		err  error
	}
	var (
		mu       sync.Mutex
		reports  []string
		pauses   []time.Duration
		prepared int
	)
	done := make(chan result, 1)
	go func() {
		conn, err := c.OpenWait(ctx, noenv, func(ctx context.Context, conn driver.Conn) error {
			mu.Lock()
			defer mu.Unlock()
			if prepared++; prepared == 1 {
				return errors.New("the first migration attempt fails")
			}
			return conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS default.waited (x UInt8) ENGINE = Memory")
		}, func(err error, attempt int, retryIn time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, fmt.Sprintf("%d: %v", attempt, err))
			pauses = append(pauses, retryIn)
		})
		done <- result{conn, err}
	}()
	// Let it fail at least twice before ClickHouse starts.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := len(reports)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("OpenWait reported fewer than 2 failures in 30 s with no ClickHouse")
		}
	}
	srv, err := chserver.Start(ctx, chserver.Config{Dir: t.TempDir(), Install: true, TCPPort: port}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start ClickHouse: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("OpenWait still waiting 2 minutes after ClickHouse started")
	}
	if r.err != nil {
		t.Fatalf("OpenWait = %v", r.err)
	}
	defer r.conn.Close()
	var n uint64
	if err := r.conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'default' AND name = 'waited'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the table prepare created: %d, %v; want 1", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("reports: %q", reports)
	for i, rep := range reports {
		if want := fmt.Sprintf("%d: ", i+1); !strings.HasPrefix(rep, want) {
			t.Errorf("report %d = %q; want attempt %d", i, rep, i+1)
		}
		if want := min(MinBackoff<<i, MaxBackoff); pauses[i] != want {
			t.Errorf("report %d: retry in %v; want %v", i, pauses[i], want)
		}
	}
	if !strings.Contains(reports[0], "chconn: ping "+c.Addr) {
		t.Errorf("first report %q; want the failed ping of %s", reports[0], c.Addr)
	}
	if last := reports[len(reports)-1]; !strings.Contains(last, "the first migration attempt fails") {
		t.Errorf("last report %q; want prepare's failure, retried", last)
	}
	if prepared != 2 {
		t.Errorf("prepare ran %d times; want 2 (a failure, then success)", prepared)
	}
}

// TestOpenRefusedHint: a connection refused ends with the caller's hint;
// other errors, and callers with no hint, get none.
func TestOpenRefusedHint(t *testing.T) {
	port, err := chserver.FreePort() // nothing listens on it
	if err != nil {
		t.Fatal(err)
	}
	closing, err := net.Listen("tcp", "127.0.0.1:0") // accepts, then hangs up
	if err != nil {
		t.Fatal(err)
	}
	defer closing.Close()
	go func() {
		for {
			c, err := closing.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	const hint = "try the other one"
	for _, tc := range []struct {
		name, addr, hint string
		want             bool
	}{
		{"refused", "127.0.0.1:" + strconv.Itoa(port), hint, true},
		{"refused, no hint", "127.0.0.1:" + strconv.Itoa(port), "", false},
		{"hung up", closing.Addr().String(), hint, false},
	} {
		c := Config{Addr: tc.addr, Database: "heliostat", DialTimeout: 2 * time.Second, RefusedHint: tc.hint}
		_, err := c.Open(context.Background(), noenv)
		if err == nil {
			t.Fatalf("%s: Open(%s) = nil error", tc.name, tc.addr)
		}
		if got := strings.HasSuffix(err.Error(), "("+hint+")"); got != tc.want {
			t.Errorf("%s: Open(%s) = %v; want the hint: %v", tc.name, tc.addr, err, tc.want)
		}
	}
}
