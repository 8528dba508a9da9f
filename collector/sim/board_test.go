package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// TestGPUTypes: a cluster of VCs of three GPU types. Each job's events carry
// its VC's type, Nodes each node's type, and each GPU's samples its board's
// model, framebuffer, power limit and memory clock, with power inside the
// board's ranges, busy or idle; a VC that names no type is h100 as before.
func TestGPUTypes(t *testing.T) {
	jobs := []JobSpec{
		{ID: "1", VC: "old", GPUs: 2, Duration: sec(600)},
		{ID: "2", VC: "mid", GPUs: 8, Duration: sec(600)},
		{ID: "3", VC: "new", GPUs: 1, Duration: sec(600)},
		{ID: "4", VC: "plain", GPUs: 1, Duration: sec(600)},
	}
	rec := &recorder{}
	cfg := Config{Cluster: "test", Nodes: 5, VCs: "old:1:v100,mid:2:a100,new:1:h100,plain:1", Start: t0, SampleInterval: 60 * time.Second}
	s, err := New(cfg, Jobs(jobs), nil, rec, nil, nil, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Advance(context.Background(), t0.Add(15*time.Minute)); err != nil {
		t.Fatal(err)
	}
	p := rec.decode(t, "test")
	for id, want := range map[string]string{"1": "v100", "2": "a100", "3": "h100", "4": "h100"} {
		e, ok := p.last[id]
		if !ok || e.State != schemas.StateCompleted {
			t.Fatalf("job %s: last event %+v; want it completed", id, e)
		}
		for _, e := range p.events {
			if e.JobID == id && e.GPUType != want {
				t.Errorf("job %s: %s event's GPU type %q; want %q (its VC's)", id, e.Type, e.GPUType, want)
			}
		}
	}
	// sim-node-001 is old's, 002-003 mid's, 004 new's, 005 plain's; the
	// actuator's adapter reads their types from Nodes.
	var types []string
	for _, n := range s.Nodes() {
		types = append(types, n.Name+":"+n.GPUType)
	}
	if got, want := strings.Join(types, " "), "sim-node-001:v100 sim-node-002:a100 sim-node-003:a100 sim-node-004:h100 sim-node-005:h100"; got != want {
		t.Errorf("Nodes: %s; want %s", got, want)
	}
	type expect struct {
		model            string
		fbGiB, limitW    uint64
		memMHz           uint64
		busyW, idleW     [2]uint64 // bounds of the power seen, W
		busySeen, idleOK bool
	}
	want := map[string]*expect{
		"sim-node-001": {model: "Tesla V100-SXM2-32GB (simulated)", fbGiB: 32, limitW: 300, memMHz: 877, busyW: [2]uint64{80, 295}, idleW: [2]uint64{39, 61}},
		"sim-node-002": {model: "NVIDIA A100-SXM4-80GB (simulated)", fbGiB: 80, limitW: 400, memMHz: 1593, busyW: [2]uint64{120, 395}, idleW: [2]uint64{49, 71}},
		"sim-node-004": {model: "NVIDIA H100 80GB HBM3 (simulated)", fbGiB: 80, limitW: 700, memMHz: 2619, busyW: [2]uint64{200, 690}, idleW: [2]uint64{59, 91}},
		"sim-node-005": {model: "NVIDIA H100 80GB HBM3 (simulated)", fbGiB: 80, limitW: 700, memMHz: 2619, busyW: [2]uint64{200, 690}, idleW: [2]uint64{59, 91}},
	}
	var bad []string
	for _, smp := range p.samples {
		b, ok := want[smp.host]
		if !ok {
			continue
		}
		fb, _ := smp.s.Uint(schemas.FBTotal)
		limit, _ := smp.s.Uint(schemas.PowerLimit)
		mem, _ := smp.s.Uint(schemas.MemClock)
		power, _ := smp.s.Uint(schemas.PowerUsage)
		util, _ := smp.s.Uint(schemas.GPUUtil)
		used, _ := smp.s.Uint(schemas.FBUsed)
		w := power / 1000
		bounds := b.idleW
		if util > 0 {
			bounds = b.busyW
			b.busySeen = true
		} else {
			b.idleOK = true
		}
		if smp.gpu.Model != b.model || fb != b.fbGiB<<30 || limit != b.limitW*1000 || mem != b.memMHz || w < bounds[0] || w > bounds[1] || used > fb {
			bad = append(bad, fmt.Sprintf("%s GPU %d at %v: model %q, framebuffer %d (used %d), limit %d mW, memory clock %d, power %d W at %d %%",
				smp.host, smp.gpu.Index, smp.s.Time(), smp.gpu.Model, fb, used, limit, mem, w, util))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d samples do not match their board, e.g.:\n%s", len(bad), strings.Join(bad[:min(5, len(bad))], "\n"))
	}
	for host, b := range want {
		if !b.busySeen || !b.idleOK {
			t.Errorf("%s: busy samples %v, idle samples %v; want both", host, b.busySeen, b.idleOK)
		}
	}
}
