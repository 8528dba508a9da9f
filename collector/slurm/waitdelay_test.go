package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCommandTimeoutWithLingeringChild: a Slurm command that times out is
// killed, but a child it started (a site's wrapper script around squeue,
// ssh, sudo) that keeps its standard output open kept the call waiting for
// the pipe to close: --slurm.command-timeout did not bound the poll, which
// hung until the child ended. The call now gives up shortly after the kill.
func TestCommandTimeoutWithLingeringChild(t *testing.T) {
	squeue := filepath.Join(t.TempDir(), "squeue")
	if err := os.WriteFile(squeue, []byte("#!/bin/sh\nsleep 60 &\nsleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := New(Config{Cluster: testCluster, StateFile: filepath.Join(t.TempDir(), "state.json"), Squeue: squeue, CommandTimeout: 500 * time.Millisecond},
		newRecorder(t, testCluster), testLogger(t), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	_, err = src.command(context.Background(), "squeue", nil, squeue, "--json")
	took := time.Since(begin)
	if err == nil || !strings.Contains(err.Error(), "killed") && !strings.Contains(err.Error(), "deadline") {
		t.Errorf("squeue whose child holds stdout: err = %v; want it killed at the timeout", err)
	}
	if took > 10*time.Second {
		t.Errorf("squeue whose child holds stdout returned after %v; want within the timeout and the wait delay (%v)", took.Round(time.Second), commandWaitDelay)
	}
}
