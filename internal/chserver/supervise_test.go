package chserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer that a logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// records returns the JSON log records written so far.
func (b *syncBuffer) records() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(b.b.String(), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// waitUntil polls f for up to a minute and fails t with what when it never
// holds.
func waitUntil(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !f(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute", what)
		}
	}
}

// TestSupervise kills a running server with SIGKILL: Supervise logs an
// error naming the exit status, the pid and the error log, starts the
// server again on the same port and data, and returns nil once the server
// is stopped, without starting it again. Before, nothing watched the
// process once it had started.
func TestSupervise(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var logs syncBuffer
	s, err := Start(ctx, Config{Dir: t.TempDir(), Install: true}, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	if err := s.ping(ctx); err != nil {
		t.Fatal(err)
	}
	supervised := make(chan error, 1)
	go func() { supervised <- s.Supervise(ctx, SuperviseConfig{MinBackoff: 100 * time.Millisecond}) }()

	pid := s.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "server started again", func() bool { return s.PID() != pid && s.ping(ctx) == nil })
	var exited map[string]any
	for _, r := range logs.records() {
		if r["msg"] == "clickhouse server exited; restarting it" {
			exited = r
		}
	}
	if exited == nil || exited["level"] != "ERROR" || exited["status"] != "signal: killed" || exited["pid"] != float64(pid) || exited["log"] != s.ErrorLog() {
		t.Errorf("exit logged as %v; want an ERROR with status \"signal: killed\", pid %d, log %s", exited, pid, s.ErrorLog())
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-supervised:
		if err != nil {
			t.Errorf("Supervise after Stop = %v; want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Supervise still running 30 s after Stop")
	}
	select {
	case <-s.process().done:
	default:
		t.Errorf("a server (pid %d) runs after Stop", s.PID())
	}
}

// TestSuperviseGivesUp: a server that cannot be started again (its binary
// is gone) makes Supervise return an error after Attempts tries, naming
// the exit and the error log.
func TestSuperviseGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	real, err := lookBinary()
	if err != nil {
		t.Fatalf("no clickhouse-server to link to: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "clickhouse-server")
	if err := os.Symlink(real, bin); err != nil {
		t.Fatal(err)
	}
	s, err := Start(ctx, Config{Dir: t.TempDir(), Binary: bin}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(s.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = s.Supervise(ctx, SuperviseConfig{MinBackoff: 10 * time.Millisecond, Attempts: 2})
	var notFound *os.PathError
	if err == nil || !strings.Contains(err.Error(), "exited (signal: killed) and did not start again in 2 attempts") ||
		!strings.Contains(err.Error(), s.ErrorLog()) || !errors.As(err, &notFound) {
		t.Errorf("Supervise with the binary gone = %v; want it to give up after 2 attempts, naming the exit, the log and the missing binary", err)
	}
}

// TestExitStatus names how a process ended.
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"true"}, "exit status 0"},
		{[]string{"sh", "-c", "exit 70"}, "exit status 70"},
		{[]string{"sh", "-c", "kill -9 $$"}, "signal: killed"},
	} {
		err := exec.Command(tc.args[0], tc.args[1:]...).Run()
		if got := exitStatus(err); got != tc.want {
			t.Errorf("exitStatus(%q) = %q; want %q", tc.args, got, tc.want)
		}
	}
}

// TestNotInstalledHint: the error of a missing server says how to install
// it, and names another server only in the caller's terms. Before, it
// told every caller to point --clickhouse.addr at one, which `heliostat
// up` does not have.
func TestNotInstalledHint(t *testing.T) {
	for _, tc := range []struct {
		hint string
		want string // the error ends with it
	}{
		{"", "or from clickhouse.com"},
		{"or point --clickhouse.addr at an existing server", "or from clickhouse.com, or point --clickhouse.addr at an existing server"},
	} {
		cfg := Config{Dir: t.TempDir(), NotInstalledHint: tc.hint, lookBinary: func() (string, error) { return "", ErrNotInstalled }}
		_, err := Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
		if !errors.Is(err, ErrNotInstalled) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("Start without a server, hint %q = %v; want ErrNotInstalled ending %q", tc.hint, err, tc.want)
		}
		if tc.hint == "" && strings.Contains(err.Error(), "--clickhouse.addr") {
			t.Errorf("Start without a server and no hint = %v; want no flag named", err)
		}
	}
}
