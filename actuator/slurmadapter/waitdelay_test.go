package slurmadapter

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCommandTimeoutWithLingeringChild: a Slurm command that times out is
// killed, but a child it started (a site's wrapper script, ssh, sudo) that
// keeps its standard output open kept Run waiting for the pipe to close:
// the command's timeout did not bound the call, and a pass hung until the
// child ended. Run now gives up on the pipe shortly after the kill.
func TestCommandTimeoutWithLingeringChild(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\nsleep 60 &\nsleep 60\n"
	if err := os.WriteFile(filepath.Join(bin, "squeue"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{BinDir: bin, Timeout: 500 * time.Millisecond}, nil, nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	_, err = s.run(context.Background(), "squeue", "--json")
	took := time.Since(begin)
	if err == nil || !strings.Contains(err.Error(), "timed out after 500ms") {
		t.Errorf("squeue whose child holds stdout: err = %v; want timed out after 500ms", err)
	}
	if took > 10*time.Second {
		t.Errorf("squeue whose child holds stdout returned after %v; want within the timeout and the wait delay (%v)", took.Round(time.Second), commandWaitDelay)
	}
}
