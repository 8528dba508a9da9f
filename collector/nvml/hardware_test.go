package nvml

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/collector/collectortest"
	"github.com/heliostat-dev/heliostat/schemas"
)

// openHardware opens the host's real NVML for a test or benchmark, skipping it
// only where libnvidia-ml.so.1 cannot be loaded, and closes it at cleanup.
func openHardware(t testing.TB) *Source {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(gonvml.New(), logger, nil)
	if errors.Is(err, gonvml.ERROR_LIBRARY_NOT_FOUND) {
		t.Skip("no NVIDIA driver (libnvidia-ml.so.1 not found); hardware test skipped")
	}
	if err != nil {
		t.Fatalf("New(real NVML) = %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	if len(s.GPUs()) == 0 {
		t.Fatal("New(real NVML) found no GPUs")
	}
	return s
}

// TestHardware runs the Source against the host's real NVML. It is skipped
// only where libnvidia-ml.so.1 cannot be loaded; with a driver present any
// failure fails the test. With HELIOSTAT_TEST_GPU_PID naming a GPU program
// that keeps its GPU busy, GPM metrics of 0 on that GPU fail it too.
func TestHardware(t *testing.T) {
	s := openHardware(t)

	b := schemas.SampleBatch{Cluster: "test", Host: "hardware"}
	if err := s.Collect(t.Context(), time.Now(), &b); err != nil {
		t.Fatalf("Collect() tick 1 = %v", err)
	}
	// GPM metrics are rates between two samples of the real device, so the
	// real clock has to move here.
	time.Sleep(200 * time.Millisecond)
	n1 := len(b.Samples)
	if err := s.Collect(t.Context(), time.Now(), &b); err != nil {
		t.Fatalf("Collect() tick 2 = %v", err)
	}
	if got := len(b.Samples) - n1; got != len(s.GPUs()) {
		t.Errorf("tick 2 gave %d samples; want one per GPU, %d", got, len(s.GPUs()))
	}

	busy := os.Getenv("HELIOSTAT_TEST_GPU_PID") != ""
	for i, smp := range b.Samples[n1:] {
		g := b.GPUs[smp.GPU]
		// Hopper and later GPUs have GPM: its metrics must be there from the
		// second tick on (go-nvml's support query once hid them).
		h := s.devices[i].h
		if s.devices[i].parent != nil {
			h = s.devices[i].parent
		}
		if arch, ret := h.GetArchitecture(); ret == gonvml.SUCCESS && arch >= gonvml.DEVICE_ARCH_HOPPER && arch != gonvml.DEVICE_ARCH_UNKNOWN {
			for _, m := range []schemas.Metric{schemas.SMActive, schemas.SMOccupancy, schemas.DRAMActive} {
				v, ok := smp.Float(m)
				if !ok {
					t.Errorf("GPU %s %s (architecture %d, Hopper or later) has no %s on tick 2", g.UUID, g.MIGUUID, arch, m)
				}
				// A GPU program kept busy by the caller (HELIOSTAT_TEST_GPU_PID)
				// occupies SMs and reads memory: a 0 there is a misread (go-nvml
				// once returned 0 for all but the first GPM metric).
				if procs, _ := smp.Uint(schemas.Processes); ok && busy && procs > 0 && v == 0 {
					t.Errorf("GPU %s %s runs %d processes but %s = 0", g.UUID, g.MIGUUID, procs, m)
				}
			}
		}
		if g.UUID == "" {
			t.Errorf("GPU %d has an empty UUID", g.Index)
		}
		if v, ok := smp.Uint(schemas.FBTotal); !ok || v == 0 {
			t.Errorf("GPU %s %s: fb_total_bytes = %d, %v; want > 0", g.UUID, g.MIGUUID, v, ok)
		}
		var present, absentList []string
		for m := range schemas.NumMetrics {
			switch {
			case !smp.Has(m):
				absentList = append(absentList, m.String())
			case m.Info().Float:
				v, _ := smp.Float(m)
				present = append(present, fmt.Sprintf("%s=%.3f", m, v))
			default:
				v, _ := smp.Uint(m)
				present = append(present, fmt.Sprintf("%s=%d", m, v))
			}
		}
		t.Logf("gpu %d %s pci=%s minor=%d model=%q driver=%s mig=%q gi=%d ci=%d profile=%q",
			g.Index, g.UUID, g.PCIBusID, g.Minor, g.Model, g.DriverVersion, g.MIGUUID, g.GIID, g.CIID, g.MIGProfile)
		t.Logf("  present: %s", strings.Join(present, " "))
		t.Logf("  absent:  %s", strings.Join(absentList, " "))
	}
	for m := range schemas.NumMetrics {
		if n := s.MetricErrors(m); n != 0 {
			t.Logf("MetricErrors(%s) = %d", m, n)
		}
	}

	msg, err := schemas.AppendSampleBatch(nil, &b)
	if err != nil {
		t.Fatalf("AppendSampleBatch(real samples) = %v", err)
	}
	var back schemas.SampleBatch
	if err := schemas.DecodeSampleBatch(msg, &back); err != nil {
		t.Fatalf("DecodeSampleBatch(real samples) = %v", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err = s.WatchEvents(ctx, func(e schemas.GPUEvent) {
		t.Logf("event: %s gpu=%s xid=%d", e.Type, e.GPUUUID, e.XID)
	})
	if err != nil {
		t.Errorf("WatchEvents(1s) = %v", err)
	}
}

// TestHardwareKafka runs the collector on the host's real GPUs with the real
// publisher against an in-process Kafka-protocol broker, and checks that every
// sample collected arrived on the topic, one per GPU and tick, naming the GPUs
// the Source found.
func TestHardwareKafka(t *testing.T) {
	s := openHardware(t)
	const host = "hardware"
	cfg := collector.Config{Cluster: "test", Host: host, Interval: 200 * time.Millisecond, PublishInterval: time.Second}
	run := collectortest.Published(t, cfg, s, 3*time.Second)
	gpus := len(s.GPUs())
	if run.Collected == 0 || int(run.Collected)%gpus != 0 {
		t.Fatalf("heliostat_collector_samples_total = %v; want a positive multiple of %d GPUs", run.Collected, gpus)
	}
	if got, want := len(run.Messages), int(run.Published); got != want {
		t.Errorf("%d messages on %s; want %d, the published messages metric", got, schemas.TopicGPUSamples, want)
	}
	want := make(map[string]bool)
	for _, g := range s.GPUs() {
		want[g.UUID+"/"+g.MIGUUID] = true
	}
	samples := 0
	var b schemas.SampleBatch
	for _, m := range run.Messages {
		if err := schemas.DecodeSampleBatch(m.Value, &b); err != nil {
			t.Fatalf("DecodeSampleBatch(offset %d) = %v", m.Offset, err)
		}
		if string(m.Key) != host || len(b.GPUs) != gpus {
			t.Errorf("offset %d: key %q, %d GPUs; want %q, %d", m.Offset, m.Key, len(b.GPUs), host, gpus)
		}
		for _, g := range b.GPUs {
			if !want[g.UUID+"/"+g.MIGUUID] {
				t.Errorf("offset %d names GPU %s %s, which the Source did not find", m.Offset, g.UUID, g.MIGUUID)
			}
		}
		for _, smp := range b.Samples {
			if v, ok := smp.Uint(schemas.FBTotal); !ok || v == 0 {
				t.Errorf("offset %d: GPU %s fb_total_bytes = %d, %v; want > 0", m.Offset, b.GPUs[smp.GPU].UUID, v, ok)
			}
		}
		samples += len(b.Samples)
	}
	t.Logf("%v samples collected in 3s at 200ms from %d GPUs; %d on %s", run.Collected, gpus, samples, schemas.TopicGPUSamples)
	if samples != int(run.Collected) {
		t.Errorf("%d samples on %s; want %v, heliostat_collector_samples_total", samples, schemas.TopicGPUSamples, run.Collected)
	}
}

// BenchmarkHardwareCollect times one Collect of every GPU of the host, the
// collector's cost per tick. It sleeps (untimed) between ticks so that the
// GPM rates have an interval to measure, as in production.
func BenchmarkHardwareCollect(b *testing.B) {
	s := openHardware(b)
	var batch schemas.SampleBatch
	if err := s.Collect(b.Context(), time.Now(), &batch); err != nil {
		b.Fatalf("Collect() = %v", err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		time.Sleep(20 * time.Millisecond)
		batch.Reset()
		b.StartTimer()
		if err := s.Collect(b.Context(), time.Now(), &batch); err != nil {
			b.Fatalf("Collect() = %v", err)
		}
	}
	b.ReportMetric(float64(len(s.GPUs())), "gpus")
}

// BenchmarkHardwareReaders times each of Collect's readers alone on the first
// GPU, to show which NVML questions a tick's cost goes to.
func BenchmarkHardwareReaders(b *testing.B) {
	s := openHardware(b)
	d := s.devices[0]
	for _, read := range readers {
		name := runtime.FuncForPC(reflect.ValueOf(read).Pointer()).Name()
		name = name[strings.LastIndex(name, ".")+1:]
		name = strings.TrimSuffix(name, "-fm")
		b.Run(name, func(b *testing.B) {
			var smp schemas.Sample
			for b.Loop() {
				b.StopTimer()
				time.Sleep(5 * time.Millisecond)
				smp = schemas.Sample{}
				b.StartTimer()
				if err := read(s, d, &smp); err != nil {
					b.Fatalf("%s: %v", name, err)
				}
			}
		})
	}
}
