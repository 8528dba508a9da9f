package slurmadapter

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
)

// TestSlurmGresForms: on a real Slurm 22.05 whose nodes also carry a
// count-only GRES (tmpdisk:100G), which sinfo's gres_used counts in bytes
// ("gpu:1,tmpdisk:10737418240") while a job holds some, the adapter reads
// its snapshot: gpu1, running a job of one GPU and 10G of tmpdisk, is busy
// with 7 GPUs free, and a pending job that asks for 8 GPUs and 10G reads as
// its 8 GPUs. Before 2026-11-25 the byte count failed the sinfo document,
// and with it every snapshot and every pass of the actuator. A held job
// submitted with --gpus-per-socket=2 --sockets-per-node=2 -N2 reads as 8
// GPUs (before, as none: ranked first by QSSF, and no demand).
func TestSlurmGresForms(t *testing.T) {
	c := slurmtest.StartWith(t, slurmtest.Options{Gres: []string{"tmpdisk:100G"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must := mustOK(t, c)
	run := runningJob(ctx, t, c, "-w", "gpu1", "--gres=gpu:1,tmpdisk:10G", "--wrap", "sleep 300")
	pend := must(c.Submit(ctx, "-w", "gpu1", "--gres=gpu:8,tmpdisk:10G", "--wrap", "true"))
	waitReason(ctx, t, c, pend, "Resources", func(r string) bool { return r == "Resources" })
	perSocket := must(c.Submit(ctx, "--gpus-per-socket=2", "--sockets-per-node=2", "-N2", "--hold", "--wrap", "true"))
	if used := must(c.Run(ctx, "sinfo", "-h", "-N", "-n", "gpu1", "-O", "GresUsed:60")); used != "gpu:1,tmpdisk:10737418240" {
		t.Errorf("gpu1's gres_used reads %q, not gpu:1,tmpdisk:10737418240: the byte count this test is for is not exercised", used)
	}

	_, _, snap := snapshotNow(ctx, t, c)
	for _, n := range snap.Nodes {
		busy, free := false, 8
		if n.Name == "gpu1" {
			busy, free = true, 7
		}
		if n.Busy != busy || n.GPUs != 8 || n.FreeGPUs != free {
			t.Errorf("node %s: busy %v, %d GPUs, %d free; want busy %v, 8 GPUs, %d free", n.Name, n.Busy, n.GPUs, n.FreeGPUs, busy, free)
		}
	}
	gpus := map[string]int{}
	for _, j := range snap.Jobs {
		gpus[j.ID] = j.GPUs
	}
	if want := map[string]int{pend: 8, perSocket: 8}; !maps.Equal(gpus, want) {
		t.Errorf("pending jobs' GPUs %v; want %v (job %s runs)", gpus, want, run)
	}
}
