package chserver

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/heliostat-dev/heliostat/internal/testpki"
)

func TestStartTLSFilesChecked(t *testing.T) {
	pki := testpki.New(t)
	for _, tc := range []struct {
		name  string
		files TLSFiles
		want  string
	}{
		{"no key", TLSFiles{CertFile: pki.CertFile}, "needs CertFile and KeyFile"},
		{"no cert", TLSFiles{KeyFile: pki.KeyFile}, "needs CertFile and KeyFile"},
		{"missing cert", TLSFiles{CertFile: pki.CertFile + ".missing", KeyFile: pki.KeyFile}, pki.CertFile + ".missing"},
		{"missing client ca", TLSFiles{CertFile: pki.CertFile, KeyFile: pki.KeyFile, ClientCAFile: pki.CAFile + ".missing"}, pki.CAFile + ".missing"},
	} {
		// /bin/true and the pki's own CA file stand in for the binary and
		// config: Start checks the TLS files before it runs anything.
		cfg := Config{Dir: t.TempDir(), Binary: "/bin/true", ConfigFile: pki.CAFile, TLS: &tc.files}
		_, err := Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "chserver: ") {
			t.Errorf("%s: Start() = %v; want chserver: … %q", tc.name, err, tc.want)
		}
	}
}

// TestStartTLS starts a real server with a secure port from relative file
// names and no client CA: a client with only the CA reaches it over TLS.
func TestStartTLS(t *testing.T) {
	pki := testpki.New(t)
	t.Chdir(pki.Dir)
	files := &TLSFiles{CertFile: "server.crt", KeyFile: "server.key"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := Start(ctx, Config{Dir: t.TempDir(), Install: true, TLS: files}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Start with TLS: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	if files.CertFile != "server.crt" {
		t.Errorf("Start changed the caller's TLSFiles.CertFile to %q", files.CertFile)
	}
	if s.SecureAddr() == "" || s.SecureAddr() == s.Addr() {
		t.Fatalf("SecureAddr() = %q, Addr() = %q; want two ports", s.SecureAddr(), s.Addr())
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        []string{s.SecureAddr()},
		DialTimeout: 5 * time.Second,
		TLS:         &tls.Config{RootCAs: pki.CAPool, MinVersion: tls.VersionTLS12},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var version string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		t.Fatalf("SELECT version() over TLS at %s: %v", s.SecureAddr(), err)
	}
	t.Logf("server %s over TLS at %s", version, s.SecureAddr())
}

func TestSecureAddrWithoutTLS(t *testing.T) {
	s := &Server{cfg: Config{TCPPort: 9000, TCPSecurePort: 9440}}
	if got := s.SecureAddr(); got != "" {
		t.Errorf("SecureAddr() without TLS = %q; want \"\"", got)
	}
}

// TestStartPortTaken hands the server, as its first picked port, one that a
// listener here holds, as happens when another process takes a port between
// FreePort and the server's bind: Start picks new ports and the server
// comes up on them. A port the caller chose is not changed: Start fails and
// says the port is in use.
func TestStartPortTaken(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldPort := held.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logger := slog.New(slog.DiscardHandler)

	picks := 0
	cfg := Config{Dir: t.TempDir(), Install: true, pickPort: func() (int, error) {
		picks++
		if picks == 1 {
			return heldPort, nil
		}
		return FreePort()
	}}
	s, err := Start(ctx, cfg, logger)
	if err != nil {
		t.Fatalf("Start with a taken first port: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	if s.Addr() == held.Addr().String() {
		t.Fatalf("server address %s is the held port", s.Addr())
	}
	if picks != 6 {
		t.Errorf("ports picked = %d; want 6 (three, then three again)", picks)
	}
	if err := s.ping(ctx); err != nil {
		t.Errorf("ping %s: %v", s.Addr(), err)
	}

	_, err = Start(ctx, Config{Dir: t.TempDir(), Install: true, TCPPort: heldPort}, logger)
	if !errors.Is(err, ErrPortTaken) || !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("Start on a caller's taken port = %v; want an error saying the address is in use", err)
	}

	// A port held by another ClickHouse server answers pings, before the
	// new server finds it taken and exits: Start must not take the other
	// server for its own.
	sPort, err := strconv.Atoi(strings.TrimPrefix(s.Addr(), "127.0.0.1:"))
	if err != nil {
		t.Fatal(err)
	}
	picks = 0
	counted := func() (int, error) { picks++; return FreePort() }
	_, err = Start(ctx, Config{Dir: t.TempDir(), Install: true, TCPPort: sPort, pickPort: counted}, logger)
	if !errors.Is(err, ErrPortTaken) || !strings.Contains(err.Error(), "another ClickHouse server") {
		t.Errorf("Start on a port another ClickHouse server holds = %v; want it refused as taken by another server", err)
	}
	if picks != 2 {
		t.Errorf("ports picked = %d; want 2 (HTTP and interserver, once: the taken port was not picked)", picks)
	}
	picks = 0
	cfg.Dir = t.TempDir()
	cfg.pickPort = func() (int, error) {
		picks++
		if picks == 1 {
			return sPort, nil
		}
		return FreePort()
	}
	s2, err := Start(ctx, cfg, logger)
	if err != nil {
		t.Fatalf("Start with another server's port picked first: %v", err)
	}
	t.Cleanup(func() {
		if err := s2.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	if s2.Addr() == s.Addr() {
		t.Errorf("second server's address %s is the first server's", s2.Addr())
	}
	if err := s2.ping(ctx); err != nil {
		t.Errorf("ping %s: %v", s2.Addr(), err)
	}
}

// TestStartSameDir starts a second server on the directory and port of a
// running one: the second process cannot lock the directory and exits, and
// the one answering on the port, whose data lie in the same directory, is
// the first's. Start must not take it for its own. Before, it returned a
// Server whose process had exited.
func TestStartSameDir(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	s, err := Start(ctx, Config{Dir: dir, Install: true}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	port, err := strconv.Atoi(strings.TrimPrefix(s.Addr(), "127.0.0.1:"))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := Start(ctx, Config{Dir: dir, Install: true, TCPPort: port}, logger)
	if err == nil {
		_ = s2.Stop()
		t.Fatalf("Start on the directory and port of a running server (pid %d) = a server of pid %d; want an error", s.PID(), s2.PID())
	}
	if !errors.Is(err, ErrPortTaken) || !strings.Contains(err.Error(), strconv.Itoa(s.PID())) {
		t.Errorf("Start on the directory and port of a running server = %v; want it refused as taken by another server, naming pid %d", err, s.PID())
	}
	if err := s.ping(ctx); err != nil {
		t.Errorf("the first server after the second start: ping: %v", err)
	}
}

// TestFreePortBelowEphemeralRange: FreePort's ports lie below the kernel's
// ephemeral range, where no outgoing connection and no port-0 listener can
// take them, and each was free when returned.
func TestFreePortBelowEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low-portFloor < 1000 {
		t.Skipf("ephemeral range starts at %d: too little room below it, FreePort listens on port 0", low)
	}
	seen := map[int]bool{}
	for range 20 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < portFloor || p >= low {
			t.Errorf("FreePort = %d; want a port in [%d, %d)", p, portFloor, low)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Errorf("FreePort = %d, and it cannot be bound: %v", p, err)
			continue
		}
		l.Close()
		seen[p] = true
	}
	if len(seen) < 10 {
		t.Errorf("20 draws gave %d distinct ports; want them spread at random", len(seen))
	}
}
