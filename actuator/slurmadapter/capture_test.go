package slurmadapter

import (
	"context"
	"flag"
	"os"
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
