package slurmadapter

import (
	"context"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
)

var update = flag.Bool("update", false, "capture testdata/*.json from a real Slurm")

// TestCaptureFixtures writes the squeue and sinfo fixtures of the decoder
// tests from a real Slurm 22.05 in a known state (only with -update): gpu1
// runs a 2-GPU job, a 8-GPU job is pending bound for gpu1, a pending array,
// gpu3 drained, gpu4 powered down.
func TestCaptureFixtures(t *testing.T) {
	if !*update {
		t.Skip("fixtures are captured with -update")
	}
	c := slurmtest.StartWith(t, slurmtest.Options{Conf: map[string]string{"SuspendTimeout": "2"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must := func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run := must(c.Submit(ctx, "-w", "gpu1", "--gres=gpu:2", "--wrap", "sleep 120"))
	must(c.Submit(ctx, "-w", "gpu1", "--gres=gpu:8", "-t", "90", "-J", "bound", "--wrap", "sleep 1"))
	must(c.Submit(ctx, "--gres=gpu:2", "--array=0-2", "-N1", "--hold", "-J", "arr", "--wrap", "true"))
	must(c.Run(ctx, "scontrol", "update", "nodename=gpu3", "state=DRAIN", "reason=test"))
	must(c.Run(ctx, "scontrol", "update", "nodename=gpu4", "state=POWER_DOWN"))
	if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, run); err != nil {
		t.Fatal(err)
	}
	for {
		out := must(c.Run(ctx, "sinfo", "-h", "-n", "gpu4", "-o", "%t"))
		if strings.TrimSpace(out) == "idle~" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for name, args := range map[string][]string{"squeue.json": {"squeue", "--json"}, "sinfo.json": {"sinfo", "--json"}} {
		out := must(c.Run(ctx, args[0], args[1:]...))
		if err := os.WriteFile("testdata/"+name, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// updateCases are the answers of `scontrol update jobid=J priority=P` that
// TestCaptureUpdateReplies captures into testdata/scontrol-update/NAME.txt
// (scontrol's standard error; each exited 1).
var updateCases = []string{
	"array-some-held",           // pending array 0-3, task 2 held
	"array-all-held",            // pending array 0-3, each task held
	"array-held-rest-cancelled", // array 0-3, task 2 held, the others cancelled
	"array-ended-running-held",  // task 0 ended, 1 running, 2 pending, 3 held
	"array-running-only",        // task 0 ended, 1 running, 2 and 3 held
	"array-long-lists",          // pending array 0-99, each odd task held
	"job-held",                  // a held job that is not an array
	"job-unknown",               // no such job
	"task-held",                 // jobid=J_T of a held task
	"task-ended",                // jobid=J_T of an ended task
	"task-unknown",              // jobid=J_T past the array's last task
}

// TestCaptureUpdateReplies writes the fixtures of TestPriorityResultFixtures
// from a real Slurm 22.05 (only with -update).
func TestCaptureUpdateReplies(t *testing.T) {
	if !*update {
		t.Skip("fixtures are captured with -update")
	}
	c, ctx, must := startCluster(t)
	s, err := New(Config{Conf: c.Conf()}, c.Env(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	capture := func(name, jobID string) {
		t.Helper()
		_, stderr, err := s.command(ctx, "scontrol", "update", "jobid="+jobID, "priority=4242")
		if err == nil {
			t.Fatalf("%s: scontrol update jobid=%s exited 0", name, jobID)
		}
		got[name] = stderr
	}
	hold := func(id string, tasks ...string) {
		t.Helper()
		var ids []string
		for _, task := range tasks {
			ids = append(ids, id+"_"+task)
		}
		must(c.Run(ctx, "scontrol", "hold", strings.Join(ids, ",")))
	}
	// gpu1..gpu3 busy; the one-node array r runs on gpu4, the others wait.
	filler := must(c.Submit(ctx, "-N3", "-w", "gpu[1-3]", "--gres=gpu:8", "--wrap", "sleep 300"))
	r := must(c.Submit(ctx, "-N1", "--gres=gpu:8", "--array=0-3", "--wrap", `[ "$SLURM_ARRAY_TASK_ID" = 0 ] || sleep 300`))
	if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, filler, r+"_1"); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail(20))
	}
	if _, err := c.WaitJob(ctx, r+"_0"); err != nil {
		t.Fatal(err)
	}
	array := func() string { return must(c.Submit(ctx, "-N4", "--gres=gpu:8", "--array=0-3", "--wrap", "true")) }

	a := array()
	hold(a, "2")
	capture("array-some-held", a)
	capture("task-held", a+"_2")
	capture("task-unknown", a+"_9")
	b := array()
	hold(b, "0", "1", "2", "3")
	capture("array-all-held", b)
	d := array()
	hold(d, "2")
	must(c.Run(ctx, "scancel", d+"_0", d+"_1", d+"_3"))
	for must(c.Run(ctx, "squeue", "-h", "-r", "-j", d, "-t", "PENDING", "-o", "%i")) != d+"_2" {
		time.Sleep(100 * time.Millisecond)
	}
	capture("array-held-rest-cancelled", d)
	hold(r, "3")
	capture("array-ended-running-held", r)
	hold(r, "2")
	capture("array-running-only", r)
	capture("task-ended", r+"_0")
	long := must(c.Submit(ctx, "-N4", "--gres=gpu:8", "--array=0-99", "--wrap", "true"))
	var odd []string
	for i := 1; i < 100; i += 2 {
		odd = append(odd, strconv.Itoa(i))
	}
	hold(long, odd...)
	capture("array-long-lists", long)
	capture("job-held", must(c.Submit(ctx, "-N4", "--gres=gpu:8", "--hold", "--wrap", "true")))
	capture("job-unknown", "999999")

	if err := os.MkdirAll("testdata/scontrol-update", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range updateCases {
		if _, ok := got[name]; !ok {
			t.Fatalf("case %s not captured", name)
		}
		if err := os.WriteFile("testdata/scontrol-update/"+name+".txt", []byte(got[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCaptureConfig writes testdata/scontrol-show-config.txt, the fixture of
// TestDecodeConfig, from a real Slurm 22.05 whose slurm.conf excludes nodes
// and a partition from power saving (only with -update).
func TestCaptureConfig(t *testing.T) {
	if !*update {
		t.Skip("fixtures are captured with -update")
	}
	c := slurmtest.StartWith(t, slurmtest.Options{Conf: map[string]string{"SuspendExcNodes": "gpu[2-3]:1,gpu4", "SuspendExcParts": "batch"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := c.Run(ctx, "scontrol", "show", "config")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("testdata/scontrol-show-config.txt", []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}
