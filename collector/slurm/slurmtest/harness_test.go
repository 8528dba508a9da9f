package slurmtest

import (
	"context"
	"os"
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
