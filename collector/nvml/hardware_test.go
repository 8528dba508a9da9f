package nvml

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/heliostat-dev/heliostat/schemas"
)

// TestHardware runs the Source against the host's real NVML. It is skipped
// only where libnvidia-ml.so.1 cannot be loaded; with a driver present any
// failure fails the test.
func TestHardware(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(gonvml.New(), logger, nil)
	if errors.Is(err, gonvml.ERROR_LIBRARY_NOT_FOUND) {
		t.Skip("no NVIDIA driver (libnvidia-ml.so.1 not found); hardware test skipped")
	}
	if err != nil {
		t.Fatalf("New(real NVML) = %v", err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}()
	if len(s.GPUs()) == 0 {
		t.Fatal("New(real NVML) found no GPUs")
	}

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

	for _, smp := range b.Samples[n1:] {
		g := b.GPUs[smp.GPU]
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
