package slurm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
	"github.com/heliostat-dev/heliostat/schemas"
)

// showConfig returns testdata/scontrol-show-config.txt (Slurm 22.05.8's
// `scontrol show config` with PrivateData=jobs, its paths and SlurmUser
// changed) with the values of PrivateData and SlurmUser replaced.
func showConfig(t testing.TB, privateData, slurmUser string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/scontrol-show-config.txt")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "PrivateData             = jobs\n", "PrivateData             = "+privateData+"\n", 1)
	return strings.Replace(s, "SlurmUser               = slurm(64030)\n", "SlurmUser               = "+slurmUser+"\n", 1)
}

func TestParseSlurmConfig(t *testing.T) {
	full, err := os.ReadFile("testdata/scontrol-show-config.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		in   string
		want slurmConfig
		err  string // in the error; "" for none
	}{
		{name: "Slurm 22.05", in: string(full), want: slurmConfig{PrivateData: []string{"jobs"}, SlurmUser: "slurm", SlurmUID: 64030}},
		{name: "none", in: showConfig(t, "none", "root(0)"), want: slurmConfig{SlurmUser: "root", SlurmUID: 0}},
		{name: "all, as slurmctld prints it", in: showConfig(t, "accounts,cloud,events,jobs,nodes,partitions,reservations,usage,users", "slurm(64030)"),
			want: slurmConfig{PrivateData: []string{"accounts", "cloud", "events", "jobs", "nodes", "partitions", "reservations", "usage", "users"}, SlurmUser: "slurm", SlurmUID: 64030}},
		{name: "upper case, spaces", in: "PrivateData = Usage, JOBS\nSlurmUser = slurm(64030)\n", want: slurmConfig{PrivateData: []string{"usage", "jobs"}, SlurmUser: "slurm", SlurmUID: 64030}},
		{name: "user without uid", in: "PrivateData = jobs\nSlurmUser = slurm\n", want: slurmConfig{PrivateData: []string{"jobs"}, SlurmUser: "slurm", SlurmUID: -1}},
		{name: "empty", in: "", err: "no PrivateData line"},
		{name: "not scontrol's", in: "scontrol: error: slurm_load_ctl_conf error: Unable to contact slurm controller\n", err: "no PrivateData line"},
		{name: "no SlurmUser", in: "PrivateData = jobs\n", err: "no SlurmUser line"},
		{name: "PrivateData twice", in: "PrivateData = none\nSlurmUser = root(0)\nPrivateData = jobs\n", err: "line 3: PrivateData again (first on line 1)"},
		{name: "SlurmUser twice", in: "SlurmUser = root(0)\nPrivateData = jobs\nSlurmUser = slurm(64030)\n", err: "line 3: SlurmUser again (first on line 1)"},
		{name: "empty flag", in: "PrivateData = jobs,,usage\nSlurmUser = root(0)\n", err: `line 1: PrivateData "jobs,,usage" has an empty flag`},
		{name: "uid not a number", in: "PrivateData = jobs\nSlurmUser = slurm(x)\n", err: `line 2: SlurmUser "slurm(x)": want name(uid)`},
		{name: "uid unclosed", in: "PrivateData = jobs\nSlurmUser = slurm(64030\n", err: `line 2: SlurmUser "slurm(64030": want name(uid)`},
		{name: "negative uid", in: "PrivateData = jobs\nSlurmUser = slurm(-1)\n", err: `line 2: SlurmUser "slurm(-1)": want name(uid)`},
		{name: "no user name", in: "PrivateData = jobs\nSlurmUser = (0)\n", err: `line 2: SlurmUser "(0)" has no user name`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkParse(t, "parseSlurmConfig", parseSlurmConfig, tc.in, tc.want, tc.err) })
	}
}

// FuzzParseSlurmConfig: any text parses or fails with an error; what parses
// has a SlurmUser and lower-case, non-empty PrivateData flags.
func FuzzParseSlurmConfig(f *testing.F) {
	b, err := os.ReadFile("testdata/scontrol-show-config.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("PrivateData = accounts,cloud,events,jobs,nodes,partitions,reservations,usage,users\nSlurmUser = slurm\n"))
	f.Add([]byte("PrivateData = none\nSlurmUser = root(0)\nPrivateData = jobs\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseSlurmConfig(b)
		if err != nil {
			return
		}
		checkParsed(t, "parseSlurmConfig", b, c)
	})
}

// fakeCommand writes, in a directory of its own, a command that prints
// stdout and stderr and exits with exit, and appends a line to runs at each
// run (fakeScontrol).
func fakeCommand(t *testing.T, stdout, stderr string, exit int) (path, runs string) {
	t.Helper()
	return fakeScontrol(t, t.TempDir(), stdout, stderr, exit)
}

// TestCheckPrivateData runs the start-up check against a fake scontrol and
// sacctmgr: with PrivateData=jobs, a source whose user is neither root,
// SlurmUser nor a Slurm operator sees only its own jobs, and says so (an
// Error log, heliostat_slurm_jobs_hidden 1, its readiness failing with what
// to do); when the check cannot tell, it changes nothing.
func TestCheckPrivateData(t *testing.T) {
	heliostat := &user.User{Username: "heliostat", Uid: "998"}
	const fix = "give it AdminLevel=Operator (sacctmgr modify user heliostat set adminlevel=Operator) or run the source as SlurmUser (slurm)"
	for _, tc := range []struct {
		name          string
		config        string // scontrol show config
		scontrolExit  int
		user          *user.User
		level         string // sacctmgr's output
		sacctmgrExit  int
		told          bool   // checkPrivateData's result
		ready         string // in Ready()'s error; "" for ready
		hidden        float64
		sacctmgrRuns  int
		log           string // in the log
		commandErrors map[string]float64
		parseErrors   float64 // {input="config"}
	}{
		{name: "none", config: showConfig(t, "none", "slurm(64030)"), user: heliostat, told: true},
		{name: "usage only", config: showConfig(t, "usage,users", "slurm(64030)"), user: heliostat, told: true},
		{name: "root", config: showConfig(t, "jobs", "slurm(64030)"), user: &user.User{Username: "root", Uid: "0"}, told: true},
		{name: "SlurmUser, by uid", config: showConfig(t, "jobs", "slurm(64030)"), user: &user.User{Username: "slurm-renamed", Uid: "64030"}, told: true},
		{name: "SlurmUser, by name", config: showConfig(t, "jobs", "slurm"), user: &user.User{Username: "slurm", Uid: "64030"}, told: true},
		{name: "Operator", config: showConfig(t, "jobs", "slurm(64030)"), user: heliostat, level: "Operator\n", told: true, sacctmgrRuns: 1},
		{name: "Administrator", config: showConfig(t, "jobs", "slurm(64030)"), user: heliostat, level: "Administrator\n", told: true, sacctmgrRuns: 1},
		{name: "AdminLevel None", config: showConfig(t, "jobs", "slurm(64030)"), user: heliostat, level: "None\n", told: true, sacctmgrRuns: 1,
			ready: "slurm private data: failing for", hidden: 1, log: "level=ERROR"},
		{name: "not in the accounting", config: showConfig(t, "jobs", "slurm(64030)"), user: heliostat, told: true, sacctmgrRuns: 1,
			ready: "heliostat only its own jobs (not a user in Slurm's accounting); " + fix, hidden: 1, log: fix},
		{name: "all", config: showConfig(t, "accounts,cloud,events,jobs,nodes,partitions,reservations,usage,users", "slurm(64030)"), user: heliostat, level: "None\n", told: true, sacctmgrRuns: 1,
			ready: "slurm.conf has PrivateData=accounts,cloud,events,jobs,nodes,partitions,reservations,usage,users: squeue shows user heliostat only its own jobs (AdminLevel None); " + fix, hidden: 1, log: "level=ERROR"},
		{name: "no slurmdbd", config: showConfig(t, "jobs", "slurm(64030)"), user: heliostat, sacctmgrExit: 1, told: true, sacctmgrRuns: 1,
			ready: "(AdminLevel unknown: slurm: ", hidden: 1, log: "Only 'accounting_storage/slurmdbd' is supported.", commandErrors: map[string]float64{"sacctmgr": 1}},
		{name: "scontrol fails", config: "", scontrolExit: 1, user: heliostat, log: "cannot tell whether slurm hides", commandErrors: map[string]float64{"scontrol": 1}},
		{name: "scontrol prints something else", config: "PrivateData = jobs\n", user: heliostat, log: "no SlurmUser line", parseErrors: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scontrol, _ := fakeCommand(t, tc.config, "", tc.scontrolExit)
			stderr := ""
			if tc.sacctmgrExit != 0 {
				stderr = "You are not running a supported accounting_storage plugin\nOnly 'accounting_storage/slurmdbd' is supported.\n"
			}
			sacctmgr, runs := fakeCommand(t, tc.level, stderr, tc.sacctmgrExit)
			var logs bytes.Buffer
			cfg := Config{Cluster: testCluster, StateFile: filepath.Join(t.TempDir(), "state.json"), Scontrol: scontrol, Sacctmgr: sacctmgr}
			src, err := New(cfg, newRecorder(t, testCluster), slog.New(slog.NewTextHandler(io.MultiWriter(&logs, tWriter{t}), nil)), prometheus.NewRegistry(), time.Now)
			if err != nil {
				t.Fatal(err)
			}
			src.currentUser = func() (*user.User, error) { return tc.user, nil }
			src.polls.OK() // only the check's condition counts here
			if got := src.checkPrivateData(context.Background()); got != tc.told {
				t.Errorf("checkPrivateData() = %v; want %v", got, tc.told)
			}
			if err := src.Ready(); tc.ready == "" && err != nil || tc.ready != "" && (err == nil || !strings.Contains(err.Error(), tc.ready)) {
				t.Errorf("Ready() = %v; want %q", err, tc.ready)
			}
			if got := testutil.ToFloat64(src.m.jobsHidden); got != tc.hidden {
				t.Errorf("heliostat_slurm_jobs_hidden = %v; want %v", got, tc.hidden)
			}
			if got := countLines(t, runs); got != tc.sacctmgrRuns {
				t.Errorf("sacctmgr ran %d times; want %d", got, tc.sacctmgrRuns)
			}
			if tc.sacctmgrRuns > 0 {
				if b, _ := os.ReadFile(runs); string(b) != "-nP show user "+tc.user.Username+" format=adminlevel\n" {
					t.Errorf("sacctmgr ran with %q; want -nP show user %s format=adminlevel", b, tc.user.Username)
				}
			}
			if tc.log != "" && !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log %q; want it to hold %q", logs.String(), tc.log)
			}
			if tc.log == "" && logs.Len() != 0 {
				t.Errorf("log %q; want nothing", logs.String())
			}
			if got := testutil.ToFloat64(src.m.parseErrors.WithLabelValues(inputConfig)); got != tc.parseErrors {
				t.Errorf("heliostat_slurm_parse_errors_total{input=config} = %v; want %v", got, tc.parseErrors)
			}
			for _, cmd := range []string{"scontrol", "sacctmgr"} {
				if got := testutil.ToFloat64(src.m.cmdErrors.WithLabelValues(cmd)); got != tc.commandErrors[cmd] {
					t.Errorf("heliostat_slurm_command_errors_total{command=%s} = %v; want %v", cmd, got, tc.commandErrors[cmd])
				}
			}
		})
	}
}

// runOnce runs src until its first poll has ended, as the collector runs
// it, and returns what it logged. It waits for a second poll to end: the
// poll counter goes up before the poll reports to readiness, which it does
// not when the context has ended by then.
func runOnce(t *testing.T, src *Source, logs *bytes.Buffer) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(src.m.polls) < 2 {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("no second poll ended within 30 s:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return logs.String()
}

// privateSource is a Source on c whose squeue, scontrol and sacctmgr run as
// runAs ("" for the test's own user, root), with its user taken to be runAs,
// logging to logs too.
func privateSource(t *testing.T, c *slurmtest.Cluster, runAs string, rec *recorder, logs *bytes.Buffer) *Source {
	t.Helper()
	cfg := testConfig(t, c, filepath.Join(t.TempDir(), "state.json"))
	cfg.HashScripts = false // not what this is about
	if runAs != "" {
		cfg.Squeue = slurmtest.CommandAs(t, runAs, "squeue")
		cfg.Scontrol = slurmtest.CommandAs(t, runAs, "scontrol")
		cfg.Sacctmgr = slurmtest.CommandAs(t, runAs, "sacctmgr")
	}
	src, err := New(cfg, rec, slog.New(slog.NewTextHandler(io.MultiWriter(logs, tWriter{t}), nil)), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if runAs != "" {
		src.currentUser = func() (*user.User, error) { return user.Lookup(runAs) }
	}
	return src
}

// TestPrivateDataHidesJobs runs the source on a real slurmctld with
// PrivateData=jobs and no accounting. Run by an unprivileged user (as the
// deployed unit runs as heliostat; here nobody), squeue shows it none of
// root's jobs and exits 0: the source says so at start, with the fix, sets
// heliostat_slurm_jobs_hidden and fails its readiness, and goes on polling.
// Run as root (SlurmUser may see everything), it is ready and sees the job.
func TestPrivateDataHidesJobs(t *testing.T) {
	c := slurmtest.StartWith(t, slurmtest.Options{Conf: map[string]string{"PrivateData": "jobs"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := c.Submit(ctx, "--chdir=/tmp", "-o", "/dev/null", "--hold", "--wrap", "sleep 1") // root's
	if err != nil {
		t.Fatal(err)
	}

	t.Run("nobody", func(t *testing.T) {
		var logs bytes.Buffer
		rec := newRecorder(t, testCluster)
		src := privateSource(t, c, "nobody", rec, &logs)
		log := runOnce(t, src, &logs)
		if got := types(rec.jobEvents(job)); got != "" {
			t.Fatalf("premise: root's job %s seen by nobody with PrivateData=jobs: events %q", job, got)
		}
		const want = "slurm.conf has PrivateData=jobs: squeue shows user nobody only its own jobs (AdminLevel unknown: "
		const fix = "give it AdminLevel=Operator (sacctmgr modify user nobody set adminlevel=Operator) or run the source as SlurmUser (root)"
		if err := src.Ready(); err == nil || !strings.Contains(err.Error(), "slurm private data: failing for") || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fix) {
			t.Errorf("Ready() = %v; want it to say %q … %q", err, want, fix)
		}
		if got := testutil.ToFloat64(src.m.jobsHidden); got != 1 {
			t.Errorf("heliostat_slurm_jobs_hidden = %v; want 1", got)
		}
		if !strings.Contains(log, "level=ERROR") || !strings.Contains(log, fix) {
			t.Errorf("log %q; want an ERROR with %q", log, fix)
		}
		if got := testutil.ToFloat64(src.m.pollErrors); got != 0 {
			t.Errorf("heliostat_slurm_poll_errors_total = %v; want 0: the source goes on", got)
		}
	})
	t.Run("root", func(t *testing.T) {
		var logs bytes.Buffer
		rec := newRecorder(t, testCluster)
		src := privateSource(t, c, "", rec, &logs)
		log := runOnce(t, src, &logs)
		if err := src.Ready(); err != nil {
			t.Errorf("Ready() = %v; want nil", err)
		}
		if got := testutil.ToFloat64(src.m.jobsHidden); got != 0 {
			t.Errorf("heliostat_slurm_jobs_hidden = %v; want 0", got)
		}
		if got := types(rec.jobEvents(job)); got != "SUBMIT" {
			t.Errorf("root's job %s: events %q; want SUBMIT", job, got)
		}
		if strings.Contains(log, "slurm hides") || strings.Contains(log, "cannot tell") {
			t.Errorf("log %q; want nothing about PrivateData", log)
		}
	})
}

// TestPrivateDataOperator: with accounting, a Slurm operator sees every
// job despite PrivateData=jobs. The source's user (nobody) starts with
// AdminLevel None: hidden; once made an operator, the next check (Run's
// recheck) finds it fine, and the poll records root's job.
func TestPrivateDataOperator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Slurm cluster with slurmdbd and MariaDB")
	}
	const self = "nobody"
	c := slurmtest.StartWith(t, slurmtest.Options{Accounting: true, Conf: map[string]string{"PrivateData": "jobs"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := c.Run(ctx, name, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run("sacctmgr", "-i", "add", "account", "research")
	run("sacctmgr", "-i", "add", "user", self, "account=research")
	job, err := c.Submit(ctx, "--chdir=/tmp", "-o", "/dev/null", "--hold", "--wrap", "sleep 1") // root's
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	rec := newRecorder(t, testCluster)
	src := privateSource(t, c, self, rec, &logs)
	runOnce(t, src, &logs)
	if err := src.Ready(); err == nil || !strings.Contains(err.Error(), "only its own jobs (AdminLevel None)") {
		t.Errorf("AdminLevel None: Ready() = %v; want PrivateData hiding jobs (AdminLevel None)", err)
	}
	if got := types(rec.jobEvents(job)); got != "" {
		t.Fatalf("premise: root's job %s seen by %s with PrivateData=jobs: events %q", job, self, got)
	}

	run("sacctmgr", "-i", "modify", "user", self, "set", "adminlevel=Operator")
	// slurmctld learns it from slurmdbd a moment later.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(run("scontrol", "show", "assoc_mgr", "users="+self, "flags=users"), "AdminLevel=Operator"); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("slurmctld does not show %s with AdminLevel=Operator after 30 s", self)
		}
	}
	if !src.checkPrivateData(ctx) {
		t.Fatal("checkPrivateData could not tell")
	}
	if err := src.Ready(); err != nil {
		t.Errorf("Operator: Ready() = %v; want nil", err)
	}
	if got := testutil.ToFloat64(src.m.jobsHidden); got != 0 {
		t.Errorf("Operator: heliostat_slurm_jobs_hidden = %v; want 0", got)
	}
	if !strings.Contains(logs.String(), "every user's jobs now") {
		t.Errorf("log %q; want it to say the jobs are visible now", logs.String())
	}
	if err := src.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := types(rec.jobEvents(job)); got != "SUBMIT" {
		t.Errorf("Operator: root's job %s: events %q; want SUBMIT", job, got)
	}
}

// TestPrivateDataRecheck: Run checks at start, and again every
// privateDataRecheck while Slurm hides the jobs, so that granting the
// source's user an admin level clears its readiness without a restart;
// once the check finds the jobs visible, it stops asking.
func TestPrivateDataRecheck(t *testing.T) {
	squeue, _ := fakeCommand(t, `{"jobs": []}`, "", 0)
	scontrol, configRuns := fakeCommand(t, showConfig(t, "jobs", "slurm(64030)"), "", 0)
	sacctmgr, levelRuns := fakeCommand(t, "None\n", "", 0)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	cfg := Config{Cluster: testCluster, StateFile: filepath.Join(t.TempDir(), "state.json"), PollInterval: 5 * time.Millisecond,
		Squeue: squeue, Scontrol: scontrol, Sacctmgr: sacctmgr}
	src, err := New(cfg, newRecorder(t, testCluster), testLogger(t), prometheus.NewRegistry(), now)
	if err != nil {
		t.Fatal(err)
	}
	src.currentUser = func() (*user.User, error) { return &user.User{Username: "heliostat", Uid: "998"}, nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// polls waits until n more polls have ended.
	polls := func(n float64) {
		t.Helper()
		want := testutil.ToFloat64(src.m.polls) + n
		for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(src.m.polls) < want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %v polls after 10 s", want)
			}
		}
	}
	for i, step := range []struct {
		advance time.Duration
		level   string // sacctmgr prints it from this step on
		checks  int    // scontrol show config runs so far
		hidden  float64
	}{
		{checks: 1, hidden: 1},
		{advance: privateDataRecheck - time.Second, checks: 1, hidden: 1},
		{advance: time.Second, checks: 2, hidden: 1},
		{level: "Operator\n", advance: privateDataRecheck, checks: 3, hidden: 0},
		{advance: privateDataRecheck, checks: 3, hidden: 0},
	} {
		if step.level != "" {
			if err := os.WriteFile(filepath.Join(filepath.Dir(sacctmgr), "stdout"), []byte(step.level), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		clock.Add(int64(step.advance))
		polls(2) // the first may have started before the clock moved
		if got := countLines(t, configRuns); got != step.checks {
			t.Errorf("step %d: scontrol show config ran %d times; want %d", i, got, step.checks)
		}
		if got := testutil.ToFloat64(src.m.jobsHidden); got != step.hidden {
			t.Errorf("step %d: heliostat_slurm_jobs_hidden = %v; want %v", i, got, step.hidden)
		}
		if err := src.Ready(); (err != nil) != (step.hidden == 1) {
			t.Errorf("step %d: Ready() = %v; want an error: %v", i, err, step.hidden == 1)
		}
	}
	if got := countLines(t, levelRuns); got != 3 {
		t.Errorf("sacctmgr ran %d times; want 3", got)
	}
}

// showDbdConfig returns testdata/sacctmgr-show-configuration.txt (Slurm
// 22.05.8's `sacctmgr show configuration` run by an unprivileged user, with
// PrivateData=jobs in slurmdbd.conf and none in slurm.conf; its paths, ports
// and SlurmUser changed) with slurmdbd's PrivateData and SlurmUser replaced.
func showDbdConfig(t testing.TB, privateData, slurmUser string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/sacctmgr-show-configuration.txt")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "PrivateData            = jobs\n", "PrivateData            = "+privateData+"\n", 1)
	return strings.Replace(s, "SlurmUser              = slurm(64030)\n", "SlurmUser              = "+slurmUser+"\n", 1)
}

func TestParseDbdConfig(t *testing.T) {
	full, err := os.ReadFile("testdata/sacctmgr-show-configuration.txt")
	if err != nil {
		t.Fatal(err)
	}
	// What sacctmgr 22.05.8 printed, exiting 0, with slurmdbd stopped: its
	// own part only (the errors went to standard error).
	own, _, _ := strings.Cut(string(full), "\nSlurmDBD configuration:\n")
	for _, tc := range []struct {
		name string
		in   string
		want slurmConfig
		err  string // in the error; "" for none
	}{
		{name: "Slurm 22.05", in: string(full), want: slurmConfig{PrivateData: []string{"jobs"}, SlurmUser: "slurm", SlurmUID: 64030}},
		{name: "none", in: showDbdConfig(t, "none", "root(0)"), want: slurmConfig{SlurmUser: "root", SlurmUID: 0}},
		{name: "all, as slurmdbd prints it", in: showDbdConfig(t, "accounts,cloud,events,jobs,nodes,partitions,reservations,usage,users", "slurm(64030)"),
			want: slurmConfig{PrivateData: []string{"accounts", "cloud", "events", "jobs", "nodes", "partitions", "reservations", "usage", "users"}, SlurmUser: "slurm", SlurmUID: 64030}},
		{name: "sacctmgr's own slurm.conf settings are not slurmdbd's", in: "PrivateData = jobs\nSlurmUser = slurm(1)\n\nSlurmDBD configuration:\nPrivateData = none\nSlurmUser = root(0)\n",
			want: slurmConfig{SlurmUser: "root", SlurmUID: 0}},
		{name: "slurmdbd not answering", in: own, err: errNoDbdConfig.Error()},
		{name: "empty", in: "", err: errNoDbdConfig.Error()},
		{name: "no PrivateData", in: "SlurmDBD configuration:\nSlurmUser = root(0)\n", err: "sacctmgr show configuration: no PrivateData line"},
		{name: "no SlurmUser", in: "SlurmDBD configuration:\nPrivateData = jobs\n", err: "no SlurmUser line"},
		{name: "lines of the whole output", in: "PrivateData = none\nSlurmDBD configuration:\nPrivateData = jobs,,usage\nSlurmUser = root(0)\n", err: `line 3: PrivateData "jobs,,usage" has an empty flag`},
		{name: "slurmdbd's part twice", in: "SlurmDBD configuration:\nPrivateData = none\nSlurmUser = root(0)\nSlurmDBD configuration:\nPrivateData = jobs\n", err: "line 5: PrivateData again (first on line 2)"},
		{name: "uid not a number", in: "SlurmDBD configuration:\nPrivateData = jobs\nSlurmUser = slurm(x)\n", err: `sacctmgr show configuration: line 3: SlurmUser "slurm(x)": want name(uid)`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkParse(t, "parseDbdConfig", parseDbdConfig, tc.in, tc.want, tc.err) })
	}
}

// FuzzParseDbdConfig: any text parses or fails with an error; what parses
// had slurmdbd's part, and has a SlurmUser and lower-case, non-empty
// PrivateData flags.
func FuzzParseDbdConfig(f *testing.F) {
	b, err := os.ReadFile("testdata/sacctmgr-show-configuration.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("PrivateData = jobs\nSlurmDBD configuration:\nPrivateData = none\nSlurmUser = root(0)\n"))
	f.Add([]byte("SlurmDBD configuration:\nPrivateData = none\nSlurmUser = root(0)\nSlurmDBD configuration:\nPrivateData = jobs\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseDbdConfig(b)
		if err != nil {
			return
		}
		if !bytes.Contains(b, []byte(dbdConfigHeader)) {
			t.Fatalf("parseDbdConfig(%q) = %+v without %q", b, c, dbdConfigHeader)
		}
		checkParsed(t, "parseDbdConfig", b, c)
	})
}

// fakeSacctmgr writes, in a directory of its own, a sacctmgr that prints
// config (and configErr on standard error, exiting configExit) for `show
// configuration` and level for anything else, and appends its arguments to
// runs at each run.
func fakeSacctmgr(t *testing.T, config, configErr string, configExit int, level string) (path, runs string) {
	t.Helper()
	dir := t.TempDir()
	path, runs = filepath.Join(dir, "sacctmgr"), filepath.Join(dir, "runs")
	for name, s := range map[string]string{"config": config, "config.err": configErr, "level": level} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	body := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> '%[1]s/runs'\nif [ \"$*\" = 'show configuration' ]; then\n  cat '%[1]s/config'\n  cat '%[1]s/config.err' >&2\n  exit %[2]d\nfi\ncat '%[1]s/level'\n", dir, configExit)
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, runs
}

// TestCheckDbdPrivateData runs the check with --slurm.accounting against a
// fake scontrol and sacctmgr. sacct is answered by slurmdbd, by
// slurmdbd.conf's PrivateData and slurmdbd's SlurmUser, whatever slurm.conf
// says: where it hides other users' jobs from the source's user, the
// source says so as for slurm.conf, naming slurmdbd.conf; where slurmdbd's
// settings cannot be read, it cannot tell, unless slurm.conf already hides
// the jobs.
func TestCheckDbdPrivateData(t *testing.T) {
	heliostat := &user.User{Username: "heliostat", Uid: "998"}
	const fix = "give it AdminLevel=Operator (sacctmgr modify user heliostat set adminlevel=Operator) or run the source as slurmdbd's SlurmUser (slurm)"
	const dbdHides = "slurmdbd.conf has PrivateData=jobs: sacct shows user heliostat only its own jobs (AdminLevel None); " + fix
	const refused = "sacctmgr: error: Sending PersistInit msg: Connection refused\n"
	for _, tc := range []struct {
		name          string
		ctld          string // scontrol show config
		dbd           string // sacctmgr show configuration
		dbdStderr     string
		dbdExit       int
		user          *user.User
		level         string // sacctmgr's output for the admin level
		told          bool   // checkPrivateData's result
		ready         string // in Ready()'s error; "" for ready
		hidden        float64
		levelRuns     int // sacctmgr runs besides show configuration
		log           string
		commandErrors float64 // {command=sacctmgr}
		parseErrors   float64 // {input=dbd_config}
	}{
		{name: "none in both", ctld: showConfig(t, "none", "slurm(64030)"), dbd: showDbdConfig(t, "none", "slurm(64030)"), user: heliostat, told: true},
		{name: "jobs in slurmdbd.conf only", ctld: showConfig(t, "none", "slurm(64030)"), dbd: showDbdConfig(t, "jobs", "slurm(64030)"), user: heliostat, level: "None\n",
			told: true, ready: "slurm private data: failing for", hidden: 1, levelRuns: 1, log: "slurmdbd hides other users' jobs from the source's sacct"},
		{name: "the fix", ctld: showConfig(t, "none", "slurm(64030)"), dbd: showDbdConfig(t, "jobs", "slurm(64030)"), user: heliostat, level: "None\n",
			told: true, ready: dbdHides, hidden: 1, levelRuns: 1, log: fix},
		{name: "all in slurmdbd.conf", ctld: showConfig(t, "none", "slurm(64030)"), dbd: showDbdConfig(t, "accounts,cloud,events,jobs,nodes,partitions,reservations,usage,users", "slurm(64030)"),
			user: heliostat, level: "None\n", told: true, ready: "slurmdbd.conf has PrivateData=accounts,", hidden: 1, levelRuns: 1, log: "level=ERROR"},
		{name: "Operator", ctld: showConfig(t, "none", "slurm(64030)"), dbd: showDbdConfig(t, "jobs", "slurm(64030)"), user: heliostat, level: "Operator\n", told: true, levelRuns: 1},
		{name: "root", ctld: showConfig(t, "jobs", "slurm(64030)"), dbd: showDbdConfig(t, "jobs", "slurm(64030)"), user: &user.User{Username: "root", Uid: "0"}, told: true},
		{name: "slurmdbd's SlurmUser, not slurmctld's", ctld: showConfig(t, "jobs", "root(0)"), dbd: showDbdConfig(t, "jobs", "slurm(64030)"),
			user: &user.User{Username: "slurm", Uid: "64030"}, level: "None\n", told: true, ready: "slurm.conf has PrivateData=jobs: squeue shows user slurm only", hidden: 1, levelRuns: 1, log: "squeue shows"},
		{name: "slurmctld's SlurmUser, not slurmdbd's", ctld: showConfig(t, "jobs", "slurm(64030)"), dbd: showDbdConfig(t, "jobs", "slurmdbd(64031)"),
			user: &user.User{Username: "slurm", Uid: "64030"}, level: "None\n", told: true, ready: "or run the source as slurmdbd's SlurmUser (slurmdbd)", hidden: 1, levelRuns: 1, log: "slurmdbd hides"},
		{name: "both hide: both said, the level asked once", ctld: showConfig(t, "jobs", "slurm(64030)"), dbd: showDbdConfig(t, "jobs", "slurm(64030)"), user: heliostat, level: "None\n",
			told: true, ready: "squeue shows user heliostat only its own jobs (AdminLevel None); give it AdminLevel=Operator (sacctmgr modify user heliostat set adminlevel=Operator) or run the source as SlurmUser (slurm); " + dbdHides,
			hidden: 1, levelRuns: 1, log: "their pending and running jobs are not recorded"},
		{name: "slurmdbd not answering", ctld: showConfig(t, "none", "slurm(64030)"), dbd: "Configuration data as of 2026-11-24T00:13:46\nPrivateData            = jobs\n", dbdStderr: refused, user: heliostat,
			log: "cannot tell whether slurm hides", commandErrors: 1},
		{name: "slurmdbd not answering, its stderr in the log", ctld: showConfig(t, "none", "slurm(64030)"), dbd: "", dbdStderr: refused, user: heliostat,
			log: "printed no SlurmDBD configuration: sacctmgr: error: Sending PersistInit msg: Connection refused", commandErrors: 1},
		{name: "sacctmgr fails", ctld: showConfig(t, "none", "slurm(64030)"), dbdExit: 1, dbdStderr: refused, user: heliostat, log: "cannot tell whether slurm hides", commandErrors: 1},
		{name: "slurmdbd's part unreadable", ctld: showConfig(t, "none", "slurm(64030)"), dbd: "SlurmDBD configuration:\nPrivateData = jobs\n", user: heliostat,
			log: "sacctmgr show configuration: no SlurmUser line", parseErrors: 1},
		{name: "slurm.conf hides, slurmdbd unreadable", ctld: showConfig(t, "jobs", "slurm(64030)"), dbd: "SlurmDBD configuration:\nPrivateData = jobs\n", user: heliostat, level: "None\n",
			told: true, ready: "slurm.conf has PrivateData=jobs", hidden: 1, levelRuns: 1, log: "level=ERROR", parseErrors: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scontrol, _ := fakeCommand(t, tc.ctld, "", 0)
			sacctmgr, runs := fakeSacctmgr(t, tc.dbd, tc.dbdStderr, tc.dbdExit, tc.level)
			var logs bytes.Buffer
			cfg := Config{Cluster: testCluster, StateFile: filepath.Join(t.TempDir(), "state.json"), Scontrol: scontrol, Sacctmgr: sacctmgr, Accounting: true}
			src, err := New(cfg, newRecorder(t, testCluster), slog.New(slog.NewTextHandler(io.MultiWriter(&logs, tWriter{t}), nil)), prometheus.NewRegistry(), time.Now)
			if err != nil {
				t.Fatal(err)
			}
			src.currentUser = func() (*user.User, error) { return tc.user, nil }
			src.polls.OK() // only the check's condition counts here
			src.acct.OK()
			if got := src.checkPrivateData(context.Background()); got != tc.told {
				t.Errorf("checkPrivateData() = %v; want %v", got, tc.told)
			}
			if err := src.Ready(); tc.ready == "" && err != nil || tc.ready != "" && (err == nil || !strings.Contains(err.Error(), tc.ready)) {
				t.Errorf("Ready() = %v; want %q", err, tc.ready)
			}
			if got := testutil.ToFloat64(src.m.jobsHidden); got != tc.hidden {
				t.Errorf("heliostat_slurm_jobs_hidden = %v; want %v", got, tc.hidden)
			}
			b, _ := os.ReadFile(runs)
			got := strings.Split(strings.TrimSpace(string(b)), "\n")
			slices.Sort(got) // slurm.conf's check may ask for the level first
			want := append(slices.Repeat([]string{"-nP show user " + tc.user.Username + " format=adminlevel"}, tc.levelRuns), "show configuration")
			if !slices.Equal(got, want) {
				t.Errorf("sacctmgr ran with %q; want %q", got, want)
			}
			if tc.log != "" && !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log %q; want it to hold %q", logs.String(), tc.log)
			}
			if tc.log == "" && logs.Len() != 0 {
				t.Errorf("log %q; want nothing", logs.String())
			}
			if got := testutil.ToFloat64(src.m.parseErrors.WithLabelValues(inputDbdConfig)); got != tc.parseErrors {
				t.Errorf("heliostat_slurm_parse_errors_total{input=dbd_config} = %v; want %v", got, tc.parseErrors)
			}
			if got := testutil.ToFloat64(src.m.cmdErrors.WithLabelValues("sacctmgr")); got != tc.commandErrors {
				t.Errorf("heliostat_slurm_command_errors_total{command=sacctmgr} = %v; want %v", got, tc.commandErrors)
			}
		})
	}
}

// TestPrivateDataSlurmdbd runs the source with accounting on a real Slurm
// whose slurmdbd.conf has PrivateData=jobs and whose slurm.conf has none, as
// an unprivileged user (nobody, AdminLevel None). squeue shows it root's
// job, but sacct, answered by slurmdbd by slurmdbd.conf's rules, does not,
// exiting 0: the job, ended and forgotten by slurmctld while the source was
// down, is ended as lost instead of with its real end. The check says so,
// naming slurmdbd.conf (an Error log, heliostat_slurm_jobs_hidden 1,
// readiness failing); once nobody is made an operator, it finds the jobs
// visible, and sacct shows nobody root's job.
func TestPrivateDataSlurmdbd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Slurm cluster with slurmdbd and MariaDB")
	}
	const self = "nobody"
	c := slurmtest.StartWith(t, slurmtest.Options{Accounting: true, Conf: map[string]string{"JobCompType": "jobcomp/none"}, DbdConf: map[string]string{"PrivateData": "jobs"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := c.Run(ctx, name, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run("sacctmgr", "-i", "add", "account", "research")
	run("sacctmgr", "-i", "add", "user", self, "account=research")
	var logs bytes.Buffer
	rec := newRecorder(t, testCluster)
	src := privateSource(t, c, self, rec, &logs)
	src.cfg.JobCompLog, src.cfg.Accounting, src.cfg.Sacct = "", true, slurmtest.CommandAs(t, self, "sacct")
	src.cfg.AccountingInterval = 100 * time.Millisecond
	poll := func() {
		t.Helper()
		if err := src.Poll(ctx); err != nil {
			t.Fatalf("poll: %v", err)
		}
	}

	a, err := c.Submit(ctx, "--chdir=/tmp", "-o", "/dev/null", "-J", "a", "--wrap", "sleep 3") // root's
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); types(rec.jobEvents(a)) != "SUBMIT START"; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s: events %q after 30 s; want SUBMIT START (slurm.conf hides nothing from squeue)", a, types(rec.jobEvents(a)))
		}
		poll()
	}
	// The source is down: A ends, and slurmctld forgets it.
	if _, err := c.WaitJob(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartController(ctx, true); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); len(rec.jobEvents(a)) < 3; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s: events %q after 30 s; want its END", a, types(rec.jobEvents(a)))
		}
		poll()
	}
	if e := rec.jobEvents(a)[2]; e.State != schemas.StateUnknown || testutil.ToFloat64(src.m.lost) != 1 {
		t.Fatalf("premise: job %s ended %v (lost: %v) with slurmdbd.conf's PrivateData=jobs; want UNKNOWN, lost: sacct hides it from %s",
			a, e.State, testutil.ToFloat64(src.m.lost), self)
	}

	if !src.checkPrivateData(ctx) {
		t.Fatalf("checkPrivateData could not tell:\n%s", logs.String())
	}
	const want = "slurmdbd.conf has PrivateData=jobs: sacct shows user nobody only its own jobs (AdminLevel None); give it AdminLevel=Operator (sacctmgr modify user nobody set adminlevel=Operator) or run the source as slurmdbd's SlurmUser (root)"
	if err := src.Ready(); err == nil || !strings.Contains(err.Error(), "slurm private data: failing for") || !strings.Contains(err.Error(), want) {
		t.Errorf("Ready() = %v; want it to say %q", err, want)
	}
	if err := src.Ready(); err != nil && strings.Contains(err.Error(), "slurm.conf has") {
		t.Errorf("Ready() = %v; want nothing about slurm.conf, which hides nothing", err)
	}
	if got := testutil.ToFloat64(src.m.jobsHidden); got != 1 {
		t.Errorf("heliostat_slurm_jobs_hidden = %v; want 1", got)
	}
	if log := logs.String(); !strings.Contains(log, "level=ERROR") || !strings.Contains(log, want) {
		t.Errorf("log %q; want an ERROR with %q", log, want)
	}

	run("sacctmgr", "-i", "modify", "user", self, "set", "adminlevel=Operator")
	if !src.checkPrivateData(ctx) {
		t.Fatalf("checkPrivateData could not tell:\n%s", logs.String())
	}
	if err := src.Ready(); err != nil {
		t.Errorf("Operator: Ready() = %v; want nil", err)
	}
	if got := testutil.ToFloat64(src.m.jobsHidden); got != 0 {
		t.Errorf("Operator: heliostat_slurm_jobs_hidden = %v; want 0", got)
	}
	if !strings.Contains(logs.String(), "every user's jobs now") {
		t.Errorf("log %q; want it to say the jobs are visible now", logs.String())
	}
	sacct := exec.CommandContext(ctx, src.cfg.Sacct, "-a", "-X", "-n", "-P", "-o", "jobid", "-j", a)
	sacct.Env = c.Env()
	out, err := sacct.Output()
	if err != nil || strings.TrimSpace(string(out)) != a {
		t.Errorf("Operator: sacct as %s for job %s: %q, %v; want the job", self, a, out, err)
	}
}

// checkParse checks that parse (named name) reads in as want, or fails with
// an error containing wantErr when it is not "".
func checkParse(t *testing.T, name string, parse func([]byte) (slurmConfig, error), in string, want slurmConfig, wantErr string) {
	t.Helper()
	got, err := parse([]byte(in))
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s(%q) error = %v; want one containing %q", name, in, err, wantErr)
		}
		return
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("%s(%q) = %+v, %v; want %+v", name, in, got, err, want)
	}
}

// checkParsed checks what a config parser (named name) made of b: a
// SlurmUser, and lower-case, non-empty PrivateData flags.
func checkParsed(t *testing.T, name string, b []byte, c slurmConfig) {
	t.Helper()
	if c.SlurmUser == "" || c.SlurmUID < -1 {
		t.Fatalf("%s(%q): SlurmUser %q (%d)", name, b, c.SlurmUser, c.SlurmUID)
	}
	for _, fl := range c.PrivateData {
		if fl == "" || fl != strings.ToLower(fl) || strings.TrimSpace(fl) != fl {
			t.Fatalf("%s(%q): PrivateData flag %q", name, b, fl)
		}
	}
}
