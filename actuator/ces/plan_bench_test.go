package ces

import (
	"testing"
	"time"
)

// BenchmarkPlan plans for a 420-node cluster (Philly's size) with 300 nodes
// powered, 250 busy, a target below the powered count for longer than the
// down delay: the power-down path, which sorts the candidates.
func BenchmarkPlan(b *testing.B) {
	c := DefaultConfig()
	nodes := cluster(420, 300, 250)
	in := Input{Now: t0, Nodes: nodes, Demand: 250, Forecast: fc(t0, 270), State: State{LowSince: t0.Add(-time.Hour), Peaks: []Mark{{At: t0.Add(-20 * time.Minute), Target: 280}}}}
	b.ReportAllocs()
	for b.Loop() {
		p, err := c.Plan(in)
		if err != nil || len(p.PowerDown) != 20 {
			b.Fatalf("Plan = %d down, %v; want 20", len(p.PowerDown), err)
		}
	}
}
