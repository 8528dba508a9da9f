package dashboards

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestBusyGPUsCountsWholeGPUs runs the overview's "GPUs busy and reporting"
// on a host with a GPU in MIG mode, sampled as the NVML collector samples
// it: the whole GPU (power, temperature; no utilization in MIG mode) and
// each of its instances (no utilization either; SM activity from GPM where
// a kernel runs). Like the "GPUs reporting" stat, the panel counts whole
// GPUs: the GPU in MIG mode is one GPU reporting, busy while an instance
// runs a kernel, not three GPUs of which none is busy.
func TestBusyGPUsCountsWholeGPUs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse; skipped with -short")
	}
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	grafana := grafanaConn(t, cfg)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+cfg.Database+".gpu_samples (ts, cluster, host, gpu_index, gpu_uuid, mig_uuid, gpu_util, power_mw, sm_active)")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		index    uint16
		gpu, mig string
		util     *uint8
		power    *uint32
		sm       *float32
	}{
		{0, "GPU-a", "", new(uint8(50)), new(uint32(300_000)), new(float32(0.4))}, // busy
		{1, "GPU-b", "", nil, new(uint32(250_000)), nil},                          // MIG mode
		{1, "GPU-b", "MIG-b1", nil, nil, new(float32(0.3))},                       // runs a kernel
		{1, "GPU-b", "MIG-b2", nil, nil, new(float32(0))},                         // idle
		{2, "GPU-c", "", new(uint8(0)), new(uint32(60_000)), new(float32(0))},     // idle
	} {
		if err := b.Append(t0, "c", "h1", r.index, r.gpu, r.mig, r.util, r.power, r.sm); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	d, p := findPanel(t, "overview.json", 11)
	sql, err := expandAll(d, p.Targets[0].RawSQL, t0.Add(-time.Hour), t0.Add(time.Hour))
	if err != nil {
		t.Fatalf("%s: %v", panelName(d, p), err)
	}
	got := firstRow(t, grafana, sql)
	for col, want := range map[string]float64{"busy_gpus": 2, "reporting_gpus": 3} {
		if v, ok := got[col]; !ok || math.Abs(v-want) > 1e-9 {
			t.Errorf("%s: %s = %v; want %v", panelName(d, p), col, v, want)
		}
	}
}
