package slurmadapter

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/ces"
	"github.com/heliostat-dev/heliostat/actuator/loop"
	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
)

// TestSlurmDemandLeavesOutJobsThatCannotStart makes a pass over a real Slurm
// 22.05 whose pending jobs cannot start on their own, however many nodes are
// powered: held by an admin (scontrol hold) or the user (sbatch --hold),
// waiting on a running job (Dependency), over the partition's MaxTime
// (PartitionTimeLimit) or MaxNodes (PartitionNodeLimit), bound for a
// drained node (ReqNodeNotAvail), in a partition that is down
// (PartitionDown). Only the running job's node counts as demand, and the
// others are counted by reason in heliostat_actuator_demand_excluded_jobs. A
// job bound for a busy node (which 22.05 may report as ReqNodeNotAvail too)
// counts. Before, all but the held and dependent jobs counted: an operator
// saw nodes kept up for jobs that could not start.
func TestSlurmDemandLeavesOutJobsThatCannotStart(t *testing.T) {
	c := slurmtest.StartWith(t, slurmtest.Options{Conf: map[string]string{
		"PartitionName": "batch Nodes=gpu[1-3] Default=YES MaxTime=10 MaxNodes=2 State=UP\nPartitionName=side Nodes=gpu4 MaxTime=INFINITE State=DOWN",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	must := mustOK(t, c)
	run := must(c.Submit(ctx, "-w", "gpu1", "--gres=gpu:8", "-t", "5", "--wrap", "sleep 300"))
	if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, run); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail(20))
	}
	must(c.Run(ctx, "scontrol", "update", "nodename=gpu3", "state=drain", "reason=test"))
	held := must(c.Submit(ctx, "--gres=gpu:8", "-w", "gpu1", "-t", "5", "--wrap", "true")) // pending: gpu1 is busy
	must(c.Run(ctx, "scontrol", "hold", held))
	jobs := map[string]string{ // id: the reason Slurm gives
		held: "JobHeldAdmin",
		must(c.Submit(ctx, "--hold", "--gres=gpu:8", "-t", "5", "--wrap", "true")):                    "JobHeldUser",
		must(c.Submit(ctx, "--gres=gpu:8", "-t", "5", "--dependency=afterok:"+run, "--wrap", "true")): "Dependency",
		must(c.Submit(ctx, "--gres=gpu:8", "-t", "100", "--wrap", "true")):                            "PartitionTimeLimit",
		must(c.Submit(ctx, "--gres=gpu:8", "-N3", "-t", "5", "--wrap", "true")):                       "PartitionNodeLimit",
		must(c.Submit(ctx, "--gres=gpu:8", "-w", "gpu3", "-t", "5", "--wrap", "true")):                "ReqNodeNotAvail",
		must(c.Submit(ctx, "-p", "side", "--gres=gpu:8", "--wrap", "true")):                           "PartitionDown",
	}
	// Wait until Slurm has tried each job and given it its reason.
	for {
		out := must(c.Run(ctx, "squeue", "-h", "-t", "PENDING", "-o", "%i %r"))
		got := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			if id, r, ok := strings.Cut(line, " "); ok {
				got[id], _, _ = strings.Cut(r, ",")
			}
		}
		done := true
		for id, r := range jobs {
			done = done && got[id] == r
		}
		if done {
			t.Logf("pending jobs, reasons:\n%s", out)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pending jobs' reasons %v; want %v", got, jobs)
		case <-time.After(500 * time.Millisecond):
		}
	}

	clk := &clock{t: time.Now()}
	s, err := New(Config{Conf: c.Conf()}, c.Env(), nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	g, err := adapter.NewGuard(adapter.GuardConfig{}, s, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	lcfg := loop.Config{Cluster: "x", Interval: time.Second, PeakWindow: time.Minute, Forecast: loop.ForecastPeak}
	lcfg.CES = ces.DefaultConfig()
	l, err := loop.New(lcfg, g, &memAudit{}, nil, nil, nil, reg, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	pass := func() map[string]float64 {
		t.Helper()
		if _, err := l.Once(ctx); err != nil {
			t.Fatalf("pass: %v\n%s", err, c.LogTail(20))
		}
		demand := map[string]float64{}
		for _, pp := range l.View().Plans {
			if pp.Plan != nil {
				demand[pp.Partition] = pp.Plan.Demand
			}
		}
		return demand
	}
	// batch: gpu1 runs a job; gpu3 is drained, so two nodes are usable.
	// side: its one job cannot start.
	want := map[string]float64{"batch": 1, "side": 0}
	demand := pass()
	for part, w := range want {
		if demand[part] != w {
			t.Errorf("demand of %s = %v; want %v (the jobs that cannot start left out)", part, demand[part], w)
		}
	}
	wantExcluded := map[string]float64{"JobHeldAdmin": 1, "JobHeldUser": 1, "Dependency": 1, "PartitionTimeLimit": 1, "PartitionNodeLimit": 1, "ReqNodeNotAvail": 1, "PartitionDown": 1}
	got := gaugeByLabel(t, reg, "heliostat_actuator_demand_excluded_jobs", "reason")
	for r, w := range wantExcluded {
		if got[r] != w {
			t.Errorf("heliostat_actuator_demand_excluded_jobs{reason=%q} = %v; want %v (all: %v)", r, got[r], w, got)
		}
	}
	// A job bound for a busy node (Slurm 22.05 says Resources, or
	// ReqNodeNotAvail listing the busy node) starts once the node is free:
	// demand.
	startable := must(c.Submit(ctx, "--exclusive", "-w", "gpu1", "-t", "5", "--wrap", "true"))
	waitReason(ctx, t, c, startable, "Resources or ReqNodeNotAvail", func(r string) bool {
		return r == "Resources" || strings.HasPrefix(r, "ReqNodeNotAvail")
	})
	// The pass's clock must not lag the job's submit: a job whose
	// eligible_time (its submit second) is after the snapshot's time is
	// not yet eligible (BeginTime). Frozen at the first pass, the clock
	// lagged whenever a second began between it and this submit.
	clk.add(time.Since(clk.now()))
	if d := pass()["batch"]; d != 2 {
		t.Errorf("demand of batch with job %s waiting for busy gpu1 = %v; want 2", startable, d)
	}
	if t.Failed() {
		t.Log(must(c.Run(ctx, "squeue", "-o", "%i %P %T %r %Q")))
	}
}

// gaugeByLabel gathers reg and returns the values of metric name by the
// value of its label.
func gaugeByLabel(t *testing.T, reg *prometheus.Registry, name, label string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					out[lp.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}
