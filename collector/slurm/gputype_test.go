package slurm

import (
	"context"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
	"github.com/heliostat-dev/heliostat/schemas"
)

// TestSlurmJobsOfTwoGPUTypes runs a real Slurm 22.05 whose nodes each have 4
// a100 and 4 v100 GPUs, with accounting that tracks both types. A job that
// asks for one GPU of each type and an untyped one that needs GPUs of both
// (5 on a node of 4 + 4) read as "a100,v100" from squeue while they run and
// once they have ended, from squeue's listing of the ended job and from the
// accounting, whatever order Slurm lists the types in (squeue used to give
// the last, sacct the first, and an untyped job's END none).
func TestSlurmJobsOfTwoGPUTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Slurm cluster with slurmdbd and MariaDB")
	}
	c := slurmtest.StartWith(t, slurmtest.Options{
		Accounting: true,
		GPUTypes:   []slurmtest.GPUType{{Name: "a100", Count: 4}, {Name: "v100", Count: 4}},
		Conf: map[string]string{
			"JobCompType":           "jobcomp/none",
			"AccountingStorageTRES": "gres/gpu,gres/gpu:a100,gres/gpu:v100",
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src, rec := accountingSource(t, c)
	typed, err := c.Submit(ctx, "--gres=gpu:v100:1,gpu:a100:1", "-J", "typed", "--wrap", "sleep 3")
	if err != nil {
		t.Fatal(err)
	}
	untyped, err := c.Submit(ctx, "--gres=gpu:5", "-J", "untyped", "--wrap", "sleep 3")
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]int64{typed: 2, untyped: 5} // id → GPUs
	ended := func() bool {
		for id := range jobs {
			if evs := rec.jobEvents(id); len(evs) == 0 || evs[len(evs)-1].Type != schemas.JobEnd {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(60 * time.Second); !ended(); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: job %s events %q, job %s events %q; want both ended", typed, types(rec.jobEvents(typed)), untyped, types(rec.jobEvents(untyped)))
		}
		if err := src.Poll(ctx); err != nil {
			t.Fatalf("poll: %v", err)
		}
	}
	// squeue lists an ended job for MinJobAge (300 s), so its END above is
	// squeue's: read the accounting's record of both as the source would
	// for a job gone from squeue. slurmctld sends it asynchronously.
	fromSacct := map[string]*observation{}
	for deadline := time.Now().Add(30 * time.Second); len(fromSacct) < len(jobs); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s sacct holds %d of jobs %s and %s", len(fromSacct), typed, untyped)
		}
		out, err := src.sacct(ctx, "--json", "-j", typed+","+untyped)
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeSacct(out)
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.Jobs {
			obs, _, err := observeSacct(&r.Jobs[i])
			if err != nil {
				t.Fatalf("sacct record %d: %v", i, err)
			}
			for _, o := range obs {
				fromSacct[o.ev.JobID] = o
			}
		}
	}
	for id, gpus := range jobs {
		if e := fromSacct[id].ev; e.GPUType != "a100,v100" || e.GPUs != gpus {
			t.Errorf("job %s from sacct: gpu_type %q, %d GPUs; want \"a100,v100\", %d", id, e.GPUType, e.GPUs, gpus)
		}
	}
	for id, gpus := range jobs {
		evs := rec.jobEvents(id)
		if got := types(evs); got != "SUBMIT START END" {
			t.Errorf("job %s: events %q; want SUBMIT START END", id, got)
		}
		for _, e := range evs {
			want := "a100,v100"
			if id == untyped && e.Type == schemas.JobSubmit {
				want = "" // untyped until given GPUs
			}
			if e.GPUType != want || e.GPUs != gpus {
				t.Errorf("job %s %s: gpu_type %q, %d GPUs; want %q, %d", id, e.Type, e.GPUType, e.GPUs, want, gpus)
			}
		}
	}
}

// TestSlurmGPUsPerSocket: a job submitted to a real Slurm 22.05 with
// --gpus-per-socket=2 --sockets-per-node=2 -N2 (squeue: tres_per_socket
// "gres:gpu:2", sockets_per_node 2, node_count 2) is published asking for 8
// GPUs. Before 2026-11-25 tres_per_socket was not read: the job asked for
// none until it ran.
func TestSlurmGPUsPerSocket(t *testing.T) {
	c := slurmtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := c.Submit(ctx, "--gpus-per-socket=2", "--sockets-per-node=2", "-N2", "--hold", "-o", "/dev/null", "--wrap", "true")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Run(context.Background(), "scancel", id)
	src, rec := freshSource(t, c)
	if err := src.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	evs := rec.jobEvents(id)
	if len(evs) != 1 || evs[0].Type != schemas.JobSubmit || evs[0].GPUs != 8 {
		t.Fatalf("job %s: events %q, GPUs %v; want a SUBMIT asking for 8 GPUs", id, types(evs), gpusOf(evs))
	}
}

// gpusOf lists the GPUs each event asks for.
func gpusOf(evs []schemas.JobEvent) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.GPUs
	}
	return out
}
