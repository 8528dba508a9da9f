package nvml

import (
	"log/slog"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/heliostat-dev/heliostat/schemas"
)

// benchmarkCollect times one Collect of the 8-GPU mock, the collector's cost
// per tick without the driver's own; stub changes the mock before New.
// Allocations include the mock's own: its process lists.
func benchmarkCollect(b *testing.B, stub func(srv *dgxa100.Server)) {
	srv := newServer(b)
	if stub != nil {
		stub(srv)
	}
	s, err := New(srv, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		b.Fatalf("New() = %v", err)
	}
	b.Cleanup(func() { s.Close() })
	var batch schemas.SampleBatch
	now := tick
	b.ReportAllocs()
	for b.Loop() {
		batch.Reset()
		now = now.Add(time.Second)
		_ = s.Collect(b.Context(), now, &batch)
	}
	b.ReportMetric(float64(len(batch.Samples)), "samples/op")
}

// BenchmarkCollect: every GPU answers.
func BenchmarkCollect(b *testing.B) { benchmarkCollect(b, nil) }

// BenchmarkCollectOneLost: GPU 5 of 8 answers ERROR_GPU_IS_LOST to every
// query (fallen off the bus, Xid 79).
func BenchmarkCollectOneLost(b *testing.B) {
	benchmarkCollect(b, func(srv *dgxa100.Server) {
		d := srv.Devices[5].(*dgxa100.Device)
		d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
			return gonvml.Utilization{}, gonvml.ERROR_GPU_IS_LOST
		}
	})
}
