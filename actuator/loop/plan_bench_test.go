package loop

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/actuator/qssf"
)

// bigSnapshot is a large cluster's scheduler state, the same every call:
// 2,048 nodes in three partitions — "a100" (1,024 nodes of 8 × a100),
// "mixed" (512 nodes, alternately 4 × a100 + 4 × v100 and 8 × v100, half
// of them with an "ib" feature) and "h100" (512 nodes of 8 × h100) — about
// 70 % of them busy and an eighth of the idle ones powered down, and
// pending jobs in submission order: 1–8 GPUs on one node or 16–64 on
// whole nodes, a fifth of them typed, a tenth constrained, some job
// arrays, some held or ineligible.
func bigSnapshot(pending int) adapter.Snapshot {
	r := rand.New(rand.NewPCG(7, 11))
	snap := adapter.Snapshot{At: t0}
	add := func(part string, i int, types map[string]int, feats []string) {
		gpus := 0
		for _, n := range types {
			gpus += n
		}
		n := adapter.Node{Name: fmt.Sprintf("%s-%04d", part, i), Partitions: []string{part}, Power: adapter.PowerOn,
			GPUs: gpus, FreeGPUs: gpus, GPUTypes: types, Features: feats, State: "idle"}
		switch u := r.Float64(); {
		case u < 0.7:
			n.Busy, n.State = true, "mixed"
			n.FreeGPUs = r.IntN(gpus)
			n.Jobs = []string{fmt.Sprintf("run-%s-%d", part, i)}
		case u < 0.7+0.3/8:
			n.Power, n.State = adapter.PowerOff, "idle+POWERED_DOWN"
		}
		snap.Nodes = append(snap.Nodes, n)
	}
	for i := range 1024 {
		add("a100", i, map[string]int{"a100": 8}, []string{"a100"})
	}
	for i := range 512 {
		var feats []string
		if i%4 < 2 {
			feats = []string{"ib"}
		}
		if i%2 == 0 {
			add("mixed", i, map[string]int{"a100": 4, "v100": 4}, append(feats, "a100", "v100"))
		} else {
			add("mixed", i, map[string]int{"v100": 8}, append(feats, "v100"))
		}
	}
	for i := range 512 {
		add("h100", i, map[string]int{"h100": 8}, []string{"h100"})
	}
	parts := []string{"a100", "a100", "mixed", "h100"}
	for i := range pending {
		j := adapter.Job{ID: fmt.Sprint(100000 + i), User: fmt.Sprintf("u%03d", r.IntN(300)), Partition: parts[r.IntN(len(parts))],
			Submit: t0.Add(-time.Duration(pending-i) * 10 * time.Second), TimeLimit: time.Duration(1+r.IntN(48)) * time.Hour,
			Priority: int64(1000 + r.IntN(1000)), NodeCount: 1, GPUs: 1 << r.IntN(4)}
		if r.IntN(20) == 0 {
			j.NodeCount = 2 << r.IntN(3)
			j.GPUs = 8 * j.NodeCount
		}
		switch u := r.IntN(10); {
		case u < 2:
			j.GPUType = map[string]string{"a100": "a100", "mixed": "v100", "h100": "h100"}[j.Partition]
		case u < 3:
			j.Constraint = "ib"
		}
		switch u := r.IntN(50); {
		case u == 0:
			j.ArrayTasks = 1 + r.IntN(100)
		case u == 1:
			j.Held, j.Reason = true, "JobHeldUser"
		case u == 2:
			j.Ineligible, j.Reason = true, "Dependency"
		}
		snap.Jobs = append(snap.Jobs, j)
	}
	return snap
}

// BenchmarkPlanPass makes a control-loop pass's power plans (demand from
// the queue, restricted asks by node kind, one CES plan per partition;
// Loop.plan) for bigSnapshot's 2,048 nodes and 20,000 pending jobs, on
// the peak forecast. The pass's other parts are the predictions (the
// predictor's BenchmarkPredict, per job), the QSSF order
// (BenchmarkRankQueue) and the audit table's writes.
func BenchmarkPlanPass(b *testing.B) {
	snap := bigSnapshot(20000)
	g, err := adapter.NewGuard(adapter.GuardConfig{Partitions: []string{"*"}}, nil, func() time.Time { return t0 })
	if err != nil {
		b.Fatal(err)
	}
	al, err := audit.New(nil, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := testConfig()
	cfg.Forecast = ForecastPeak
	l, err := New(cfg, g, al, nil, nil, nil, nil, func() time.Time { return t0 })
	if err != nil {
		b.Fatal(err)
	}
	pools, excluded := partitionNodes(snap)
	b.ReportAllocs()
	for b.Loop() {
		l.pool = map[string]*poolState{} // each pass the first: no peaks, nothing powered down
		plans, _ := l.plan(t0, snap, pools, excluded)
		if len(plans) != 3 {
			b.Fatalf("%d plans, want 3", len(plans))
		}
		for _, p := range plans {
			if p.Plan == nil {
				b.Fatalf("partition %s: no plan: %s", p.Partition, p.Error)
			}
		}
	}
}

// BenchmarkRankQueue ranks bigSnapshot's 20,000 pending jobs in QSSF
// order, with predictions of 1 minute to 2 days.
func BenchmarkRankQueue(b *testing.B) {
	snap := bigSnapshot(20000)
	r := rand.New(rand.NewPCG(3, 5))
	jobs := make([]qssf.Job, len(snap.Jobs))
	for i, j := range snap.Jobs {
		jobs[i] = qssf.Job{ID: j.ID, User: j.User, VC: j.Partition, GPUs: j.GPUs, Submit: j.Submit,
			Predicted: time.Duration(60*math.Exp2(r.Float64()*11.5)) * time.Second}
	}
	c := qssf.Config{AgingRate: 0.1}
	b.ReportAllocs()
	for b.Loop() {
		if got := c.Rank(t0, jobs); len(got) != len(jobs) {
			b.Fatalf("ranked %d of %d", len(got), len(jobs))
		}
	}
}
