package slurmadapter

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/actuator/ces"
	"github.com/heliostat-dev/heliostat/actuator/loop"
	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
)

// TestSlurmWakesNodesAJobAsksFor: on a real Slurm 22.05 whose nodes carry
// features (gpu1, gpu2: a100; gpu3, gpu4: h100), with gpu2 and gpu4
// powered down and gpu3 busy, a pending two-node job that asks for h100
// cannot start, and Slurm does not resume a node for it. Counted in nodes
// of the partition, idle gpu1 would meet the demand (gpu3 busy, one node
// more); counted by the nodes that fit the job, gpu4 — the h100 node it can
// use, not gpu2, which sorts first by name — is needed, and the plan powers
// it up though its count target is met; the resume program runs for gpu4, and once
// gpu3 is free the job runs on gpu3 and gpu4. The adapter reads the job's
// constraint and the nodes' active features as Slurm writes them.
func TestSlurmWakesNodesAJobAsksFor(t *testing.T) {
	c := slurmtest.StartWith(t, slurmtest.Options{Conf: map[string]string{"SuspendTimeout": "3", "ResumeTimeout": "30"}})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	must := mustOK(t, c)
	must(c.Run(ctx, "scontrol", "update", "nodename=gpu[1-2]", "availablefeatures=a100", "activefeatures=a100"))
	must(c.Run(ctx, "scontrol", "update", "nodename=gpu[3-4]", "availablefeatures=h100,ib", "activefeatures=h100,ib"))
	must(c.Run(ctx, "scontrol", "update", "nodename=gpu2,gpu4", "state=power_down"))
	for st := ""; st != "gpu2 idle~\ngpu4 idle~"; st = strings.TrimSpace(must(c.Run(ctx, "sinfo", "-h", "-N", "-n", "gpu2,gpu4", "-o", "%N %t"))) {
		select {
		case <-ctx.Done():
			t.Fatalf("gpu2, gpu4: %q; want both idle~ (powered down)\n%s", st, c.LogTail(20))
		case <-time.After(200 * time.Millisecond):
		}
	}
	busy := runningJob(ctx, t, c, "-w", "gpu3", "--gres=gpu:8", "--wrap", "sleep 300")
	wide := must(c.Submit(ctx, "-N2", "--gres=gpu:8", "--constraint=h100&ib", "--wrap", "true"))
	waitReason(ctx, t, c, wide, "Resources", func(r string) bool { return r == "Resources" })

	s, clk, snap := snapshotNow(ctx, t, c)
	for _, j := range snap.Jobs {
		if j.ID == wide && j.Constraint != "h100&ib" {
			t.Errorf("job %s: constraint %q; want h100&ib", wide, j.Constraint)
		}
	}
	for _, n := range snap.Nodes {
		want := []string{"h100", "ib"}
		if n.Name < "gpu3" {
			want = []string{"a100"}
		}
		if !slices.Equal(n.Features, want) {
			t.Errorf("node %s: features %q; want %q", n.Name, n.Features, want)
		}
	}
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"batch"}, Nodes: []string{"gpu*"}}, s, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	lcfg := loop.Config{Cluster: "slurm-test", Interval: time.Second, PeakWindow: time.Minute}
	lcfg.CES = ces.DefaultConfig()
	lcfg.CES.MinPowered, lcfg.CES.Buffer, lcfg.CES.WakeLatency = 0, 0, time.Minute
	l, err := loop.New(lcfg, g, &memAudit{}, nil, nil, nil, nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := l.Once(ctx)
	if err != nil {
		t.Fatalf("pass: %v\n%s", err, c.LogTail(20))
	}
	var up []string
	for _, a := range rep.Actions {
		if a.Kind == string(adapter.PowerUp) {
			up = append(up, a.Target)
			if a.Outcome != audit.Applied || !strings.Contains(a.Reason, "a pending job can run only on nodes like it") {
				t.Errorf("power-up of %s: %s (%s), reason %q", a.Target, a.Outcome, a.Error, a.Reason)
			}
		}
	}
	if !slices.Equal(up, []string{"gpu4"}) {
		t.Fatalf("powered up %v; want [gpu4]; actions %+v", up, rep.Actions)
	}
	must(c.Run(ctx, "scancel", busy))
	states, err := c.WaitJob(ctx, wide)
	if err != nil || states[0] != "COMPLETED" {
		t.Fatalf("job %s: %v, %v; want COMPLETED\n%s", wide, states, err, c.LogTail(20))
	}
	if calls, err := c.ResumeCalls(); err != nil || !slices.Equal(calls, []string{"gpu4"}) {
		t.Errorf("resume program calls %q, %v; want [gpu4]", calls, err)
	}
}

// TestSlurmNodeWithTwoGPUTypes: on a real Slurm 22.05 whose nodes each have
// 4 a100 and 4 v100 GPUs (gres gpu:a100:4,gpu:v100:4), the adapter reads
// every node's GPUs by type as sinfo writes them, a running job's GPUs as
// used (and of which type: gpu1's free GPUs are 4 a100 and 1 v100), and a
// pending job's GPU type; a node fits a job asking for v100s
// as far as its v100s go, not its 8 GPUs.
func TestSlurmNodeWithTwoGPUTypes(t *testing.T) {
	c := slurmtest.StartWith(t, slurmtest.Options{GPUTypes: []slurmtest.GPUType{{Name: "a100", Count: 4}, {Name: "v100", Count: 4}}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must := mustOK(t, c)
	busy := runningJob(ctx, t, c, "-w", "gpu1", "--gres=gpu:v100:3", "--wrap", "sleep 300")
	waiting := must(c.Submit(ctx, "-w", "gpu1", "--gres=gpu:v100:2", "--wrap", "true"))
	waitReason(ctx, t, c, waiting, "Resources", func(r string) bool { return r == "Resources" })

	_, _, snap := snapshotNow(ctx, t, c)
	types := map[string]int{"a100": 4, "v100": 4}
	nodes := map[string]adapter.Node{}
	for _, n := range snap.Nodes {
		nodes[n.Name] = n
		free := 8
		if n.Name == "gpu1" {
			free = 5
		}
		if !maps.Equal(n.GPUTypes, types) || n.GPUs != 8 || n.FreeGPUs != free {
			t.Errorf("node %s: GPUs %d (%d free) by type %v; want 8 (%d free), %v", n.Name, n.GPUs, n.FreeGPUs, n.GPUTypes, free, types)
		}
		wantFree := map[string]int{"a100": 4, "v100": 4}
		if n.Name == "gpu1" {
			wantFree["v100"] = 1
		}
		if !maps.Equal(n.FreeGPUTypes, wantFree) {
			t.Errorf("node %s: free GPUs by type %v; want %v", n.Name, n.FreeGPUTypes, wantFree)
		}
	}
	found := false
	for _, j := range snap.Jobs {
		if j.ID == waiting {
			found = true
			if j.GPUType != "v100" || j.GPUs != 2 {
				t.Errorf("job %s: %d GPUs of type %q; want 2 of v100", waiting, j.GPUs, j.GPUType)
			}
		}
	}
	if !found {
		t.Errorf("pending job %s not in the snapshot: %+v", waiting, snap.Jobs)
	}
	gpu2 := nodes["gpu2"]
	for _, tc := range []struct {
		job  adapter.Job
		want bool
	}{
		{adapter.Job{GPUs: 4, NodeCount: 1, GPUType: "v100"}, true},
		{adapter.Job{GPUs: 5, NodeCount: 1, GPUType: "v100"}, false},
		{adapter.Job{GPUs: 8, NodeCount: 1}, true},
	} {
		if fits, _ := tc.job.Fits(&gpu2); fits != tc.want {
			t.Errorf("%d GPUs of type %q on gpu2: fits %v; want %v", tc.job.GPUs, tc.job.GPUType, fits, tc.want)
		}
	}
	must(c.Run(ctx, "scancel", busy, waiting))
}
