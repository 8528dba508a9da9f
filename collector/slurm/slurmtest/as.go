package slurmtest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"testing"
)

// CommandAs returns the path of a script that runs the command name as the
// unprivileged user, with the caller's environment (SLURM_CONF included):
// what a source deployed as heliostat sees, e.g. a Config.Scontrol for the
// scontrol of a user who is neither root nor a Slurm operator. It uses
// runuser, so it needs root; without root, runuser or the user, the test is
// skipped (failed under CI=true), as when the cluster cannot start.
func CommandAs(t testing.TB, username, name string) string {
	t.Helper()
	p, err := commandAs(t.TempDir(), username, name)
	if err != nil {
		fail(t, err)
	}
	return p
}

func commandAs(dir, username, name string) (string, error) {
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w: running %s as %s needs root (runuser)", errSkip, name, username)
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		return "", fmt.Errorf("%w: running %s as %s: %v", errSkip, name, username, err)
	}
	if _, err := user.Lookup(username); err != nil {
		return "", fmt.Errorf("%w: running %s as %s: %v", errSkip, name, username, err)
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("slurmtest: %w", err)
	}
	p := filepath.Join(dir, name+"-as-"+username)
	script := fmt.Sprintf("#!/bin/sh\nexec '%s' -u '%s' -- '%s' \"$@\"\n", runuser, username, bin)
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("slurmtest: %w", err)
	}
	return p, nil
}
