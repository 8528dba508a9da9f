package slurmadapter

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
)

// TestSlurmPowerUpOfPoweredNode asks a real Slurm 22.05 to power up nodes
// that are already on: gpu4, never powered down, and gpu3, which a pass saw
// powered down but which woke before the action (here by hand; Slurm also
// wakes a node for a job by itself). Nothing is sent, and the action is
// skipped, saying the node is already powered, not applied; its unit of the
// power cap is given back, so a power-down the cap has room for goes
// through. Before, both read as applied though no scontrol command ran, and
// each spent a unit of the cap.
func TestSlurmPowerUpOfPoweredNode(t *testing.T) {
	c := slurmtest.StartWith(t, slurmtest.Options{Conf: map[string]string{"SuspendTimeout": "3", "ResumeTimeout": "30"}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	must := mustOK(t, c)
	waitNode := func(name string, ok func(string) bool) {
		t.Helper()
		for st := ""; !ok(st); st = must(c.Run(ctx, "sinfo", "-h", "-n", name, "-o", "%t")) {
			select {
			case <-ctx.Done():
				t.Fatalf("%s is %q\n%s", name, st, c.LogTail(20))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	bin, cmdLog := loggedCommands(t, "squeue", "sinfo", "scontrol")
	clk := &clock{t: time.Now()}
	s, err := New(Config{Conf: c.Conf(), BinDir: bin}, c.Env(), nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"batch"}, Nodes: []string{"gpu*"}, MaxPowerPerHour: 1}, s, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	must(c.Run(ctx, "scontrol", "update", "nodename=gpu3", "state=POWER_DOWN"))
	waitNode("gpu3", func(st string) bool { return st == "idle~" })
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := find(snap.Nodes, "gpu3"); n.Power != adapter.PowerOff {
		t.Fatalf("premise: gpu3 is %s (%s); want off", n.Power, n.State)
	}
	must(c.Run(ctx, "scontrol", "update", "nodename=gpu3", "state=POWER_UP"))
	waitNode("gpu3", func(st string) bool { return st != "" && st != "idle~" })

	for _, node := range []string{"gpu4", "gpu3"} {
		if err := s.PowerUp(ctx, node); !errors.Is(err, adapter.ErrAlreadyPowered) {
			t.Errorf("PowerUp(%s) = %v; want %v", node, err, adapter.ErrAlreadyPowered)
		}
		if r := g.Do(ctx, adapter.Action{Kind: adapter.PowerUp, Target: node}); r.Outcome != adapter.Skipped || !errors.Is(r.Err, adapter.ErrAlreadyPowered) {
			t.Errorf("guard power-up of %s, already powered = %s %v; want skipped, %v", node, r.Outcome, r.Err, adapter.ErrAlreadyPowered)
		}
	}
	b, err := os.ReadFile(cmdLog)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "state=POWER_UP") {
		t.Errorf("commands sent:\n%s\nwant no POWER_UP", b)
	}
	// The cap of one transition an hour has room: nothing was powered.
	if r := g.Do(ctx, adapter.Action{Kind: adapter.PowerDown, Target: "gpu2"}); r.Outcome != adapter.Applied {
		t.Errorf("power-down of gpu2 after the power-ups that sent nothing = %s %v; want applied", r.Outcome, r.Err)
	}
}
