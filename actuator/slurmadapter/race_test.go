package slurmadapter

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
)

// TestPowerDownRace pins what PowerDown relies on in Slurm. PowerDown reads
// the node and the queue and sends POWER_DOWN only for an idle node that no
// pending job is bound for, but slurmctld can start a job there between the
// read and the command. This test sends the command, as the adapter does,
// to a node whose job is already running, as that race would leave it, and
// checks that nothing is lost: the job runs to completion, the suspend
// program runs only after it ended, and meanwhile the adapter reports the
// node busy and going down, so no pass counts it idle or powered and a
// second PowerDown is refused.
func TestPowerDownRace(t *testing.T) {
	c := slurmtest.StartWith(t, slurmtest.Options{Conf: map[string]string{"SuspendTimeout": "3", "ResumeTimeout": "30"}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := New(Config{Conf: c.Conf()}, c.Env(), nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Submit(ctx, "-N1", "-w", "gpu1", "--gres=gpu:8", "--wrap", "sleep 12")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, id); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail(20))
	}
	if _, err := s.run(ctx, "scontrol", "update", "nodename=gpu1", "state=POWER_DOWN"); err != nil {
		t.Fatalf("POWER_DOWN of a node with a running job: %v\n%s", err, c.LogTail(20))
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if st, err := c.State(ctx, id); err != nil || st != "RUNNING" {
			t.Fatalf("job %s is %q (%v) after POWER_DOWN of its node; want RUNNING until it ends\n%s", id, st, err, c.LogTail(20))
		}
		if calls, err := c.SuspendCalls(); err != nil || len(calls) > 0 {
			t.Fatalf("suspend program ran %v (%v) while the node's job was running", calls, err)
		}
		nodes, err := s.nodes(ctx, "gpu1")
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := find(nodes, "gpu1"); !ok || !n.Busy || n.Power != adapter.PowerGoingDown {
			t.Fatalf("adapter sees gpu1 as %+v; want busy and going down", n)
		}
	}
	if err := s.PowerDown(ctx, "gpu1"); !errors.Is(err, adapter.ErrNodeBusy) {
		t.Errorf("PowerDown of gpu1 with a running job = %v; want ErrNodeBusy", err)
	}
	states, err := c.WaitJob(ctx, id)
	if err != nil || states[0] != "COMPLETED" {
		t.Fatalf("job %s ended %v (%v); want COMPLETED\n%s", id, states, err, c.LogTail(20))
	}
	for {
		calls, err := c.SuspendCalls()
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(calls, "gpu1") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("suspend program not run for gpu1 after its job ended (calls %v)\n%s", calls, c.LogTail(20))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
