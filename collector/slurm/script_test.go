package slurm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// fakeScontrol writes a scontrol that prints stdout and stderr and exits
// with exit, and appends a line to runs at each run.
func fakeScontrol(t *testing.T, dir, stdout, stderr string, exit int) (path, runs string) {
	t.Helper()
	path, runs = filepath.Join(dir, "scontrol"), filepath.Join(dir, "runs")
	for name, s := range map[string]string{"stdout": stdout, "stderr": stderr} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	body := "#!/bin/sh\necho \"$*\" >> '" + runs + "'\ncat '" + filepath.Join(dir, "stdout") + "'\ncat '" + filepath.Join(dir, "stderr") + "' >&2\nexit " + strconv.Itoa(exit) + "\n"
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, runs
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestScriptHash runs the source's scontrol write batch_script against a
// fake scontrol. Slurm 22.05's scontrol exits 0 when it cannot print a
// script (slurmctld refused it, or the job is gone): it writes why to
// standard error and nothing to standard output. Only a script printed
// without complaint is hashed; anything else leaves the hash empty, is
// counted as a failed scontrol and logged, a refusal with what to do about
// it.
func TestScriptHash(t *testing.T) {
	const script = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\nsleep 1\n"
	for _, tc := range []struct {
		name           string
		stdout, stderr string
		exit           int
		want           string // the hash
		errors         float64
		log            string // in the log
	}{
		{name: "printed", stdout: script, want: sha256Hex(script)},
		{name: "refused, exit status 0", stderr: "job script retrieval failed: Invalid user id\n", errors: 1, log: "Slurm operator"},
		{name: "refused, exit status 1", stderr: "job script retrieval failed: Invalid user id\n", exit: 1, errors: 1, log: "Slurm operator"},
		{name: "job gone, exit status 0", stderr: "job script retrieval failed: Invalid job id specified\n", errors: 1, log: "Invalid job id specified"},
		{name: "nothing printed", errors: 1, log: "printed nothing"},
		{name: "printed with an error", stdout: script, stderr: "scontrol: error: something odd\n", errors: 1, log: "something odd"},
		{name: "failed", stderr: "scontrol: error: slurm_load_jobs error: Unable to contact slurm controller\n", exit: 1, errors: 1, log: "Unable to contact slurm controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			scontrol, runs := fakeScontrol(t, dir, tc.stdout, tc.stderr, tc.exit)
			var logs bytes.Buffer
			cfg := Config{Cluster: testCluster, StateFile: filepath.Join(dir, "state.json"), Scontrol: scontrol, HashScripts: true}
			src, err := New(cfg, newRecorder(t, testCluster), slog.New(slog.NewTextHandler(&logs, nil)), prometheus.NewRegistry(), time.Now)
			if err != nil {
				t.Fatal(err)
			}
			src.scripts = map[string]string{}
			if got := src.scriptHash(context.Background(), "42"); got != tc.want {
				t.Errorf("scriptHash(%q) = %q; want %q", "42", got, tc.want)
			}
			if got := countLines(t, runs); got != 1 {
				t.Errorf("scontrol ran %d times; want 1", got)
			}
			if got := testutil.ToFloat64(src.m.cmdErrors.WithLabelValues("scontrol")); got != tc.errors {
				t.Errorf("heliostat_slurm_command_errors_total{command=scontrol} = %v; want %v", got, tc.errors)
			}
			if tc.log != "" && !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log %q; want it to hold %q", logs.String(), tc.log)
			}
			if tc.log == "" && logs.Len() != 0 {
				t.Errorf("log %q; want nothing", logs.String())
			}
		})
	}
}

// TestScriptHashPausesAfterRefusals: while slurmctld refuses the source's
// user the scripts of other users' jobs, asking for every new job's script
// only loads slurmctld. After scriptRefusals refusals in a row the source
// stops asking for scriptPause, then asks again; a script printed ends the
// pause for good.
func TestScriptHashPausesAfterRefusals(t *testing.T) {
	const script = "#!/bin/sh\ntrue\n"
	dir := t.TempDir()
	scontrol, runs := fakeScontrol(t, dir, "", "job script retrieval failed: Invalid user id\n", 0)
	clock := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	cfg := Config{Cluster: testCluster, StateFile: filepath.Join(dir, "state.json"), Scontrol: scontrol, HashScripts: true}
	src, err := New(cfg, newRecorder(t, testCluster), slog.New(slog.NewTextHandler(&logs, nil)), prometheus.NewRegistry(), func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	job := 0
	hash := func() string { // a new job's script, at a new poll
		job++
		src.scripts = map[string]string{}
		return src.scriptHash(context.Background(), strconv.Itoa(job))
	}
	for i, step := range []struct {
		advance time.Duration // the clock moves on first
		printed bool          // scontrol prints the script from this step on
		want    string
		runs    int // scontrol runs so far
	}{
		{runs: 1}, {runs: 2}, {runs: scriptRefusals}, // refused every time: the pause starts
		{runs: scriptRefusals},
		{advance: scriptPause - time.Second, runs: scriptRefusals},
		{advance: time.Second, runs: scriptRefusals + 1}, // asked again, refused again: paused again
		{runs: scriptRefusals + 1},
		{advance: scriptPause, printed: true, want: sha256Hex(script), runs: scriptRefusals + 2},
		{printed: true, want: sha256Hex(script), runs: scriptRefusals + 3},
	} {
		clock = clock.Add(step.advance)
		if step.printed {
			fakeScontrol(t, dir, script, "", 0) // the same path: the source runs the new one
		}
		if got := hash(); got != step.want {
			t.Errorf("step %d: scriptHash = %q; want %q", i, got, step.want)
		}
		if got := countLines(t, runs); got != step.runs {
			t.Errorf("step %d: scontrol ran %d times; want %d", i, got, step.runs)
		}
	}
	if got := testutil.ToFloat64(src.m.cmdErrors.WithLabelValues("scontrol")); got != scriptRefusals+1 {
		t.Errorf("heliostat_slurm_command_errors_total{command=scontrol} = %v; want %v, one per refusal", got, scriptRefusals+1)
	}
	if n := strings.Count(logs.String(), "not asking for"); n != 2 {
		t.Errorf("log has %d lines about the pause; want 2:\n%s", n, logs.String())
	}
}

// TestScriptHashOtherUsers runs the source's scontrol as an unprivileged
// user, as the deployed unit runs as heliostat: slurmctld prints the
// user's own job's script, and refuses another user's, for which Slurm
// 22.05's scontrol still exits 0. That job is published without a command
// hash (not with the hash of nothing, which put all such jobs under one
// key), and the refusal is counted.
func TestScriptHashOtherUsers(t *testing.T) {
	c := slurmtest.Shared(t)
	const self, other = "daemon", "nobody" // neither root nor a Slurm operator
	scontrol := slurmtest.CommandAs(t, self, "scontrol")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The jobs other tests left in squeue are root's, refused too, and
	// enough refusals in a row would pause the hashing before the test's
	// jobs: a source that does not hash takes them into the state first.
	cfg := testConfig(t, c, filepath.Join(t.TempDir(), "state.json"))
	cfg.HashScripts = false
	before, err := New(cfg, newRecorder(t, testCluster), testLogger(t), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := before.Poll(ctx); err != nil {
		t.Fatal(err)
	}

	own, err := c.Submit(ctx, "--uid="+self, "--chdir=/tmp", "-o", "/dev/null", "--hold", "--wrap", "sleep 1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Run(context.Background(), "scancel", own)
	theirs, err := c.Submit(ctx, "--uid="+other, "--chdir=/tmp", "-o", "/dev/null", "--hold", "--wrap", "sleep 2")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Run(context.Background(), "scancel", theirs)
	script, err := c.Run(ctx, "scontrol", "write", "batch_script", own, "-") // as root
	if err != nil {
		t.Fatal(err)
	}
	cfg.HashScripts, cfg.Scontrol = true, scontrol
	rec := newRecorder(t, testCluster)
	src, err := New(cfg, rec, testLogger(t), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for _, j := range []struct{ id, user, hash string }{{own, self, sha256Hex(script)}, {theirs, other, ""}} {
		evs := rec.jobEvents(j.id)
		if got := types(evs); got != "SUBMIT" {
			t.Fatalf("job %s: events %q; want SUBMIT", j.id, got)
		}
		if e := evs[0]; e.User != j.user || e.CommandHash != j.hash {
			t.Errorf("job %s: SUBMIT of user %q with command hash %q; want user %s, hash %q", j.id, e.User, e.CommandHash, j.user, j.hash)
		}
	}
	if got := testutil.ToFloat64(src.m.cmdErrors.WithLabelValues("scontrol")); got != 1 {
		t.Errorf("heliostat_slurm_command_errors_total{command=scontrol} = %v; want 1 (the other user's job)", got)
	}
}
