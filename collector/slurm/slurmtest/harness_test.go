package slurmtest

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestCluster submits jobs to the shared cluster and checks that they run on
// the fake GPUs and end in the states Slurm reports for them.
func TestCluster(t *testing.T) {
	c := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"one gpu", []string{"--gres=gpu:1", "--wrap", "true"}, "COMPLETED"},
		{"two nodes", []string{"--gres=gpu:8", "-N2", "--wrap", "true"}, "COMPLETED"},
		{"exit 3", []string{"--wrap", "exit 3"}, "FAILED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := c.Submit(ctx, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			states, err := c.WaitJob(ctx, id)
			if err != nil {
				t.Fatalf("%v\n%s", err, c.LogTail(20))
			}
			if states[0] != tc.want {
				t.Errorf("job %s state = %q; want %q", id, states[0], tc.want)
			}
		})
	}
	// The jobs above are in the completion log once they ended.
	b, err := os.ReadFile(c.JobCompLog())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "JobId="); n != 3 {
		t.Errorf("job completion log has %d records; want 3:\n%s", n, b)
	}
	if s, err := c.State(ctx, "999999"); err != nil || s != "" {
		t.Errorf("State(unknown job) = %q, %v; want \"\", nil", s, err)
	}
}

// TestPowerScripts powers a node down and up with scontrol on a private
// cluster and checks that the suspend and resume programs ran with the node
// and that the node comes back usable.
func TestPowerScripts(t *testing.T) {
	c := StartWith(t, Options{Conf: map[string]string{"SuspendTimeout": "3", "ResumeTimeout": "30"}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nodeState := func() string {
		out, err := c.Run(ctx, "sinfo", "-h", "-n", "gpu4", "-o", "%t")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	waitNode := func(want string) {
		t.Helper()
		for s := nodeState(); s != want; s = nodeState() {
			select {
			case <-ctx.Done():
				t.Fatalf("gpu4 state %q; want %q\n%s", s, want, c.LogTail(20))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	if _, err := c.Run(ctx, "scontrol", "update", "nodename=gpu4", "state=POWER_DOWN"); err != nil {
		t.Fatal(err)
	}
	waitNode("idle~")
	if got, err := c.SuspendCalls(); err != nil || len(got) != 1 || got[0] != "gpu4" {
		t.Errorf("SuspendCalls() = %q, %v; want [gpu4]", got, err)
	}
	if _, err := c.Run(ctx, "scontrol", "update", "nodename=gpu4", "state=POWER_UP"); err != nil {
		t.Fatal(err)
	}
	waitNode("idle")
	if got, err := c.ResumeCalls(); err != nil || len(got) != 1 || got[0] != "gpu4" {
		t.Errorf("ResumeCalls() = %q, %v; want [gpu4]", got, err)
	}
	// The node runs jobs again.
	id, err := c.Submit(ctx, "-w", "gpu4", "--gres=gpu:1", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	if states, err := c.WaitJob(ctx, id); err != nil || states[0] != "COMPLETED" {
		t.Errorf("job on the resumed node: %v, %v; want COMPLETED", states, err)
	}
}

// TestAccounting starts a private cluster with accounting and checks that
// sacct --json lists ended jobs with their state, exit code and GPUs.
func TestAccounting(t *testing.T) {
	c := StartWith(t, Options{Accounting: true, Conf: map[string]string{"JobCompType": "jobcomp/none"}})
	if !c.Accounting() {
		t.Fatal("Accounting() = false on a cluster started with Options.Accounting")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now().Add(-time.Minute).Format("2006-01-02T15:04:05")
	failed, err := c.Submit(ctx, "--gres=gpu:2", "--wrap", "exit 3")
	if err != nil {
		t.Fatal(err)
	}
	done, err := c.Submit(ctx, "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	if states, err := c.WaitJob(ctx, failed, done); err != nil || states[0] != "FAILED" || states[1] != "COMPLETED" {
		t.Fatalf("jobs ended %v, %v; want [FAILED COMPLETED]", states, err)
	}
	type exitCode struct {
		Status     string `json:"status"`
		ReturnCode *int   `json:"return_code"`
	}
	type job struct {
		JobID int `json:"job_id"`
		State struct {
			Current string `json:"current"`
		} `json:"state"`
		ExitCode exitCode `json:"exit_code"`
		TRES     struct {
			Allocated []struct {
				Type  string `json:"type"`
				Name  string `json:"name"`
				Count int    `json:"count"`
			} `json:"allocated"`
		} `json:"tres"`
	}
	type response struct {
		Meta struct {
			Plugin struct {
				Type string `json:"type"`
			} `json:"plugin"`
		} `json:"meta"`
		Jobs []job `json:"jobs"`
	}
	// slurmctld sends the records to slurmdbd asynchronously: poll until
	// both jobs are listed as ended.
	var (
		resp response
		jobs map[string]job
		out  string
	)
	for {
		out, err = c.Run(ctx, "sacct", "--json", "-X", "-a", "-S", start, "-E", "now")
		if err != nil {
			t.Fatal(err)
		}
		resp = response{}
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			t.Fatalf("sacct --json: %v:\n%s", err, out)
		}
		jobs = map[string]job{}
		for _, j := range resp.Jobs {
			jobs[strconv.Itoa(j.JobID)] = j
		}
		if jobs[failed].State.Current == "FAILED" && jobs[done].State.Current == "COMPLETED" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sacct does not list jobs %s FAILED and %s COMPLETED:\n%s", failed, done, out)
		case <-time.After(500 * time.Millisecond):
		}
	}
	// Slurm 22.05's JSON (plugin openapi/dbv0.0.38) writes every exit by
	// exit(2) as status SUCCESS with return_code 0, whatever the code; the
	// database has it right, as sacct's text output shows.
	want3 := func(ec exitCode) bool { return ec.ReturnCode != nil && *ec.ReturnCode == 3 }
	if resp.Meta.Plugin.Type == "openapi/dbv0.0.38" {
		want3 = func(ec exitCode) bool { return ec.Status == "SUCCESS" && ec.ReturnCode != nil && *ec.ReturnCode == 0 }
	}
	if ec := jobs[failed].ExitCode; !want3(ec) {
		t.Errorf("job %s exit_code = %+v (plugin %s); want return_code 3:\n%s", failed, ec, resp.Meta.Plugin.Type, out)
	}
	text, err := c.Run(ctx, "sacct", "-n", "-X", "-P", "-j", failed+","+done, "-o", "JobID,State,ExitCode")
	if err != nil {
		t.Fatal(err)
	}
	if want := failed + "|FAILED|3:0\n" + done + "|COMPLETED|0:0\n"; text != want {
		t.Errorf("sacct -o JobID,State,ExitCode printed %q; want %q", text, want)
	}
	gpus := -1
	for _, tr := range jobs[failed].TRES.Allocated {
		if tr.Type == "gres" && tr.Name == "gpu" {
			gpus = tr.Count
		}
	}
	if gpus != 2 {
		t.Errorf("job %s allocated gres/gpu count = %d; want 2:\n%s", failed, gpus, out)
	}
	// The controller restarts with slurmdbd and MariaDB left running, and
	// jobs it runs afterwards are accounted too.
	if err := c.RestartController(ctx, false); err != nil {
		t.Fatal(err)
	}
	again, err := c.Submit(ctx, "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJob(ctx, again); err != nil {
		t.Fatal(err)
	}
	for {
		out, err := c.Run(ctx, "sacct", "-n", "-X", "-P", "-j", again, "-o", "State")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(out) == "COMPLETED" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sacct after a controller restart: job %s is %q; want COMPLETED", again, out)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func TestSetConf(t *testing.T) {
	for _, tc := range []struct {
		conf string
		set  map[string]string
		want string
	}{
		{"A=1\nB=2", nil, "A=1\nB=2"},
		{"A=1\nB=2", map[string]string{"B": "3"}, "A=1\nB=3"},
		{"A=1\n#B=2", map[string]string{"B": "3", "C": "x"}, "A=1\n#B=2\nB=3\nC=x"},
	} {
		if got := setConf(tc.conf, tc.set); got != tc.want {
			t.Errorf("setConf(%q, %v) = %q; want %q", tc.conf, tc.set, got, tc.want)
		}
	}
}

// TestInstallFailure: a failed mariadb-install-db is reported by its error
// lines, not by the advice text that follows them (which is all a tail of
// the output showed when concurrent installs shared /tmp).
func TestInstallFailure(t *testing.T) {
	advice := "\nInstallation of system tables failed!  Examine the logs in\n/tmp/x/mysql for more information.\n" +
		strings.Repeat("Please check all of the above before submitting a bug report\n", 20)
	for _, tc := range []struct {
		name, out, want string
	}{
		{"error lines", "Installing MariaDB/MySQL system tables in '/tmp/x/mysql' ...\n" +
			"2026-11-25  2:15:10 1 [Warning] Could not remove temporary table: '/tmp/#sql-temptable-52cb-1-3', error: 2\n" +
			"ERROR: 1051  Unknown table 'mysql.tmp_user_sys'\n2026-11-25  2:15:10 0 [ERROR] Aborting\n" + advice,
			"2026-11-25  2:15:10 1 [Warning] Could not remove temporary table: '/tmp/#sql-temptable-52cb-1-3', error: 2; " +
				"ERROR: 1051  Unknown table 'mysql.tmp_user_sys'; 2026-11-25  2:15:10 0 [ERROR] Aborting"},
		{"no error line", "mariadb-install-db: cannot find mariadbd\n", "mariadb-install-db: cannot find mariadbd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := installFailure([]byte(tc.out)); got != tc.want {
				t.Errorf("installFailure = %q; want %q", got, tc.want)
			}
		})
	}
}

// TestDbdConfWithoutAccounting: slurmdbd.conf settings without accounting
// would be ignored silently; start refuses them, starting nothing.
func TestDbdConfWithoutAccounting(t *testing.T) {
	c, err := start(Options{DbdConf: map[string]string{"PrivateData": "jobs"}})
	if err == nil || !strings.Contains(err.Error(), "DbdConf without Accounting") {
		if c != nil {
			c.Stop()
		}
		t.Fatalf("start(DbdConf without Accounting) = %v; want an error", err)
	}
}

// TestTypedGres: Options.GPUTypes split the 8 fake devices among the types
// in order; types that do not add up to GPUsPerNode, or lack a name or a
// count, are refused.
func TestTypedGres(t *testing.T) {
	conf, gres, err := typedGres([]GPUType{{"a100", 4}, {"v100", 4}})
	wantGres := "AutoDetect=off\nNodeName=gpu[1-4] Name=gpu Type=a100 File=/dev/tty[0-3]\nNodeName=gpu[1-4] Name=gpu Type=v100 File=/dev/tty[4-7]\n"
	if err != nil || conf != "gpu:a100:4,gpu:v100:4" || gres != wantGres {
		t.Errorf("typedGres(a100 4, v100 4) = %q, %q, %v; want gpu:a100:4,gpu:v100:4, %q", conf, gres, err, wantGres)
	}
	for _, bad := range [][]GPUType{{{"a100", 4}}, {{"a100", 8}, {"v100", 1}}, {{"", 8}}, {{"a100", 0}, {"v100", 8}}, {{"a:1", 8}}} {
		if _, _, err := typedGres(bad); err == nil {
			t.Errorf("typedGres(%+v): no error", bad)
		}
	}
}
