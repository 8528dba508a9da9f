package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestScratchDir: a directory of a killed run (its owner gone, or an owner
// file that names no process) is removed before a new one is made; one of
// a running command, one without an owner file (kept, or older), and
// other commands' directories stay. The new one names this process.
func TestScratchDir(t *testing.T) {
	tmp := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name, owner string) string {
		d := filepath.Join(tmp, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if owner != "" {
			if err := os.WriteFile(filepath.Join(d, scratchOwnerFile), []byte(owner), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	tests := []struct {
		dir  string
		kept bool
	}{
		{mk("heliostat-bench-ingest-running", strconv.Itoa(os.Getpid())), true},
		{mk("heliostat-bench-ingest-killed", strconv.Itoa(gone.Process.Pid)), false},
		{mk("heliostat-bench-ingest-garbled", "not a pid"), false},
		{mk("heliostat-bench-ingest-kept", ""), true},
		{mk("heliostat-bench-api-killed", strconv.Itoa(gone.Process.Pid)), true}, // another command's
	}
	var errs bytes.Buffer
	dir, err := scratchDir(&errs, tmp, "heliostat-bench-ingest")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		_, err := os.Stat(tt.dir)
		if kept := err == nil; kept != tt.kept {
			t.Errorf("%s kept %v; want %v", filepath.Base(tt.dir), kept, tt.kept)
		}
	}
	if n := strings.Count(errs.String(), "left by a killed run"); n != 2 {
		t.Errorf("%d removals reported; want 2:\n%s", n, errs.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, scratchOwnerFile)); err != nil || string(b) != strconv.Itoa(os.Getpid()) {
		t.Errorf("owner file of %s: %q, %v; want this process's id", dir, b, err)
	}
	if !strings.HasPrefix(filepath.Base(dir), "heliostat-bench-ingest-") {
		t.Errorf("scratch dir %s", dir)
	}

	// A kept directory is disowned: no later run takes it for a killed one.
	disownScratch(dir)
	if _, err := scratchDir(&errs, tmp, "heliostat-bench-ingest"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("disowned %s removed: %v", dir, err)
	}
}
