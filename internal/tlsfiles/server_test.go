package tlsfiles

import (
	"bytes"
	"crypto/tls"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/internal/testpki"
)

// TestTLSReload serves HTTPS from a certificate file, replaces the files
// with a pair from another CA, and checks that new connections get the new
// certificate after the next check, that a half-written pair keeps the old
// one served (and logged), and that a client certificate is required with
// a client CA file.
func TestServerReload(t *testing.T) {
	a, b := testpki.New(t), testpki.New(t)
	cert, key := pairFiles(t, a.CertFile, a.KeyFile)
	clock, advance := fakeClock()
	var logs syncBuffer
	tc, err := Server{Prefix: "--web.tls", CertFile: cert, KeyFile: key, ClientCAFile: a.CAFile}.Config(clock, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOK(t, tc)
	clientCert, err := tls.LoadX509KeyPair(a.ClientCertFile, a.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	// served returns which CA's pool verifies the certificate served now.
	served := func() string {
		t.Helper()
		for name, p := range map[string]*testpki.PKI{"a": a, "b": b} {
			c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.CAPool, Certificates: []tls.Certificate{clientCert}})
			if err == nil {
				_, rerr := c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
				buf := make([]byte, 64)
				n, _ := c.Read(buf)
				c.Close()
				if rerr == nil && bytes.Contains(buf[:n], []byte("200")) {
					return name
				}
			}
		}
		return "none"
	}
	if got := served(); got != "a" {
		t.Fatalf("served a certificate of CA %s; want a", got)
	}
	if c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: a.CAPool}); err == nil {
		_, werr := c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
		buf := make([]byte, 64)
		n, rerr := c.Read(buf)
		c.Close()
		if werr == nil && rerr == nil && bytes.Contains(buf[:n], []byte("200")) {
			t.Error("answered a client without a certificate; want it refused")
		}
	}

	// Half-written: the certificate of b with the key of a. The old pair is
	// kept and the error logged.
	copyFile(t, b.CertFile, cert)
	bump(t, cert, key)
	advance(11 * time.Second)
	if got := served(); got != "a" {
		t.Errorf("with a mismatched pair on disk, served CA %s; want the previous (a)", got)
	}
	if !strings.Contains(logs.String(), "cannot reload the TLS certificate") {
		t.Errorf("no warning about the unreadable pair; logs:\n%s", logs.String())
	}
	// Complete: b's pair. Served after the next check, not before.
	copyFile(t, b.KeyFile, key)
	bump(t, cert, key)
	advance(time.Second)
	if got := served(); got != "a" {
		t.Errorf("1 s after the last check, served CA %s; want a (checked every %s)", got, ReloadEvery)
	}
	advance(ReloadEvery)
	if got := served(); got != "b" {
		t.Errorf("after the next check, served CA %s; want b", got)
	}
	if !strings.Contains(logs.String(), "reloaded the TLS certificate") {
		t.Errorf("no log of the reload; logs:\n%s", logs.String())
	}
}

// TestServerClientCAReload: the client CA file is read again when it
// changes, after the next check; a half-written one keeps the previous CAs;
// and a client whose CA was removed cannot resume a session it had.
func TestServerClientCAReload(t *testing.T) {
	a, b := testpki.New(t), testpki.New(t)
	dir := t.TempDir()
	caFile := dir + "/clients.pem"
	copyFile(t, a.CAFile, caFile)
	clock, advance := fakeClock()
	var logs syncBuffer
	tc, err := Server{Prefix: "--web.tls", CertFile: a.CertFile, KeyFile: a.KeyFile, ClientCAFile: caFile}.Config(clock, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOK(t, tc)
	// A client per CA, each keeping its TLS sessions.
	clients := map[string]*tls.Config{}
	for name, p := range map[string]*testpki.PKI{"a": a, "b": b} {
		pair, err := tls.LoadX509KeyPair(p.ClientCertFile, p.ClientKeyFile)
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = &tls.Config{RootCAs: a.CAPool, Certificates: []tls.Certificate{pair}, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	}
	// get sends a request as the client and says whether it was answered,
	// and whether the TLS session was resumed.
	get := func(client string) (answered, resumed bool) {
		t.Helper()
		c, err := tls.Dial("tcp", addr, clients[client])
		if err != nil {
			return false, false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
			return false, c.ConnectionState().DidResume
		}
		reply, _ := io.ReadAll(c) // also takes in the session tickets
		return bytes.Contains(reply, []byte(" 200 ")), c.ConnectionState().DidResume
	}
	want := func(when, client string, answered, resumed bool) {
		t.Helper()
		if gotA, gotR := get(client); gotA != answered || gotR != resumed {
			t.Errorf("%s: client of CA %s answered %v, resumed %v; want %v, %v", when, client, gotA, gotR, answered, resumed)
		}
	}
	want("at start", "a", true, false)
	want("at start, again", "a", true, true)
	want("at start", "b", false, false)

	// Half-written: no certificate in the file. The previous CAs stay.
	if err := os.WriteFile(caFile, []byte("-----BEGIN CERT"), 0o600); err != nil {
		t.Fatal(err)
	}
	bump(t, caFile)
	advance(ReloadEvery)
	want("with a broken CA file", "a", true, true)
	want("with a broken CA file", "b", false, false)
	if !strings.Contains(logs.String(), "cannot reload the client CA file") || !strings.Contains(logs.String(), "--web.tls.client-ca") {
		t.Errorf("no warning naming the flag about the broken CA file; logs:\n%s", logs.String())
	}
	// b's CA replaces a's: b is answered after the next check, not before,
	// and a is refused even with a session to resume.
	copyFile(t, b.CAFile, caFile)
	bump(t, caFile)
	advance(time.Second)
	want("1 s after the last check", "b", false, false)
	advance(ReloadEvery)
	want("after the next check", "b", true, false)
	want("after the next check", "a", false, false)
	if !strings.Contains(logs.String(), "reloaded the client CA file") {
		t.Errorf("no log of the reload; logs:\n%s", logs.String())
	}
}

// serveOK serves HTTPS with tc on a loopback port, answering "ok" to every
// request, until the test ends, and returns its address.
func serveOK(t *testing.T, tc *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(tls.NewListener(ln, tc)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// pairFiles copies a certificate and its key to files of their own, which
// the test then replaces.
func pairFiles(t *testing.T, certFrom, keyFrom string) (cert, key string) {
	t.Helper()
	dir := t.TempDir()
	cert, key = dir+"/tls.crt", dir+"/tls.key"
	copyFile(t, certFrom, cert)
	copyFile(t, keyFrom, key)
	return cert, key
}

// fakeClock returns a clock standing still until advanced.
func fakeClock() (clock func() time.Time, advance func(time.Duration)) {
	var (
		mu  sync.Mutex
		now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	)
	clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance = func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	return clock, advance
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// bump moves the files' modification times forward, as a rewrite a
// second later would.
func bump(t *testing.T, files ...string) {
	t.Helper()
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		m := st.ModTime().Add(time.Second)
		if err := os.Chtimes(f, m, m); err != nil {
			t.Fatal(err)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestClientReload: a client's key pair is read again when its files
// change, at the first handshake after the next check, and a half-written
// pair keeps the previous one in use.
func TestClientReload(t *testing.T) {
	a, b := testpki.New(t), testpki.New(t)
	cert, key := pairFiles(t, a.ClientCertFile, a.ClientKeyFile)
	clock, advance := fakeClock()
	var logs syncBuffer
	cc, err := Client{Prefix: "--kafka.tls", CAFile: a.CAFile, CertFile: cert, KeyFile: key, ServerName: "localhost",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: clock}.Config()
	if err != nil {
		t.Fatal(err)
	}
	// The server trusts client certificates of either CA.
	sc := a.ServerTLS(true)
	sc.ClientCAs = a.CAPool.Clone()
	caB, err := os.ReadFile(b.CAFile)
	if err != nil || !sc.ClientCAs.AppendCertsFromPEM(caB) {
		t.Fatalf("read CA b: %v", err)
	}
	leaf := map[string][]byte{}
	for name, p := range map[string]*testpki.PKI{"a": a, "b": b} {
		pair, err := tls.LoadX509KeyPair(p.ClientCertFile, p.ClientKeyFile)
		if err != nil {
			t.Fatal(err)
		}
		leaf[name] = pair.Certificate[0]
	}
	// presented handshakes once and says whose client certificate the
	// server got.
	presented := func() string {
		t.Helper()
		c1, c2 := net.Pipe()
		srv, cli := tls.Server(c1, sc), tls.Client(c2, cc.Clone())
		errc := make(chan error, 1)
		go func() { errc <- srv.Handshake() }()
		cerr := cli.Handshake()
		serr := <-errc
		defer c1.Close() // not the TLS conns: their close_notify would wait on the unread pipe
		defer c2.Close()
		if cerr != nil || serr != nil {
			t.Fatalf("handshake: client %v, server %v", cerr, serr)
		}
		got := srv.ConnectionState().PeerCertificates[0].Raw
		for name, der := range leaf {
			if bytes.Equal(got, der) {
				return name
			}
		}
		return "unknown"
	}
	if got := presented(); got != "a" {
		t.Fatalf("presented client certificate %s; want a", got)
	}
	copyFile(t, b.ClientCertFile, cert) // half-written: b's certificate, a's key
	bump(t, cert, key)
	advance(ReloadEvery + time.Second)
	if got := presented(); got != "a" {
		t.Errorf("with a mismatched pair on disk, presented %s; want the previous (a)", got)
	}
	if !strings.Contains(logs.String(), "cannot reload the TLS certificate") || !strings.Contains(logs.String(), "--kafka.tls") {
		t.Errorf("no warning naming the flags about the unreadable pair; logs:\n%s", logs.String())
	}
	copyFile(t, b.ClientKeyFile, key)
	bump(t, cert, key)
	if got := presented(); got != "a" {
		t.Errorf("before the next check, presented %s; want a", got)
	}
	advance(ReloadEvery)
	if got := presented(); got != "b" {
		t.Errorf("after the next check, presented %s; want b", got)
	}
	if !strings.Contains(logs.String(), "reloaded the TLS certificate") {
		t.Errorf("no log of the reload; logs:\n%s", logs.String())
	}
}
