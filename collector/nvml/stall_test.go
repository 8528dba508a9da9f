package nvml

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/heliostat-dev/heliostat/schemas"
)

// stallMetrics is gpuMetrics of heliostat_collector_nvml_gpu_stalled and
// heliostat_collector_nvml_stalled_calls_total.
func stallMetrics(t *testing.T, s *Source) (map[string]float64, float64) {
	t.Helper()
	return gpuMetrics(t, s, "heliostat_collector_nvml_gpu_stalled", "heliostat_collector_nvml_stalled_calls_total")
}

// TestCollectStalledGPU: an NVML call that hangs on one GPU (fallen off the
// bus, Xid 79, the driver not answering for minutes) costs only that GPU's
// samples. Each tick waits for it at most StallTimeout; the other GPUs are
// sampled; the GPU is logged once, named by Lost and the metrics, and not
// asked again (no second call on it, no pile of goroutines) until its call
// returns, when it is sampled again.
func TestCollectStalledGPU(t *testing.T) {
	steps := []struct {
		at          time.Duration // after the first tick
		hang        bool          // GPU 5's next temperature query hangs
		release     bool          // the hung query returns before this tick
		wantAsked   bool          // GPU 5 was asked in this tick
		wantSampled bool
		wantStalled bool
	}{
		{at: 0, wantAsked: true, wantSampled: true},
		{at: 5 * time.Second, hang: true, wantAsked: true, wantStalled: true},
		{at: 10 * time.Second, wantStalled: true},
		{at: 15 * time.Second, wantStalled: true},
		{at: 20 * time.Second, release: true, wantAsked: true, wantSampled: true},
		{at: 25 * time.Second, wantAsked: true, wantSampled: true},
	}
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		stuck := srv.Devices[5].(*dgxa100.Device)
		var (
			hang    atomic.Bool
			pending atomic.Int32 // calls into GPU 5's hanging query not yet returned
		)
		release := make(chan struct{})
		temp := stuck.GetTemperatureFunc
		stuck.GetTemperatureFunc = func(sensor gonvml.TemperatureSensors) (uint32, gonvml.Return) {
			if hang.Load() {
				pending.Add(1)
				defer pending.Add(-1)
				<-release
			}
			return temp(sensor)
		}
		var logs logLines
		s, err := New(srv, logs.logger(t), nil)
		if err != nil {
			t.Fatalf("New() = %v", err)
		}
		gauge := "5 " + stuck.UUID
		released := false
		unblock := func() {
			if !released {
				released = true
				hang.Store(false)
				close(release)
				synctest.Wait()
			}
		}
		defer unblock()
		for _, st := range steps {
			if st.hang {
				hang.Store(true)
			}
			if st.release {
				unblock()
			}
			asked := len(stuck.GetUtilizationRatesCalls())
			var b schemas.SampleBatch
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- s.Collect(t.Context(), tick.Add(st.at), &b) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("at %v: Collect() = %v; want nil", st.at, err)
				}
			case <-time.After(time.Minute):
				unblock()
				<-done
				t.Fatalf("at %v: Collect() still blocked after a minute with one NVML call on GPU 5 hung; want the other GPUs sampled within %v", st.at, StallTimeout)
			}
			if took := time.Since(start); took > StallTimeout {
				t.Errorf("at %v: Collect() took %v; want at most StallTimeout %v", st.at, took, StallTimeout)
			}
			if got := len(stuck.GetUtilizationRatesCalls()) > asked; got != st.wantAsked {
				t.Errorf("at %v: GPU 5 asked = %v; want %v", st.at, got, st.wantAsked)
			}
			if n := pending.Load(); n > 1 {
				t.Errorf("at %v: %d calls on GPU 5 outstanding; want at most 1", st.at, n)
			}
			want := 7
			if st.wantSampled {
				want = 8
			}
			sampled := false
			for _, smp := range b.Samples {
				sampled = sampled || b.GPUs[smp.GPU].UUID == stuck.UUID
			}
			if len(b.Samples) != want || sampled != st.wantSampled {
				t.Errorf("at %v: %d samples, GPU 5 sampled = %v; want %d, %v", st.at, len(b.Samples), sampled, want, st.wantSampled)
			}

			lost := s.Lost()
			if st.wantStalled {
				if !errors.Is(lost, ErrDeviceStalled) || !strings.Contains(lost.Error(), stuck.UUID) {
					t.Errorf("at %v: Lost() = %v; want it to name %s, wrapping ErrDeviceStalled", st.at, lost, stuck.UUID)
				}
			} else if lost != nil {
				t.Errorf("at %v: Lost() = %v; want nil", st.at, lost)
			}
			g, stalls := stallMetrics(t, s)
			if want := map[bool]float64{false: 0, true: 1}[st.wantStalled]; g[gauge] != want || len(g) != 8 {
				t.Errorf("at %v: heliostat_collector_nvml_gpu_stalled = %v; want %v for %q, 8 series", st.at, g, want, gauge)
			}
			if want := map[bool]float64{false: 0, true: 1}[st.at >= 5*time.Second]; stalls != want {
				t.Errorf("at %v: heliostat_collector_nvml_stalled_calls_total = %v; want %v", st.at, stalls, want)
			}

			if st.wantStalled {
				// The attributor's listing does not wait for the GPU
				// either, and names it.
				procs, err := s.GPUProcesses()
				if len(procs) != 7 || !errors.Is(err, ErrDeviceStalled) || !strings.Contains(err.Error(), stuck.UUID) {
					t.Errorf("at %v: GPUProcesses() = %d GPUs, %v; want 7 and an error naming %s, wrapping ErrDeviceStalled", st.at, len(procs), err, stuck.UUID)
				}
			}
		}
		if n := logs.count("nvml gpu call stalled, sampling the others"); n != 1 {
			t.Errorf("%d lines logging the stall; want 1", n)
		}
		if n := logs.count("nvml gpu call returned after stalling"); n != 1 {
			t.Errorf("%d lines logging the return; want 1", n)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
}

// TestCloseStalledGPU: Close does not wait for a call that hangs, and then
// does not shut NVML down under it.
func TestCloseStalledGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		stuck := srv.Devices[2].(*dgxa100.Device)
		release := make(chan struct{})
		defer func() { close(release); synctest.Wait() }()
		stuck.GetPowerUsageFunc = func() (uint32, gonvml.Return) {
			<-release
			return 1, gonvml.SUCCESS
		}
		var shutdowns atomic.Int32
		srv.ShutdownFunc = func() gonvml.Return { shutdowns.Add(1); return gonvml.SUCCESS }
		s := newSource(t, srv)
		var b schemas.SampleBatch
		if err := s.Collect(t.Context(), tick, &b); err != nil || len(b.Samples) != 7 {
			t.Fatalf("Collect() = %v, %d samples; want nil, 7", err, len(b.Samples))
		}
		if err := s.Close(); !errors.Is(err, ErrDeviceStalled) || !strings.Contains(err.Error(), stuck.UUID) {
			t.Errorf("Close() = %v; want an error naming %s, wrapping ErrDeviceStalled", err, stuck.UUID)
		}
		if n := shutdowns.Load(); n != 0 {
			t.Errorf("Close() shut NVML down %d times under a call in flight; want 0", n)
		}
	})
}

// TestGPUProcessesStalledGPU: a listing whose call hangs on one GPU lists the
// others within StallTimeout and names that GPU; the next tick does not ask
// it, and once the call returns the GPU is listed and sampled again.
func TestGPUProcessesStalledGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		stuck := srv.Devices[3].(*dgxa100.Device)
		release := make(chan struct{})
		var hang atomic.Bool
		hang.Store(true)
		procs := stuck.GetComputeRunningProcessesFunc
		stuck.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
			if hang.Load() {
				<-release
			}
			return procs()
		}
		s := newSource(t, srv)
		start := time.Now()
		lists, err := s.GPUProcesses()
		if took := time.Since(start); took > StallTimeout {
			t.Errorf("GPUProcesses() took %v; want at most %v", took, StallTimeout)
		}
		if len(lists) != 7 || !errors.Is(err, ErrDeviceStalled) || !strings.Contains(err.Error(), stuck.UUID) {
			t.Errorf("GPUProcesses() = %d GPUs, %v; want 7 and an error naming %s, wrapping ErrDeviceStalled", len(lists), err, stuck.UUID)
		}
		var b schemas.SampleBatch
		if err := s.Collect(t.Context(), tick, &b); err != nil || len(b.Samples) != 7 {
			t.Errorf("Collect() with GPU 3's listing stalled = %v, %d samples; want nil, 7", err, len(b.Samples))
		}
		if n := len(stuck.GetUtilizationRatesCalls()); n != 0 {
			t.Errorf("GPU 3 asked %d times while its call was stalled; want 0", n)
		}
		hang.Store(false)
		close(release)
		synctest.Wait()
		if lists, err := s.GPUProcesses(); len(lists) != 8 || err != nil {
			t.Errorf("GPUProcesses() after the call returned = %d GPUs, %v; want 8, nil", len(lists), err)
		}
		b = schemas.SampleBatch{}
		if err := s.Collect(t.Context(), tick.Add(time.Second), &b); err != nil || len(b.Samples) != 8 {
			t.Errorf("Collect() after the call returned = %v, %d samples; want nil, 8", err, len(b.Samples))
		}
	})
}
