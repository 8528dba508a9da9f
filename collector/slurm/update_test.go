package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
	"github.com/heliostat-dev/heliostat/schemas"
)

// TestPendingRequestUpdate: a change to what a pending job asks for (an
// admin's or the user's scontrol update of its GPUs, nodes, CPUs, partition,
// …) is published as an UPDATE carrying the new request, before the job
// starts. A listing that changes nothing the events carry publishes nothing,
// nor does a change to a running job's figures (its START carried them). A
// source restarted on the state file publishes nothing again.
func TestPendingRequestUpdate(t *testing.T) {
	base := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	bs := base.Unix()
	pend := job(77, "PENDING", bs-60, 0).with("cpus", 1).with("qos", "normal").with("account", "ml").
		with("current_working_directory", "/home/alice").with("priority", 100)
	running := pend
	running.state = "RUNNING"
	running = running.on("gpu1", bs-30)
	for _, tc := range []struct {
		name          string
		before, after sqJob
		want          string // event types
		field         func(*schemas.JobEvent) any
		value         any // field of the last event
	}{
		{name: "gpus", before: pend, after: pend.with("tres_per_node", "gres:gpu:4"), want: "SUBMIT UPDATE",
			field: func(e *schemas.JobEvent) any { return e.GPUs }, value: int64(4)},
		{name: "gpu type", before: pend, after: pend.with("tres_per_node", "gres:gpu:h100:1"), want: "SUBMIT UPDATE",
			field: func(e *schemas.JobEvent) any { return e.GPUType }, value: "h100"},
		{name: "nodes", before: pend, after: pend.with("node_count", 2), want: "SUBMIT UPDATE",
			field: func(e *schemas.JobEvent) any { return [2]int64{e.NodeCount, e.GPUs} }, value: [2]int64{2, 2}},
		{name: "cpus", before: pend, after: pend.with("cpus", 8), want: "SUBMIT UPDATE",
			field: func(e *schemas.JobEvent) any { return e.CPUs }, value: int64(8)},
		{name: "memory", before: pend, after: pend.with("memory_per_node", 2048), want: "SUBMIT UPDATE",
			field: func(e *schemas.JobEvent) any { return e.MemReqBytes }, value: int64(2048 << 20)},
		{name: "partition", before: pend, after: pend.with("partition", "big"), want: "SUBMIT UPDATE",
			field: func(e *schemas.JobEvent) any { return e.Partition }, value: "big"},
		{name: "qos", before: pend, after: pend.with("qos", "high"), want: "SUBMIT UPDATE",
			field: func(e *schemas.JobEvent) any { return e.QOS }, value: "high"},
		{name: "account", before: pend, after: pend.with("account", "physics"), want: "SUBMIT UPDATE",
			field: func(e *schemas.JobEvent) any { return e.Account }, value: "physics"},
		{name: "name", before: pend, after: pend.with("name", "train-v2"), want: "SUBMIT UPDATE",
			field: func(e *schemas.JobEvent) any { return e.Name }, value: "train-v2"},
		{name: "work dir", before: pend, after: pend.with("current_working_directory", "/scratch/alice"), want: "SUBMIT UPDATE",
			field: func(e *schemas.JobEvent) any { return e.WorkDir }, value: "/scratch/alice"},
		{name: "time limit", before: pend, after: pend.with("time_limit", 120), want: "SUBMIT UPDATE",
			field: func(e *schemas.JobEvent) any { return e.TimeLimitS }, value: int64(7200)},
		{name: "priority", before: pend, after: pend.with("priority", 200), want: "SUBMIT UPDATE",
			field: func(e *schemas.JobEvent) any { return e.Priority }, value: int64(200)},
		{name: "nothing", before: pend, after: pend, want: "SUBMIT"},
		{name: "only the reason it waits", before: pend, after: pend.with("state_reason", "Resources"), want: "SUBMIT"},
		{name: "only the eligible time", before: pend.with("eligible_time", 0), after: pend.with("eligible_time", bs-10), want: "SUBMIT"},
		{name: "a running job's cpus", before: running, after: running.with("cpus", 2), want: "SUBMIT START"},
		{name: "a running job's time limit", before: running, after: running.with("time_limit", 120), want: "SUBMIT START UPDATE",
			field: func(e *schemas.JobEvent) any { return e.TimeLimitS }, value: int64(7200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "squeue.json")
			squeue := filepath.Join(dir, "squeue")
			if err := os.WriteFile(squeue, []byte("#!/bin/sh\ncat '"+out+"'\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			clock := base
			cfg := Config{Cluster: testCluster, StateFile: filepath.Join(dir, "state.json"), Squeue: squeue}
			newSource := func(rec *recorder) *Source {
				src, err := New(cfg, rec, testLogger(t), prometheus.NewRegistry(), func() time.Time { return clock })
				if err != nil {
					t.Fatal(err)
				}
				return src
			}
			poll := func(src *Source, j sqJob) {
				t.Helper()
				clock = clock.Add(30 * time.Second)
				if err := os.WriteFile(out, listing(t, j), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := src.Poll(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			rec := newRecorder(t, testCluster)
			src := newSource(rec)
			for _, j := range []sqJob{tc.before, tc.before, tc.after, tc.after} {
				poll(src, j)
			}
			evs := rec.jobEvents("77")
			if got := types(evs); got != tc.want {
				t.Fatalf("job 77 events %q; want %q", got, tc.want)
			}
			if tc.field != nil {
				last := evs[len(evs)-1]
				if got := tc.field(&last); got != tc.value {
					t.Errorf("job 77 %v: %v; want %v", last.Type, got, tc.value)
				}
				if seen := clock.Add(-30 * time.Second).UnixMilli(); last.Type == schemas.JobUpdate && last.EventMillis != seen {
					t.Errorf("UPDATE at %d; want at the poll that saw the change, %d", last.EventMillis, seen)
				}
			}

			// What was published is in the state file: a new source
			// publishes nothing for the same listing.
			rec2 := newRecorder(t, testCluster)
			poll(newSource(rec2), tc.after)
			if n := rec2.eventCount(); n != 0 {
				t.Errorf("restarted source published %d events; want 0: %v", n, rec2.jobEvents("77"))
			}
		})
	}
}

// TestPendingRequestFollowsSlurm changes a pending job's request with
// scontrol update on a real slurmctld: more GPUs, then another partition.
// Each change is published as an UPDATE while the job waits, and the START
// and END carry the changed request.
func TestPendingRequestFollowsSlurm(t *testing.T) {
	c := slurmtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	defer func() {
		if t.Failed() {
			t.Logf("slurmctld log tail:\n%s", c.LogTail(30))
		}
	}()
	// A second partition on the same nodes, for the job to move to.
	if _, err := c.Run(ctx, "scontrol", "create", "PartitionName=other", "Nodes=gpu[1-4]", "MaxTime=INFINITE", "State=UP"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := c.Run(context.Background(), "scontrol", "delete", "PartitionName=other"); err != nil {
			t.Logf("remove the test's partition: %v", err)
		}
	}()
	// A job holding every GPU keeps the next one waiting for resources.
	blocker, err := c.Submit(ctx, "--gres=gpu:8", "-N4", "-o", "/dev/null", "--wrap", "sleep 60")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Run(context.Background(), "scancel", blocker)
	if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, blocker); err != nil {
		t.Fatal(err)
	}
	id, err := c.Submit(ctx, "--gres=gpu:1", "-N1", "-o", "/dev/null", "--wrap", "sleep 1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Run(context.Background(), "scancel", id)

	src, rec := freshSource(t, c)
	poll := func(want string) []schemas.JobEvent {
		t.Helper()
		for range 3 { // the events come at the first poll; the others add none
			if err := src.Poll(ctx); err != nil {
				t.Fatal(err)
			}
		}
		evs := rec.jobEvents(id)
		if got := types(evs); got != want {
			t.Fatalf("job %s: events %q; want %q", id, got, want)
		}
		return evs
	}
	request := func(e schemas.JobEvent) string {
		return e.Partition + " " + e.State.String() + " " + strconv.FormatInt(e.GPUs, 10) + " GPUs"
	}
	evs := poll("SUBMIT")
	if got := request(evs[0]); got != "batch PENDING 1 GPUs" {
		t.Errorf("SUBMIT: %s; want batch PENDING 1 GPUs", got)
	}
	for _, up := range []struct{ set, want string }{
		{"gres=gpu:4", "batch PENDING 4 GPUs"},
		{"partition=other", "other PENDING 4 GPUs"},
	} {
		if _, err := c.Run(ctx, "scontrol", "update", "jobid="+id, up.set); err != nil {
			t.Fatal(err)
		}
		evs = poll(types(evs) + " UPDATE")
		if got := request(evs[len(evs)-1]); got != up.want {
			t.Errorf("UPDATE after scontrol update %s: %s; want %s", up.set, got, up.want)
		}
	}
	if _, err := c.Run(ctx, "scancel", blocker); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJob(ctx, id); err != nil {
		t.Fatal(err)
	}
	evs = poll("SUBMIT UPDATE UPDATE START END")
	for _, e := range evs[3:] {
		if got, want := request(e), "other "+e.State.String()+" 4 GPUs"; got != want {
			t.Errorf("%v: %s; want %s", e.Type, got, want)
		}
	}
}
