package sim

import (
	"context"
	"testing"
	"time"
)

// discard is a Publisher that drops everything.
type discard struct{}

func (discard) Publish(context.Context, string, []byte, []byte) error { return nil }

// BenchmarkSimulatedDay simulates one day of the default cluster (8 nodes of
// 8 GPUs, synthetic workload, samples every 10s) as fast as possible, encoding
// every message. Reported: simulated days per second of real time.
func BenchmarkSimulatedDay(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		s, err := New(Config{Cluster: "bench", VCs: DefaultVCs, Duration: 24 * time.Hour, Start: t0}, nil, nil, discard{}, nil, nil, func() time.Time { return t0 })
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sim_days/s")
}
