package schemas_test

import (
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

// TestMetricInfo checks the metric table: one distinct column per metric, the
// ratio metrics are the floats, and every integer metric has a maximum.
func TestMetricInfo(t *testing.T) {
	floats := map[schemas.Metric]bool{
		schemas.SMActive: true, schemas.SMOccupancy: true, schemas.TensorActive: true, schemas.DRAMActive: true,
	}
	seen := map[string]schemas.Metric{}
	for m := range schemas.NumMetrics {
		info := m.Info()
		if m.String() != info.Column || info.Column == "" {
			t.Errorf("Metric(%d).String() = %q; want its column %q", m, m.String(), info.Column)
		}
		if prev, ok := seen[info.Column]; ok {
			t.Errorf("metrics %d and %d share column %q", prev, m, info.Column)
		}
		seen[info.Column] = m
		if info.Float != floats[m] {
			t.Errorf("Metric(%s).Info().Float = %v; want %v", m, info.Float, floats[m])
		}
		if !info.Float && info.Max == 0 {
			t.Errorf("Metric(%s).Info().Max = 0; an integer metric needs a maximum", m)
		}
	}
	if schemas.NumMetrics > 32 {
		t.Errorf("NumMetrics = %d; Sample.Present holds 32 bits", schemas.NumMetrics)
	}
	if got, want := schemas.NumMetrics.String(), "metric(25)"; got != want {
		t.Errorf("NumMetrics.String() = %q; want %q", got, want)
	}
}

func TestSampleAccessors(t *testing.T) {
	var s schemas.Sample
	if s.Has(schemas.GPUUtil) {
		t.Errorf("zero Sample.Has(gpu_util) = true; want false")
	}
	s.Set(schemas.GPUUtil, 0) // present and zero is not absent
	s.SetFloat(schemas.SMActive, 0.1)
	if v, ok := s.Uint(schemas.GPUUtil); v != 0 || !ok {
		t.Errorf("Uint(gpu_util) = %v, %v; want 0, true", v, ok)
	}
	if v, ok := s.Float(schemas.SMActive); v != float32(0.1) || !ok {
		t.Errorf("Float(sm_active) = %v, %v; want %v, true", v, ok, float32(0.1))
	}
	if _, ok := s.Uint(schemas.MemUtil); ok {
		t.Errorf("Uint(mem_util) present; want absent")
	}
	s.TSMillis = -1
	if got, want := s.Time().Format("2006-01-02T15:04:05.000Z07:00"), "1969-12-31T23:59:59.999Z"; got != want {
		t.Errorf("Sample{TSMillis: -1}.Time() = %s; want %s", got, want)
	}
}

func TestSampleBatchAddGPUAndReset(t *testing.T) {
	b := migBatch()
	if got := len(b.GPUs); got != 3 {
		t.Fatalf("migBatch has %d GPUs; want 3 MIG instances of one GPU", got)
	}
	again := b.GPUs[1]
	again.Model = "changed" // identity is UUID and MIG UUID only
	if got := b.AddGPU(again); got != 1 {
		t.Errorf("AddGPU(existing MIG instance) = %d; want 1", got)
	}
	if got := b.AddGPU(schemas.GPU{UUID: b.GPUs[0].UUID}); got != 3 {
		t.Errorf("AddGPU(parent GPU without MIG UUID) = %d; want 3", got)
	}
	gpus, samples := cap(b.GPUs), cap(b.Samples)
	b.Reset()
	if b.Cluster != "" || b.Host != "" || len(b.GPUs) != 0 || len(b.Samples) != 0 {
		t.Errorf("after Reset: %+v; want an empty batch", b)
	}
	if cap(b.GPUs) != gpus || cap(b.Samples) != samples {
		t.Errorf("Reset dropped capacity: %d, %d; want %d, %d", cap(b.GPUs), cap(b.Samples), gpus, samples)
	}
}
