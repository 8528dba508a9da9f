package nvml

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/collector/collectortest"
	"github.com/heliostat-dev/heliostat/schemas"
)

var tick = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// baseMetrics are the values the stubbed device i answers, in the sample's
// units. Every stub below reads them from here.
func baseMetrics(i int) map[schemas.Metric]uint64 {
	u := uint64(i)
	return map[schemas.Metric]uint64{
		schemas.GPUUtil:               10 + u,
		schemas.MemUtil:               20 + u,
		schemas.FBTotal:               40 << 30,
		schemas.FBReserved:            512 << 20,
		schemas.FBUsed:                u << 30,
		schemas.FBFree:                40<<30 - 512<<20 - u<<30,
		schemas.PowerUsage:            100_000 + u,
		schemas.PowerLimit:            400_000,
		schemas.Energy:                5_000_000_000 + u,
		schemas.GPUTemp:               40 + u,
		schemas.MemTemp:               50 + u,
		schemas.SMClock:               1410,
		schemas.MemClock:              1215,
		schemas.PState:                0,
		schemas.ClockEventReasons:     1,
		schemas.PCIeReplay:            7 + u,
		schemas.ECCSBEVolatile:        3 + u,
		schemas.ECCDBEVolatile:        0,
		schemas.RemappedCorrectable:   1,
		schemas.RemappedUncorrectable: 0,
		schemas.Processes:             u % 3,
	}
}

// newServer returns the 8-GPU mock with every query Collect asks stubbed:
// the mock panics on a query nobody stubbed.
func newServer(t testing.TB) *dgxa100.Server {
	t.Helper()
	srv := dgxa100.New()
	for i := range srv.Devices {
		stubDevice(srv.Devices[i].(*dgxa100.Device), i)
	}
	return srv
}

func stubDevice(d *dgxa100.Device, i int) {
	w := baseMetrics(i)
	u32 := func(m schemas.Metric) func() (uint32, gonvml.Return) {
		return func() (uint32, gonvml.Return) { return uint32(w[m]), gonvml.SUCCESS }
	}
	d.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) {
		var p gonvml.PciInfo
		copy(p.BusId[:], d.PciBusID)
		return p, gonvml.SUCCESS
	}
	d.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
		return gonvml.GpmSupport{IsSupportedDevice: 0}, gonvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{Gpu: uint32(w[schemas.GPUUtil]), Memory: uint32(w[schemas.MemUtil])}, gonvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		return gonvml.Memory_v2{Total: w[schemas.FBTotal], Reserved: w[schemas.FBReserved], Used: w[schemas.FBUsed], Free: w[schemas.FBFree]}, gonvml.SUCCESS
	}
	d.GetPowerUsageFunc = u32(schemas.PowerUsage)
	d.GetEnforcedPowerLimitFunc = u32(schemas.PowerLimit)
	d.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) { return w[schemas.Energy], gonvml.SUCCESS }
	d.GetTemperatureFunc = func(s gonvml.TemperatureSensors) (uint32, gonvml.Return) {
		if s != gonvml.TEMPERATURE_GPU {
			return 0, gonvml.ERROR_INVALID_ARGUMENT
		}
		return uint32(w[schemas.GPUTemp]), gonvml.SUCCESS
	}
	d.GetFieldValuesFunc = func(fv []gonvml.FieldValue) gonvml.Return {
		for j := range fv {
			f := &fv[j]
			switch f.FieldId {
			case gonvml.FI_DEV_MEMORY_TEMP:
				f.ValueType = uint32(gonvml.VALUE_TYPE_UNSIGNED_INT)
				binary.NativeEndian.PutUint32(f.Value[:], uint32(w[schemas.MemTemp]))
			case gonvml.FI_DEV_PCIE_REPLAY_COUNTER:
				f.ValueType = uint32(gonvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				binary.NativeEndian.PutUint64(f.Value[:], w[schemas.PCIeReplay])
			default:
				f.NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
			}
		}
		return gonvml.SUCCESS
	}
	d.GetClockInfoFunc = func(c gonvml.ClockType) (uint32, gonvml.Return) {
		switch c {
		case gonvml.CLOCK_SM:
			return uint32(w[schemas.SMClock]), gonvml.SUCCESS
		case gonvml.CLOCK_MEM:
			return uint32(w[schemas.MemClock]), gonvml.SUCCESS
		}
		return 0, gonvml.ERROR_INVALID_ARGUMENT
	}
	d.GetPerformanceStateFunc = func() (gonvml.Pstates, gonvml.Return) {
		return gonvml.Pstates(w[schemas.PState]), gonvml.SUCCESS
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, gonvml.Return) { return w[schemas.ClockEventReasons], gonvml.SUCCESS }
	d.GetTotalEccErrorsFunc = func(t gonvml.MemoryErrorType, c gonvml.EccCounterType) (uint64, gonvml.Return) {
		if c != gonvml.VOLATILE_ECC {
			return 0, gonvml.ERROR_INVALID_ARGUMENT
		}
		if t == gonvml.MEMORY_ERROR_TYPE_CORRECTED {
			return w[schemas.ECCSBEVolatile], gonvml.SUCCESS
		}
		return w[schemas.ECCDBEVolatile], gonvml.SUCCESS
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) {
		return int(w[schemas.RemappedCorrectable]), int(w[schemas.RemappedUncorrectable]), false, false, gonvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		procs := make([]gonvml.ProcessInfo, w[schemas.Processes])
		for j := range procs {
			procs[j].Pid = uint32(1000*(i+1) + j)
		}
		return procs, gonvml.SUCCESS
	}
}

func newSource(t *testing.T, lib gonvml.Interface) *Source {
	t.Helper()
	s, err := New(lib, slog.New(slog.NewTextHandler(t.Output(), nil)), func() time.Time { return tick })
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func collect(t *testing.T, s *Source, b *schemas.SampleBatch) {
	t.Helper()
	if err := s.Collect(t.Context(), tick, b); err != nil {
		t.Fatalf("Collect() = %v", err)
	}
}

// checkSample compares every metric of smp with want: a metric missing from
// want must be absent.
func checkSample(t *testing.T, who string, smp *schemas.Sample, want map[schemas.Metric]uint64) {
	t.Helper()
	for m := range schemas.NumMetrics {
		v, ok := smp.Uint(m)
		w, wok := want[m]
		switch {
		case ok != wok:
			t.Errorf("%s: %s present = %v; want %v", who, m, ok, wok)
		case ok && v != w:
			t.Errorf("%s: %s = %d; want %d", who, m, v, w)
		}
	}
}

func TestNewIdentity(t *testing.T) {
	srv := newServer(t)
	s := newSource(t, srv)
	var b schemas.SampleBatch
	collect(t, s, &b)
	if len(b.GPUs) != 8 || len(b.Samples) != 8 {
		t.Fatalf("Collect() gave %d GPUs, %d samples; want 8, 8", len(b.GPUs), len(b.Samples))
	}
	for i, dev := range srv.Devices {
		d := dev.(*dgxa100.Device)
		want := schemas.GPU{
			Index:         uint32(i),
			UUID:          d.UUID,
			PCIBusID:      d.PciBusID,
			Minor:         int32(d.Minor),
			Model:         d.Name,
			DriverVersion: srv.DriverVersion,
			GIID:          -1,
			CIID:          -1,
		}
		if got := b.GPUs[b.Samples[i].GPU]; got != want {
			t.Errorf("GPU of sample %d = %+v; want %+v", i, got, want)
		}
		if got := s.GPUs()[i]; got != want {
			t.Errorf("GPUs()[%d] = %+v; want %+v", i, got, want)
		}
	}
	if got := s.Name(); got != "nvml" {
		t.Errorf("Name() = %q; want %q", got, "nvml")
	}
}

func TestCollect(t *testing.T) {
	notSupported := func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	tests := []struct {
		name string
		stub func(d *dgxa100.Device)
		drop []schemas.Metric          // absent from baseMetrics
		set  map[schemas.Metric]uint64 // replaced in baseMetrics
		errs map[schemas.Metric]uint64 // MetricErrors after one tick of 8 GPUs
	}{
		{name: "all supported"},
		{
			name: "utilization not supported",
			stub: func(d *dgxa100.Device) {
				d.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
					return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
				}
			},
			drop: []schemas.Metric{schemas.GPUUtil, schemas.MemUtil},
		},
		{
			name: "memory info v2 missing falls back to v1",
			stub: func(d *dgxa100.Device) {
				d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
					return gonvml.Memory_v2{}, gonvml.ERROR_FUNCTION_NOT_FOUND
				}
			},
			drop: []schemas.Metric{schemas.FBReserved},
			// dgxa100's own GetMemoryInfo answer.
			set: map[schemas.Metric]uint64{schemas.FBTotal: 42949672960, schemas.FBUsed: 0, schemas.FBFree: 0},
		},
		{
			name: "power, limit and energy not supported",
			stub: func(d *dgxa100.Device) {
				d.GetPowerUsageFunc = notSupported
				d.GetEnforcedPowerLimitFunc = notSupported
				d.GetTotalEnergyConsumptionFunc = func() (uint64, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
			},
			drop: []schemas.Metric{schemas.PowerUsage, schemas.PowerLimit, schemas.Energy},
		},
		{
			name: "ecc without permission, row remapping not found",
			stub: func(d *dgxa100.Device) {
				d.GetTotalEccErrorsFunc = func(gonvml.MemoryErrorType, gonvml.EccCounterType) (uint64, gonvml.Return) {
					return 0, gonvml.ERROR_NO_PERMISSION
				}
				d.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) {
					return 0, 0, false, false, gonvml.ERROR_NOT_FOUND
				}
			},
			drop: []schemas.Metric{schemas.ECCSBEVolatile, schemas.ECCDBEVolatile, schemas.RemappedCorrectable, schemas.RemappedUncorrectable},
		},
		{
			name: "field values not supported falls back to replay counter",
			stub: func(d *dgxa100.Device) {
				d.GetFieldValuesFunc = func([]gonvml.FieldValue) gonvml.Return { return gonvml.ERROR_NOT_SUPPORTED }
				d.GetPcieReplayCounterFunc = func() (int, gonvml.Return) { return 99, gonvml.SUCCESS }
			},
			drop: []schemas.Metric{schemas.MemTemp},
			set:  map[schemas.Metric]uint64{schemas.PCIeReplay: 99},
		},
		{
			name: "memory temperature field not supported",
			stub: func(d *dgxa100.Device) {
				get := d.GetFieldValuesFunc
				d.GetFieldValuesFunc = func(fv []gonvml.FieldValue) gonvml.Return {
					ret := get(fv)
					for j := range fv {
						if fv[j].FieldId == gonvml.FI_DEV_MEMORY_TEMP {
							fv[j].NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
						}
					}
					return ret
				}
			},
			drop: []schemas.Metric{schemas.MemTemp},
		},
		{
			name: "clocks event reasons missing falls back to throttle reasons",
			stub: func(d *dgxa100.Device) {
				d.GetCurrentClocksEventReasonsFunc = func() (uint64, gonvml.Return) { return 0, gonvml.ERROR_FUNCTION_NOT_FOUND }
				d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, gonvml.Return) { return 0x4, gonvml.SUCCESS }
			},
			set: map[schemas.Metric]uint64{schemas.ClockEventReasons: 0x4},
		},
		{
			name: "unknown pstate is absent, not an error",
			stub: func(d *dgxa100.Device) {
				d.GetPerformanceStateFunc = func() (gonvml.Pstates, gonvml.Return) { return gonvml.PSTATE_UNKNOWN, gonvml.SUCCESS }
			},
			drop: []schemas.Metric{schemas.PState},
		},
		{
			name: "temperature beyond the metric's max is absent and counted",
			stub: func(d *dgxa100.Device) {
				d.GetTemperatureFunc = func(gonvml.TemperatureSensors) (uint32, gonvml.Return) { return 1 << 20, gonvml.SUCCESS }
			},
			drop: []schemas.Metric{schemas.GPUTemp},
			errs: map[schemas.Metric]uint64{schemas.GPUTemp: 8},
		},
		{
			name: "failing power query is absent and counted",
			stub: func(d *dgxa100.Device) {
				d.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_UNKNOWN }
			},
			drop: []schemas.Metric{schemas.PowerUsage},
			errs: map[schemas.Metric]uint64{schemas.PowerUsage: 8},
		},
		{
			// NVML lists a process once per context it holds on the
			// device; GPUProcesses lists it once, and so counts it.
			name: "a process listed twice is counted once",
			stub: func(d *dgxa100.Device) {
				d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
					return []gonvml.ProcessInfo{{Pid: 4242}, {Pid: 4243}, {Pid: 4242}}, gonvml.SUCCESS
				}
			},
			set: map[schemas.Metric]uint64{schemas.Processes: 2},
		},
		{
			name: "negative remapped rows are absent and counted",
			stub: func(d *dgxa100.Device) {
				d.GetRemappedRowsFunc = func() (int, int, bool, bool, gonvml.Return) { return -1, 2, false, false, gonvml.SUCCESS }
			},
			drop: []schemas.Metric{schemas.RemappedCorrectable},
			set:  map[schemas.Metric]uint64{schemas.RemappedUncorrectable: 2},
			errs: map[schemas.Metric]uint64{schemas.RemappedCorrectable: 8},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t)
			if tt.stub != nil {
				for _, d := range srv.Devices {
					tt.stub(d.(*dgxa100.Device))
				}
			}
			s := newSource(t, srv)
			var b schemas.SampleBatch
			collect(t, s, &b)
			if len(b.Samples) != 8 {
				t.Fatalf("Collect() gave %d samples; want 8", len(b.Samples))
			}
			for i := range b.Samples {
				want := baseMetrics(i)
				for _, m := range tt.drop {
					delete(want, m)
				}
				for m, v := range tt.set {
					want[m] = v
				}
				if ts := b.Samples[i].TSMillis; ts != tick.UnixMilli() {
					t.Errorf("sample %d TSMillis = %d; want %d", i, ts, tick.UnixMilli())
				}
				checkSample(t, b.GPUs[b.Samples[i].GPU].UUID, &b.Samples[i], want)
			}
			for m := range schemas.NumMetrics {
				if got := s.MetricErrors(m); got != tt.errs[m] {
					t.Errorf("MetricErrors(%s) = %d; want %d", m, got, tt.errs[m])
				}
			}
			checkReadErrorsMetric(t, s, tt.errs)
		})
	}
}

// TestCollectRemembersUnsupported checks that a query answered "not
// supported" is not asked again, while one that failed is retried.
func TestCollectRemembersUnsupported(t *testing.T) {
	const ticks = 3
	tests := []struct {
		name  string
		stub  func(d *dgxa100.Device)
		calls func(d *dgxa100.Device) int
		want  int
	}{
		{
			name:  "supported power is asked every tick",
			calls: func(d *dgxa100.Device) int { return len(d.GetPowerUsageCalls()) },
			want:  ticks,
		},
		{
			name: "unsupported power is asked once",
			stub: func(d *dgxa100.Device) {
				d.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
			},
			calls: func(d *dgxa100.Device) int { return len(d.GetPowerUsageCalls()) },
			want:  1,
		},
		{
			name: "failing power is retried every tick",
			stub: func(d *dgxa100.Device) {
				d.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_UNKNOWN }
			},
			calls: func(d *dgxa100.Device) int { return len(d.GetPowerUsageCalls()) },
			want:  ticks,
		},
		{
			name: "memory info v1 fallback is asked every tick, v2 once",
			stub: func(d *dgxa100.Device) {
				d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
					return gonvml.Memory_v2{}, gonvml.ERROR_NOT_SUPPORTED
				}
			},
			calls: func(d *dgxa100.Device) int {
				return 100*len(d.GetMemoryInfo_v2Calls()) + len(d.GetMemoryInfoCalls())
			},
			want: 100 + ticks,
		},
		{
			name: "failing memory info v2 does not fall back",
			stub: func(d *dgxa100.Device) {
				d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
					return gonvml.Memory_v2{}, gonvml.ERROR_UNKNOWN
				}
			},
			calls: func(d *dgxa100.Device) int {
				return 100*len(d.GetMemoryInfo_v2Calls()) + len(d.GetMemoryInfoCalls())
			},
			want: 100 * ticks,
		},
		{
			name: "field values, both unsupported, are asked once",
			stub: func(d *dgxa100.Device) {
				d.GetFieldValuesFunc = func([]gonvml.FieldValue) gonvml.Return { return gonvml.ERROR_NOT_SUPPORTED }
				d.GetPcieReplayCounterFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
			},
			calls: func(d *dgxa100.Device) int {
				return 100*len(d.GetFieldValuesCalls()) + len(d.GetPcieReplayCounterCalls())
			},
			want: 100 + 1,
		},
		{
			name: "ecc, one counter type unsupported",
			stub: func(d *dgxa100.Device) {
				d.GetTotalEccErrorsFunc = func(t gonvml.MemoryErrorType, _ gonvml.EccCounterType) (uint64, gonvml.Return) {
					if t == gonvml.MEMORY_ERROR_TYPE_UNCORRECTED {
						return 0, gonvml.ERROR_NOT_SUPPORTED
					}
					return 1, gonvml.SUCCESS
				}
			},
			calls: func(d *dgxa100.Device) int { return len(d.GetTotalEccErrorsCalls()) },
			want:  ticks + 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t)
			if tt.stub != nil {
				for _, d := range srv.Devices {
					tt.stub(d.(*dgxa100.Device))
				}
			}
			s := newSource(t, srv)
			var b schemas.SampleBatch
			for range ticks {
				collect(t, s, &b)
			}
			for i, d := range srv.Devices {
				if got := tt.calls(d.(*dgxa100.Device)); got != tt.want {
					t.Errorf("device %d: calls after %d ticks = %d; want %d", i, ticks, got, tt.want)
				}
			}
		})
	}
}

// logLines collects log output for tests that count lines.
type logLines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// count returns how many lines have the message msg.
func (l *logLines) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), fmt.Sprintf("msg=%q", msg))
}

func (l *logLines) logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.MultiWriter(l, t.Output()), nil))
}

// gpuMetrics gathers s's metrics, checks them with promlint, and returns
// the per-GPU gauge named gauge by "index uuid" and the counter named
// counter (-1 when absent).
func gpuMetrics(t *testing.T, s *Source, gauge, counter string) (map[string]float64, float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	g, n := map[string]float64{}, -1.0
	for _, mf := range mfs {
		switch mf.GetName() {
		case gauge:
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				g[labels["gpu_index"]+" "+labels["gpu_uuid"]] = m.GetGauge().GetValue()
			}
		case counter:
			n = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return g, n
}

// lostMetrics is gpuMetrics of heliostat_collector_nvml_gpu_lost and
// heliostat_collector_nvml_gpu_losses_total.
func lostMetrics(t *testing.T, s *Source) (map[string]float64, float64) {
	t.Helper()
	return gpuMetrics(t, s, "heliostat_collector_nvml_gpu_lost", "heliostat_collector_nvml_gpu_losses_total")
}

// TestCollectDeviceLost: a GPU that stops answering costs only its own
// samples. It is logged once, named by Lost and the metrics, asked again
// once a minute, and sampled again once it answers.
func TestCollectDeviceLost(t *testing.T) {
	tests := []struct {
		name string
		ret  gonvml.Return
	}{
		{"gpu is lost", gonvml.ERROR_GPU_IS_LOST},
		{"reset required", gonvml.ERROR_RESET_REQUIRED},
	}
	steps := []struct {
		at          time.Duration // after the first tick
		answers     bool          // GPU 5 answers from this tick on
		wantAsked   bool          // GPU 5 was asked in this tick
		wantSampled bool
	}{
		{at: 0, wantAsked: true},
		{at: 30 * time.Second},
		{at: time.Minute, wantAsked: true},
		{at: 90 * time.Second, answers: true},
		{at: 2 * time.Minute, answers: true, wantAsked: true, wantSampled: true},
		{at: 2*time.Minute + time.Second, answers: true, wantAsked: true, wantSampled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t)
			lostDev := srv.Devices[5].(*dgxa100.Device)
			var answers atomic.Bool
			temp := lostDev.GetTemperatureFunc
			// Lost in the middle of the readers: the samples read before
			// it must not leak into the batch.
			lostDev.GetTemperatureFunc = func(sensor gonvml.TemperatureSensors) (uint32, gonvml.Return) {
				if !answers.Load() {
					return 0, tt.ret
				}
				return temp(sensor)
			}
			var logs logLines
			s, err := New(srv, logs.logger(t), nil)
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			defer s.Close()
			gauge := fmt.Sprintf("5 %s", lostDev.UUID)
			for _, st := range steps {
				answers.Store(st.answers)
				asked := len(lostDev.GetUtilizationRatesCalls())
				b := schemas.SampleBatch{GPUs: []schemas.GPU{{UUID: "GPU-earlier"}}, Samples: []schemas.Sample{{}}}
				if err := s.Collect(t.Context(), tick.Add(st.at), &b); err != nil {
					t.Fatalf("at %v: Collect() = %v; want nil", st.at, err)
				}
				if got := len(lostDev.GetUtilizationRatesCalls()) > asked; got != st.wantAsked {
					t.Errorf("at %v: GPU 5 asked = %v; want %v", st.at, got, st.wantAsked)
				}
				wantSamples := 1 + 7
				if st.wantSampled {
					wantSamples++
				}
				if len(b.Samples) != wantSamples || len(b.GPUs) != wantSamples {
					t.Errorf("at %v: batch has %d GPUs, %d samples; want %d, %d", st.at, len(b.GPUs), len(b.Samples), wantSamples, wantSamples)
				}
				sampled := false
				for _, smp := range b.Samples[1:] {
					if int(smp.GPU) >= len(b.GPUs) {
						t.Fatalf("at %v: sample of GPU %d, batch has %d", st.at, smp.GPU, len(b.GPUs))
					}
					sampled = sampled || b.GPUs[smp.GPU].UUID == lostDev.UUID
				}
				if sampled != st.wantSampled {
					t.Errorf("at %v: GPU 5 sampled = %v; want %v", st.at, sampled, st.wantSampled)
				}

				lost := s.Lost()
				if st.wantSampled {
					if lost != nil {
						t.Errorf("at %v: Lost() = %v; want nil", st.at, lost)
					}
				} else if !errors.Is(lost, ErrDeviceLost) || !errors.Is(lost, tt.ret) || !strings.Contains(lost.Error(), lostDev.UUID) ||
					!strings.Contains(lost.Error(), "since "+tick.Format(time.RFC3339)) {
					t.Errorf("at %v: Lost() = %v; want it to name %s, lost since %v, wrapping ErrDeviceLost and %v", st.at, lost, lostDev.UUID, tick, tt.ret)
				}
				g, losses := lostMetrics(t, s)
				if want := map[bool]float64{false: 1, true: 0}[st.wantSampled]; g[gauge] != want || len(g) != 8 {
					t.Errorf("at %v: heliostat_collector_nvml_gpu_lost = %v; want %v for %q, 8 series", st.at, g, want, gauge)
				}
				if losses != 1 {
					t.Errorf("at %v: heliostat_collector_nvml_gpu_losses_total = %v; want 1", st.at, losses)
				}
			}
			if n := logs.count("nvml gpu lost, sampling the others"); n != 1 {
				t.Errorf("%d lines logging the loss; want 1", n)
			}
			if n := logs.count("nvml gpu answers again"); n != 1 {
				t.Errorf("%d lines logging the return; want 1", n)
			}
		})
	}
}

// TestCollectFails: only NVML as a whole going away, or every GPU being
// lost, fails a tick, and then the batch is as it was.
func TestCollectFails(t *testing.T) {
	tests := []struct {
		name    string
		lost    []int // devices answering ret
		ret     gonvml.Return
		wantErr error
	}{
		{"nvml uninitialized", []int{5}, gonvml.ERROR_UNINITIALIZED, ErrDriverLost},
		{"driver not loaded", []int{0}, gonvml.ERROR_DRIVER_NOT_LOADED, ErrDriverLost},
		{"every gpu lost", []int{0, 1, 2, 3, 4, 5, 6, 7}, gonvml.ERROR_GPU_IS_LOST, ErrDeviceLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t)
			for _, i := range tt.lost {
				srv.Devices[i].(*dgxa100.Device).GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, tt.ret }
			}
			s := newSource(t, srv)
			// The second tick asks no lost GPU again, and still fails.
			for _, at := range []time.Duration{0, time.Second} {
				b := schemas.SampleBatch{GPUs: []schemas.GPU{{UUID: "GPU-earlier"}}, Samples: []schemas.Sample{{}}}
				err := s.Collect(t.Context(), tick.Add(at), &b)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("at %v: Collect() = %v; want an error wrapping %v", at, err, tt.wantErr)
				}
				if len(b.GPUs) != 1 || len(b.Samples) != 1 {
					t.Errorf("at %v: after failed Collect batch has %d GPUs, %d samples; want 1, 1", at, len(b.GPUs), len(b.Samples))
				}
			}
		})
	}
}

// TestCollectMIGLost: a MIG instance answering that its GPU is lost takes
// the GPU and its other instances out; a lost GPU's instances are not asked.
func TestCollectMIGLost(t *testing.T) {
	srv := newServer(t)
	parent := srv.Devices[2].(*dgxa100.Device)
	parent.GetMigModeFunc = func() (int, int, gonvml.Return) {
		return gonvml.DEVICE_MIG_ENABLE, gonvml.DEVICE_MIG_ENABLE, gonvml.SUCCESS
	}
	migA := migDevice("MIG-aaaa", "Mock NVIDIA A100-SXM4-40GB MIG 3g.20gb", 1, 0, 100)
	migB := migDevice("MIG-bbbb", "Mock NVIDIA A100-SXM4-40GB MIG 1g.5gb", 2, 0, 200)
	migA.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) { return gonvml.Memory_v2{}, gonvml.ERROR_GPU_IS_LOST }
	migs := []gonvml.Device{migA, migB}
	parent.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return len(migs), gonvml.SUCCESS }
	parent.GetMigDeviceHandleByIndexFunc = func(j int) (gonvml.Device, gonvml.Return) { return migs[j], gonvml.SUCCESS }
	s := newSource(t, srv)

	for _, tc := range []struct {
		at          time.Duration
		wantSamples int
		wantParent  bool
	}{
		// The parent was sampled before its instance answered.
		{at: 0, wantSamples: 8, wantParent: true},
		{at: time.Second, wantSamples: 7},
	} {
		var b schemas.SampleBatch
		if err := s.Collect(t.Context(), tick.Add(tc.at), &b); err != nil {
			t.Fatalf("at %v: Collect() = %v", tc.at, err)
		}
		if len(b.Samples) != tc.wantSamples {
			t.Errorf("at %v: %d samples; want %d", tc.at, len(b.Samples), tc.wantSamples)
		}
		parentSampled := false
		for _, smp := range b.Samples {
			g := b.GPUs[smp.GPU]
			if g.MIGUUID != "" {
				t.Errorf("at %v: sample of MIG instance %s; want none", tc.at, g.MIGUUID)
			}
			parentSampled = parentSampled || g.UUID == parent.UUID
		}
		if parentSampled != tc.wantParent {
			t.Errorf("at %v: GPU 2 sampled = %v; want %v", tc.at, parentSampled, tc.wantParent)
		}
	}
	if n := len(migB.GetMemoryInfo_v2Calls()); n != 0 {
		t.Errorf("MIG-bbbb asked %d times; want 0: its GPU was lost before its turn", n)
	}
	if err := s.Lost(); !errors.Is(err, ErrDeviceLost) || !strings.Contains(err.Error(), parent.UUID) {
		t.Errorf("Lost() = %v; want it to name %s", err, parent.UUID)
	}
}

func TestCollectCanceled(t *testing.T) {
	s := newSource(t, newServer(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var b schemas.SampleBatch
	if err := s.Collect(ctx, tick, &b); !errors.Is(err, context.Canceled) {
		t.Errorf("Collect(canceled) = %v; want context.Canceled", err)
	}
	if len(b.Samples) != 0 {
		t.Errorf("Collect(canceled) left %d samples; want 0", len(b.Samples))
	}
}

// stubGPM makes device 0 GPM-capable; NVML's GPM metrics answer these
// percentages, with the tensor metric unsupported. Like NVML behind go-nvml
// v0.13.0-1, whose GpmMetric has the wrong size, it answers only the first
// metric of a request and leaves the others as they were (0, SUCCESS). It
// returns the number of GPM samples alive and of metric requests made.
func stubGPM(srv *dgxa100.Server, d *dgxa100.Device) (alive *atomic.Int64, calls *atomic.Uint32) {
	alive, calls = new(atomic.Int64), new(atomic.Uint32)
	srv.GpmSampleAllocFunc = func() (gonvml.GpmSample, gonvml.Return) {
		alive.Add(1)
		return &mock.GpmSample{FreeFunc: func() gonvml.Return { alive.Add(-1); return gonvml.SUCCESS }}, gonvml.SUCCESS
	}
	srv.GpmMetricsGetFunc = func(g *gonvml.GpmMetricsGetType) gonvml.Return {
		calls.Add(1)
		if g.Sample1 == nil || g.Sample2 == nil || g.Sample1 == g.Sample2 || g.NumMetrics == 0 {
			return gonvml.ERROR_INVALID_ARGUMENT
		}
		m := &g.Metrics[0]
		switch gonvml.GpmMetricId(m.MetricId) {
		case gonvml.GPM_METRIC_SM_UTIL:
			m.Value = 50
		case gonvml.GPM_METRIC_SM_OCCUPANCY:
			m.Value = 25
		case gonvml.GPM_METRIC_DRAM_BW_UTIL:
			m.Value = 12.5
		default:
			m.NvmlReturn = uint32(gonvml.ERROR_NOT_SUPPORTED)
		}
		return gonvml.SUCCESS
	}
	d.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
		return gonvml.GpmSupport{IsSupportedDevice: 1}, gonvml.SUCCESS
	}
	d.GpmSampleGetFunc = func(gonvml.GpmSample) gonvml.Return { return gonvml.SUCCESS }
	return alive, calls
}

func TestCollectGPM(t *testing.T) {
	srv := newServer(t)
	alive, calls := stubGPM(srv, srv.Devices[0].(*dgxa100.Device))
	s, err := New(srv, nil, nil)
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	want := []map[schemas.Metric]float32{
		{}, // the first tick has no interval yet
		{schemas.SMActive: 0.5, schemas.SMOccupancy: 0.25, schemas.DRAMActive: 0.125},
		{schemas.SMActive: 0.5, schemas.SMOccupancy: 0.25, schemas.DRAMActive: 0.125},
	}
	// One request per metric; the unsupported tensor metric is not asked again.
	wantN := []uint32{0, 4, 3}
	for tk := range want {
		var b schemas.SampleBatch
		before := calls.Load()
		collect(t, s, &b)
		for i := range b.Samples {
			smp := &b.Samples[i]
			for _, m := range []schemas.Metric{schemas.SMActive, schemas.SMOccupancy, schemas.TensorActive, schemas.DRAMActive} {
				v, ok := smp.Float(m)
				w, wok := want[tk][m]
				if i != 0 {
					wok = false // only device 0 has GPM
				}
				if ok != wok || ok && v != w {
					t.Errorf("tick %d device %d: %s = %v, %v; want %v, %v", tk, i, m, v, ok, w, wok)
				}
			}
		}
		if got := calls.Load() - before; got != wantN[tk] {
			t.Errorf("tick %d: %d GpmMetricsGet calls; want %d", tk, got, wantN[tk])
		}
	}
	if got := alive.Load(); got != 2 {
		t.Errorf("GPM samples alive = %d; want 2", got)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if got := alive.Load(); got != 0 {
		t.Errorf("GPM samples alive after Close = %d; want 0", got)
	}
}

// TestNewGPMSupport checks how New decides that a GPU has GPM: go-nvml's
// support query can answer a version mismatch for a GPU with GPM, so a GPM
// sample settles it.
func TestNewGPMSupport(t *testing.T) {
	for _, tc := range []struct {
		name     string
		support  gonvml.Return
		yes      uint32
		sample   gonvml.Return
		wantGPM  bool
		wantGets int
	}{
		{"supported", gonvml.SUCCESS, 1, gonvml.SUCCESS, true, 1},
		{"version mismatch, sample taken", gonvml.ERROR_ARGUMENT_VERSION_MISMATCH, 0, gonvml.SUCCESS, true, 1},
		{"version mismatch, sample refused", gonvml.ERROR_ARGUMENT_VERSION_MISMATCH, 0, gonvml.ERROR_NOT_SUPPORTED, false, 1},
		{"supported, sample fails", gonvml.SUCCESS, 1, gonvml.ERROR_UNKNOWN, false, 1},
		{"not supported", gonvml.SUCCESS, 0, gonvml.SUCCESS, false, 0},
		{"query not supported", gonvml.ERROR_NOT_SUPPORTED, 0, gonvml.SUCCESS, false, 0},
		{"query fails", gonvml.ERROR_UNKNOWN, 0, gonvml.SUCCESS, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			d := srv.Devices[0].(*dgxa100.Device)
			alive, _ := stubGPM(srv, d)
			d.GpmQueryDeviceSupportFunc = func() (gonvml.GpmSupport, gonvml.Return) {
				return gonvml.GpmSupport{IsSupportedDevice: tc.yes}, tc.support
			}
			gets := 0
			d.GpmSampleGetFunc = func(gonvml.GpmSample) gonvml.Return { gets++; return tc.sample }
			s := newSource(t, srv)
			if got := s.devices[0].gpm != nil; got != tc.wantGPM {
				t.Errorf("GPU 0 has GPM = %v; want %v", got, tc.wantGPM)
			}
			if gets != tc.wantGets {
				t.Errorf("GpmSampleGet calls in New = %d; want %d", gets, tc.wantGets)
			}
			if want := map[bool]int64{true: 2, false: 0}[tc.wantGPM]; alive.Load() != want {
				t.Errorf("GPM samples alive = %d; want %d", alive.Load(), want)
			}
			if !tc.wantGPM {
				var b schemas.SampleBatch
				collect(t, s, &b)
				collect(t, s, &b)
				if gets != tc.wantGets {
					t.Errorf("GpmSampleGet calls after two ticks = %d; want %d: a GPU without GPM is not asked", gets, tc.wantGets)
				}
			}
		})
	}
}

// migDevice is a MIG instance handle that answers only what NVML answers for
// MIG instances; any whole-GPU query panics the test.
func migDevice(uuid, name string, gi, ci int, usedMiB uint64) *mock.Device {
	return &mock.Device{
		GetUUIDFunc:              func() (string, gonvml.Return) { return uuid, gonvml.SUCCESS },
		GetNameFunc:              func() (string, gonvml.Return) { return name, gonvml.SUCCESS },
		GetGpuInstanceIdFunc:     func() (int, gonvml.Return) { return gi, gonvml.SUCCESS },
		GetComputeInstanceIdFunc: func() (int, gonvml.Return) { return ci, gonvml.SUCCESS },
		GetUtilizationRatesFunc: func() (gonvml.Utilization, gonvml.Return) {
			return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
		},
		GetMemoryInfo_v2Func: func() (gonvml.Memory_v2, gonvml.Return) {
			return gonvml.Memory_v2{Total: 20 << 30, Reserved: 0, Used: usedMiB << 20, Free: 20<<30 - usedMiB<<20}, gonvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]gonvml.ProcessInfo, gonvml.Return) {
			return []gonvml.ProcessInfo{{Pid: 42}}, gonvml.SUCCESS
		},
	}
}

func TestCollectMIG(t *testing.T) {
	srv := newServer(t)
	parent := srv.Devices[2].(*dgxa100.Device)
	_, _ = stubGPM(srv, parent)
	var migGPMCalls atomic.Int32
	parent.GpmMigSampleGetFunc = func(gi int, _ gonvml.GpmSample) gonvml.Return {
		if gi != 1 && gi != 2 {
			return gonvml.ERROR_INVALID_ARGUMENT
		}
		migGPMCalls.Add(1)
		return gonvml.SUCCESS
	}
	parent.GetMigModeFunc = func() (int, int, gonvml.Return) {
		return gonvml.DEVICE_MIG_ENABLE, gonvml.DEVICE_MIG_ENABLE, gonvml.SUCCESS
	}
	parent.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
	}
	migs := map[int]*mock.Device{
		0: migDevice("MIG-aaaa", "Mock NVIDIA A100-SXM4-40GB MIG 3g.20gb", 1, 0, 100),
		2: migDevice("MIG-bbbb", "Mock NVIDIA A100-SXM4-40GB MIG 1g.5gb", 2, 0, 200),
	}
	parent.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 3, gonvml.SUCCESS }
	parent.GetMigDeviceHandleByIndexFunc = func(j int) (gonvml.Device, gonvml.Return) {
		if d, ok := migs[j]; ok {
			return d, gonvml.SUCCESS
		}
		return nil, gonvml.ERROR_NOT_FOUND
	}
	s := newSource(t, srv)

	tests := []struct {
		gpu  schemas.GPU
		want map[schemas.Metric]uint64
	}{
		{
			gpu: schemas.GPU{Index: 2, UUID: parent.UUID, PCIBusID: parent.PciBusID, Minor: 2, Model: parent.Name,
				DriverVersion: srv.DriverVersion, MIGUUID: "MIG-aaaa", GIID: 1, CIID: 0, MIGProfile: "3g.20gb"},
			want: map[schemas.Metric]uint64{schemas.FBTotal: 20 << 30, schemas.FBReserved: 0, schemas.FBUsed: 100 << 20,
				schemas.FBFree: 20<<30 - 100<<20, schemas.Processes: 1},
		},
		{
			gpu: schemas.GPU{Index: 2, UUID: parent.UUID, PCIBusID: parent.PciBusID, Minor: 2, Model: parent.Name,
				DriverVersion: srv.DriverVersion, MIGUUID: "MIG-bbbb", GIID: 2, CIID: 0, MIGProfile: "1g.5gb"},
			want: map[schemas.Metric]uint64{schemas.FBTotal: 20 << 30, schemas.FBReserved: 0, schemas.FBUsed: 200 << 20,
				schemas.FBFree: 20<<30 - 200<<20, schemas.Processes: 1},
		},
	}
	var b schemas.SampleBatch
	collect(t, s, &b)
	if len(b.GPUs) != 10 || len(b.Samples) != 10 {
		t.Fatalf("Collect() gave %d GPUs, %d samples; want 10, 10", len(b.GPUs), len(b.Samples))
	}
	// The whole GPU keeps its device-wide metrics; its utilization is not
	// supported in MIG mode.
	wantParent := baseMetrics(2)
	delete(wantParent, schemas.GPUUtil)
	delete(wantParent, schemas.MemUtil)
	checkSample(t, parent.UUID, &b.Samples[2], wantParent)
	for k, tt := range tests {
		smp := &b.Samples[3+k]
		if got := b.GPUs[smp.GPU]; got != tt.gpu {
			t.Errorf("MIG GPU %d = %+v; want %+v", k, got, tt.gpu)
		}
		checkSample(t, tt.gpu.MIGUUID, smp, tt.want)
	}
	if got := b.GPUs[b.Samples[5].GPU].Index; got != 3 {
		t.Errorf("sample after the MIG instances is GPU %d; want 3", got)
	}

	// The second tick adds GPM ratios to the parent and both instances.
	b.Reset()
	collect(t, s, &b)
	for _, i := range []int{2, 3, 4} {
		if v, ok := b.Samples[i].Float(schemas.SMActive); !ok || v != 0.5 {
			t.Errorf("tick 2 sample %d: sm_active = %v, %v; want 0.5, true", i, v, ok)
		}
	}
	if got := migGPMCalls.Load(); got != 4 {
		t.Errorf("GpmMigSampleGet calls = %d; want 4", got)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name         string
		stub         func(srv *dgxa100.Server)
		wantNoDriver bool
		wantIs       error // besides ErrNoDriver, if set
		wantShutdown int
	}{
		{
			name: "library not found",
			stub: func(srv *dgxa100.Server) {
				srv.InitFunc = func() gonvml.Return { return gonvml.ERROR_LIBRARY_NOT_FOUND }
			},
			wantNoDriver: true,
		},
		{
			name: "driver not loaded",
			stub: func(srv *dgxa100.Server) {
				srv.InitFunc = func() gonvml.Return { return gonvml.ERROR_DRIVER_NOT_LOADED }
			},
			wantNoDriver: true,
		},
		{
			name: "init fails otherwise",
			stub: func(srv *dgxa100.Server) { srv.InitFunc = func() gonvml.Return { return gonvml.ERROR_NO_PERMISSION } },
		},
		{
			name: "device count fails",
			stub: func(srv *dgxa100.Server) {
				srv.DeviceGetCountFunc = func() (int, gonvml.Return) { return 0, gonvml.ERROR_UNKNOWN }
			},
			wantShutdown: 1,
		},
		{
			name: "every gpu lost",
			stub: func(srv *dgxa100.Server) {
				for _, d := range srv.Devices {
					d.(*dgxa100.Device).GetUUIDFunc = func() (string, gonvml.Return) { return "", gonvml.ERROR_GPU_IS_LOST }
				}
			},
			wantIs:       ErrDeviceLost,
			wantShutdown: 1,
		},
		{
			name: "driver unloaded while enumerating",
			stub: func(srv *dgxa100.Server) {
				get := srv.DeviceGetHandleByIndexFunc
				srv.DeviceGetHandleByIndexFunc = func(i int) (gonvml.Device, gonvml.Return) {
					if i == 3 {
						return nil, gonvml.ERROR_DRIVER_NOT_LOADED
					}
					return get(i)
				}
			},
			wantIs:       ErrDriverLost,
			wantShutdown: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t)
			tt.stub(srv)
			s, err := New(srv, nil, nil)
			if err == nil {
				s.Close()
				t.Fatalf("New() = nil; want an error")
			}
			if got := errors.Is(err, ErrNoDriver); got != tt.wantNoDriver {
				t.Errorf("errors.Is(New() = %q, ErrNoDriver) = %v; want %v", err, got, tt.wantNoDriver)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("New() = %q; want an error wrapping %q", err, tt.wantIs)
			}
			if !strings.HasPrefix(err.Error(), "nvml: ") {
				t.Errorf("New() = %q; want the prefix %q", err, "nvml: ")
			}
			if got := len(srv.ShutdownCalls()); got != tt.wantShutdown {
				t.Errorf("Shutdown calls = %d; want %d", got, tt.wantShutdown)
			}
		})
	}
}

// TestNewLeavesOutGPU: a GPU that cannot be enumerated at start-up is left
// out, named by Lost and the metrics, and the others are sampled.
func TestNewLeavesOutGPU(t *testing.T) {
	tests := []struct {
		name     string
		stub     func(srv *dgxa100.Server, d *dgxa100.Device)
		wantUUID bool // the left-out GPU is named by its UUID
		wantLost bool // Lost wraps ErrDeviceLost
	}{
		{
			name: "handle lost",
			stub: func(srv *dgxa100.Server, _ *dgxa100.Device) {
				get := srv.DeviceGetHandleByIndexFunc
				srv.DeviceGetHandleByIndexFunc = func(i int) (gonvml.Device, gonvml.Return) {
					if i == 4 {
						return nil, gonvml.ERROR_GPU_IS_LOST
					}
					return get(i)
				}
			},
			wantLost: true,
		},
		{
			name: "uuid needs a reset",
			stub: func(_ *dgxa100.Server, d *dgxa100.Device) {
				d.GetUUIDFunc = func() (string, gonvml.Return) { return "", gonvml.ERROR_RESET_REQUIRED }
			},
			wantLost: true,
		},
		{
			name: "uuid fails otherwise",
			stub: func(_ *dgxa100.Server, d *dgxa100.Device) {
				d.GetUUIDFunc = func() (string, gonvml.Return) { return "", gonvml.ERROR_UNKNOWN }
			},
		},
		{
			name: "mig instances lost",
			stub: func(_ *dgxa100.Server, d *dgxa100.Device) {
				d.GetMigModeFunc = func() (int, int, gonvml.Return) {
					return gonvml.DEVICE_MIG_ENABLE, gonvml.DEVICE_MIG_ENABLE, gonvml.SUCCESS
				}
				d.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 2, gonvml.SUCCESS }
				d.GetMigDeviceHandleByIndexFunc = func(j int) (gonvml.Device, gonvml.Return) {
					if j == 0 {
						return migDevice("MIG-aaaa", "Mock NVIDIA A100-SXM4-40GB MIG 3g.20gb", 1, 0, 100), gonvml.SUCCESS
					}
					return nil, gonvml.ERROR_GPU_IS_LOST
				}
			},
			wantUUID: true,
			wantLost: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t)
			d := srv.Devices[4].(*dgxa100.Device)
			// GPU 4 has GPM: what New allocated for it must be freed.
			alive, _ := stubGPM(srv, d)
			tt.stub(srv, d)
			s := newSource(t, srv)
			if got := alive.Load(); got != 0 {
				t.Errorf("GPM samples alive = %d; want 0", got)
			}
			gpus := s.GPUs()
			if len(gpus) != 7 || slices.ContainsFunc(gpus, func(g schemas.GPU) bool { return g.Index == 4 }) {
				t.Errorf("GPUs() = %+v; want the 7 others", gpus)
			}
			var b schemas.SampleBatch
			collect(t, s, &b)
			if len(b.Samples) != 7 {
				t.Errorf("Collect() gave %d samples; want 7", len(b.Samples))
			}
			uuid := ""
			if tt.wantUUID {
				uuid = d.UUID
			}
			err := s.Lost()
			if err == nil || !strings.Contains(err.Error(), "gpu 4 "+uuid) || errors.Is(err, ErrDeviceLost) != tt.wantLost {
				t.Errorf("Lost() = %v; want it to name gpu 4 %s, wrapping ErrDeviceLost: %v", err, uuid, tt.wantLost)
			}
			g, losses := lostMetrics(t, s)
			if g["4 "+uuid] != 1 || len(g) != 8 || losses != 1 {
				t.Errorf("heliostat_collector_nvml_gpu_lost = %v, _gpu_losses_total = %v; want 1 for %q of 8 series, 1", g, losses, "4 "+uuid)
			}
		})
	}
}

// waitResult is one scripted answer of EventSet.Wait.
type waitResult struct {
	dev       int
	eventType uint64
	data      uint64
	ret       gonvml.Return
}

func TestWatchEvents(t *testing.T) {
	const all = uint64(gonvml.EventTypeAll)
	tests := []struct {
		name      string
		createRet gonvml.Return         // of EventSetCreate
		supported map[int]uint64        // other devices answer NOT_SUPPORTED
		register  map[int]gonvml.Return // of RegisterEvents; SUCCESS if not listed
		script    []waitResult          // then timeouts until ctx ends
		want      []schemas.GPUEvent
		wantAt    []time.Duration // when each event is received; 0 if not listed
		wantMasks map[int]uint64  // registered successfully
		wantErr   gonvml.Return
		wantFree  int
		// wantCreates are the times event sets are made; once at the
		// start if nil.
		wantCreates []time.Duration
		// wantEarly: WatchEvents returns at once, not when the context
		// ends.
		wantEarly bool
		run       time.Duration // until the context ends; 2s if 0
	}{
		{
			name:      "xid and ecc events",
			supported: map[int]uint64{0: all, 1: gonvml.EventTypeXidCriticalError, 3: gonvml.EventTypePState},
			script: []waitResult{
				{dev: 0, eventType: gonvml.EventTypeXidCriticalError, data: 79},
				{ret: gonvml.ERROR_TIMEOUT},
				{dev: 1, eventType: gonvml.EventTypeXidCriticalError, data: 48},
				{dev: 0, eventType: gonvml.EventTypeSingleBitEccError, data: 1},
				{dev: 0, eventType: gonvml.EventTypeDoubleBitEccError, data: 2},
				{dev: 0, eventType: gonvml.EventTypePState, data: 3}, // not asked for: ignored
			},
			want: []schemas.GPUEvent{
				{GPUUUID: "dev0", Type: schemas.EventXID, XID: 79},
				{GPUUUID: "dev1", Type: schemas.EventXID, XID: 48},
				{GPUUUID: "dev0", Type: schemas.EventECCSingleBit, XID: 1},
				{GPUUUID: "dev0", Type: schemas.EventECCDoubleBit, XID: 2},
			},
			wantMasks: map[int]uint64{
				0: gonvml.EventTypeXidCriticalError | gonvml.EventTypeSingleBitEccError | gonvml.EventTypeDoubleBitEccError,
				1: gonvml.EventTypeXidCriticalError,
			},
			wantFree: 1,
		},
		{
			// A new set is made a second later, with the GPUs that
			// answer, and watched.
			name:      "wait answers a gpu lost",
			supported: map[int]uint64{0: all, 1: all},
			script: []waitResult{
				{dev: 0, eventType: gonvml.EventTypeXidCriticalError, data: 79},
				{ret: gonvml.ERROR_GPU_IS_LOST},
				{dev: 1, eventType: gonvml.EventTypeXidCriticalError, data: 13},
			},
			want: []schemas.GPUEvent{
				{GPUUUID: "dev0", Type: schemas.EventXID, XID: 79},
				{GPUUUID: "dev1", Type: schemas.EventXID, XID: 13},
			},
			wantAt:      []time.Duration{0, time.Second},
			wantMasks:   map[int]uint64{0: watchedEvents, 1: watchedEvents},
			wantFree:    2,
			wantCreates: []time.Duration{0, time.Second},
		},
		{
			// Sets that fail at once are made again after 1s, 2s, ...
			name:      "wait keeps answering a gpu lost",
			supported: map[int]uint64{0: all},
			script: []waitResult{
				{ret: gonvml.ERROR_RESET_REQUIRED}, {ret: gonvml.ERROR_RESET_REQUIRED},
				{ret: gonvml.ERROR_RESET_REQUIRED}, {ret: gonvml.ERROR_RESET_REQUIRED},
			},
			wantMasks:   map[int]uint64{0: watchedEvents},
			wantFree:    4,
			wantCreates: []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second},
			run:         10 * time.Second,
		},
		{
			name:      "a gpu lost at registration is left out",
			supported: map[int]uint64{0: all, 1: all},
			register:  map[int]gonvml.Return{0: gonvml.ERROR_GPU_IS_LOST},
			script:    []waitResult{{dev: 1, eventType: gonvml.EventTypeXidCriticalError, data: 31}},
			want:      []schemas.GPUEvent{{GPUUUID: "dev1", Type: schemas.EventXID, XID: 31}},
			wantMasks: map[int]uint64{1: watchedEvents},
			wantFree:  1,
		},
		{
			name:        "every gpu lost at registration",
			supported:   map[int]uint64{0: all},
			register:    map[int]gonvml.Return{0: gonvml.ERROR_GPU_IS_LOST},
			wantFree:    2,
			wantCreates: []time.Duration{0, time.Second},
		},
		{
			name:      "driver unloaded",
			supported: map[int]uint64{0: all},
			script:    []waitResult{{dev: 0, eventType: gonvml.EventTypeXidCriticalError, data: 13}, {ret: gonvml.ERROR_DRIVER_NOT_LOADED}},
			want:      []schemas.GPUEvent{{GPUUUID: "dev0", Type: schemas.EventXID, XID: 13}},
			wantMasks: map[int]uint64{0: watchedEvents},
			wantErr:   gonvml.ERROR_DRIVER_NOT_LOADED,
			wantFree:  1,
			wantEarly: true,
		},
		{
			name:      "wait fails otherwise",
			supported: map[int]uint64{0: all},
			script:    []waitResult{{ret: gonvml.ERROR_UNKNOWN}},
			wantMasks: map[int]uint64{0: watchedEvents},
			wantErr:   gonvml.ERROR_UNKNOWN,
			wantFree:  1,
			wantEarly: true,
		},
		{
			name:      "no gpu supports events",
			supported: map[int]uint64{5: gonvml.EventTypeClock},
			wantFree:  1,
		},
		{
			name:      "event sets not supported",
			createRet: gonvml.ERROR_NOT_SUPPORTED,
			supported: map[int]uint64{0: all},
		},
		{
			name:      "a gpu that cannot register is left out",
			supported: map[int]uint64{0: all, 1: all},
			register:  map[int]gonvml.Return{0: gonvml.ERROR_UNKNOWN},
			script:    []waitResult{{dev: 1, eventType: gonvml.EventTypeXidCriticalError, data: 31}},
			want:      []schemas.GPUEvent{{GPUUUID: "dev1", Type: schemas.EventXID, XID: 31}},
			wantMasks: map[int]uint64{1: watchedEvents},
			wantFree:  1,
		},
	}
	for _, tt := range tests {
		synctest.Test(t, func(t *testing.T) {
			srv := newServer(t)
			masks := map[int]uint64{}
			for i, dev := range srv.Devices {
				d := dev.(*dgxa100.Device)
				d.UUID = "dev" + string(rune('0'+i))
				d.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) {
					if m, ok := tt.supported[i]; ok {
						return m, gonvml.SUCCESS
					}
					return 0, gonvml.ERROR_NOT_SUPPORTED
				}
				d.RegisterEventsFunc = func(m uint64, _ gonvml.EventSet) gonvml.Return {
					if ret, ok := tt.register[i]; ok {
						return ret
					}
					masks[i] = m
					return gonvml.SUCCESS
				}
			}
			script := tt.script
			set := &mock.EventSet{
				FreeFunc: func() gonvml.Return { return gonvml.SUCCESS },
				WaitFunc: func(ms uint32) (gonvml.EventData, gonvml.Return) {
					if len(script) == 0 {
						time.Sleep(time.Duration(ms) * time.Millisecond)
						return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
					}
					r := script[0]
					script = script[1:]
					if r.ret != gonvml.SUCCESS {
						return gonvml.EventData{}, r.ret
					}
					return gonvml.EventData{Device: srv.Devices[r.dev], EventType: r.eventType, EventData: r.data}, gonvml.SUCCESS
				},
			}
			start := time.Now()
			var creates []time.Duration
			srv.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) {
				creates = append(creates, time.Since(start))
				if tt.createRet != gonvml.SUCCESS {
					return nil, tt.createRet
				}
				return set, gonvml.SUCCESS
			}

			s, err := New(srv, nil, func() time.Time { return time.Now() })
			if err != nil {
				t.Fatalf("New() = %v", err)
			}
			defer s.Close()
			run := cmp.Or(tt.run, 2*time.Second)
			ctx, cancel := context.WithTimeout(t.Context(), run)
			defer cancel()
			var got []schemas.GPUEvent
			err = s.WatchEvents(ctx, func(e schemas.GPUEvent) { got = append(got, e) })

			if tt.wantErr != gonvml.SUCCESS {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("%s: WatchEvents() = %v; want %v", tt.name, err, tt.wantErr)
				}
			} else if err != nil {
				t.Errorf("%s: WatchEvents() = %v; want nil", tt.name, err)
			}
			end := time.Since(start)
			for i := range got {
				// Scripted events arrive at once, in the bubble's time.
				want := start
				if i < len(tt.wantAt) {
					want = start.Add(tt.wantAt[i])
				}
				if got[i].TSMillis != want.UnixMilli() {
					t.Errorf("%s: event %d TSMillis = %d; want %d", tt.name, i, got[i].TSMillis, want.UnixMilli())
				}
				got[i].TSMillis = 0
			}
			if early := end < run; early != tt.wantEarly {
				t.Errorf("%s: WatchEvents returned after %v, the context ended after %v; want it early: %v", tt.name, end, run, tt.wantEarly)
			}
			want := tt.wantCreates
			if want == nil {
				want = []time.Duration{0}
			}
			if !slices.Equal(creates, want) {
				t.Errorf("%s: EventSetCreate calls at %v; want %v", tt.name, creates, want)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s: events = %+v; want %+v", tt.name, got, tt.want)
			}
			if len(tt.wantMasks) == 0 {
				tt.wantMasks = map[int]uint64{}
			}
			if !reflect.DeepEqual(masks, tt.wantMasks) {
				t.Errorf("%s: registered masks = %v; want %v", tt.name, masks, tt.wantMasks)
			}
			if n := len(set.FreeCalls()); n != tt.wantFree {
				t.Errorf("%s: EventSet.Free calls = %d; want %d", tt.name, n, tt.wantFree)
			}
		})
	}
}

// TestWatchEventsRegistersFoundGPU: a GPU that Collect found lost is left
// out of the event set, and registered in a new one once it answers again.
func TestWatchEventsRegistersFoundGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t)
		var mu sync.Mutex
		registered := map[int]int{}
		for i, dev := range srv.Devices {
			d := dev.(*dgxa100.Device)
			d.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) { return watchedEvents, gonvml.SUCCESS }
			d.RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return {
				mu.Lock()
				defer mu.Unlock()
				registered[i]++
				return gonvml.SUCCESS
			}
		}
		registrations := func(i int) int {
			mu.Lock()
			defer mu.Unlock()
			return registered[i]
		}
		d0 := srv.Devices[0].(*dgxa100.Device)
		var answers atomic.Bool
		power := d0.GetPowerUsageFunc
		d0.GetPowerUsageFunc = func() (uint32, gonvml.Return) {
			if !answers.Load() {
				return 0, gonvml.ERROR_GPU_IS_LOST
			}
			return power()
		}
		set := &mock.EventSet{
			FreeFunc: func() gonvml.Return { return gonvml.SUCCESS },
			WaitFunc: func(ms uint32) (gonvml.EventData, gonvml.Return) {
				time.Sleep(time.Duration(ms) * time.Millisecond)
				return gonvml.EventData{}, gonvml.ERROR_TIMEOUT
			},
		}
		srv.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) { return set, gonvml.SUCCESS }
		s := newSource(t, srv)
		var b schemas.SampleBatch
		if err := s.Collect(t.Context(), time.Now(), &b); err != nil || len(b.Samples) != 7 {
			t.Fatalf("Collect() = %v with %d samples; want nil with 7", err, len(b.Samples))
		}

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.WatchEvents(ctx, func(schemas.GPUEvent) {}) }()
		time.Sleep(LostRecheckInterval + time.Second)
		if got := [2]int{registrations(0), registrations(1)}; got != [2]int{0, 1} {
			t.Errorf("registrations of GPU 0, 1 while GPU 0 is lost = %v; want [0 1]", got)
		}
		answers.Store(true)
		b.Reset()
		if err := s.Collect(t.Context(), time.Now(), &b); err != nil || len(b.Samples) != 8 {
			t.Fatalf("Collect() once GPU 0 answers = %v with %d samples; want nil with 8", err, len(b.Samples))
		}
		time.Sleep(time.Second)
		if got := [2]int{registrations(0), registrations(1)}; got != [2]int{1, 2} {
			t.Errorf("registrations of GPU 0, 1 a second after GPU 0 answers again = %v; want [1 2]", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchEvents() = %v; want nil", err)
		}
	})
}

// TestCollectorWithLostGPU runs the collector over the mock with GPU 5
// fallen off the bus, its event set answering ERROR_GPU_IS_LOST to every
// wait, through the real publisher: the other 7 GPUs are published every
// tick and the collector keeps running.
func TestCollectorWithLostGPU(t *testing.T) {
	srv := newServer(t)
	lostDev := srv.Devices[5].(*dgxa100.Device)
	lostDev.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{}, gonvml.ERROR_GPU_IS_LOST
	}
	for _, dev := range srv.Devices {
		d := dev.(*dgxa100.Device)
		d.GetSupportedEventTypesFunc = func() (uint64, gonvml.Return) { return watchedEvents, gonvml.SUCCESS }
		d.RegisterEventsFunc = func(uint64, gonvml.EventSet) gonvml.Return { return gonvml.SUCCESS }
	}
	srv.EventSetCreateFunc = func() (gonvml.EventSet, gonvml.Return) {
		return &mock.EventSet{
			FreeFunc: func() gonvml.Return { return gonvml.SUCCESS },
			WaitFunc: func(uint32) (gonvml.EventData, gonvml.Return) { return gonvml.EventData{}, gonvml.ERROR_GPU_IS_LOST },
		}, gonvml.SUCCESS
	}
	s := newSource(t, srv)
	cfg := collector.Config{Cluster: "test", Host: "node", Interval: 100 * time.Millisecond}
	// Published fails the test if the collector's Run returns an error.
	run := collectortest.Published(t, cfg, s, time.Second)
	if run.Collected == 0 || int(run.Collected)%7 != 0 {
		t.Fatalf("heliostat_collector_samples_total = %v; want a positive multiple of 7 GPUs", run.Collected)
	}
	samples := 0
	var b schemas.SampleBatch
	for _, m := range run.Messages {
		if err := schemas.DecodeSampleBatch(m.Value, &b); err != nil {
			t.Fatalf("DecodeSampleBatch(offset %d) = %v", m.Offset, err)
		}
		for _, g := range b.GPUs {
			if g.UUID == lostDev.UUID {
				t.Errorf("offset %d names the lost GPU %s", m.Offset, g.UUID)
			}
		}
		samples += len(b.Samples)
	}
	if samples != int(run.Collected) {
		t.Errorf("%d samples published; want %v, heliostat_collector_samples_total", samples, run.Collected)
	}
	if err := s.Lost(); !errors.Is(err, ErrDeviceLost) {
		t.Errorf("Lost() = %v; want an error wrapping ErrDeviceLost", err)
	}
}

// TestWireRoundTrip checks that what Collect produces survives the wire
// format: identities, present bits, integer values and GPM ratios.
func TestWireRoundTrip(t *testing.T) {
	srv := newServer(t)
	stubGPM(srv, srv.Devices[0].(*dgxa100.Device))
	d7 := srv.Devices[7].(*dgxa100.Device)
	d7.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	s := newSource(t, srv)
	b := schemas.SampleBatch{Cluster: "c1", Host: "node-01"}
	collect(t, s, &b)
	if err := s.Collect(t.Context(), tick.Add(time.Second), &b); err != nil {
		t.Fatalf("Collect() = %v", err)
	}
	if len(b.GPUs) != 8 || len(b.Samples) != 16 {
		t.Fatalf("two ticks gave %d GPUs, %d samples; want 8, 16", len(b.GPUs), len(b.Samples))
	}
	msg, err := schemas.AppendSampleBatch(nil, &b)
	if err != nil {
		t.Fatalf("AppendSampleBatch() = %v", err)
	}
	var got schemas.SampleBatch
	if err := schemas.DecodeSampleBatch(msg, &got); err != nil {
		t.Fatalf("DecodeSampleBatch() = %v", err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Errorf("DecodeSampleBatch(AppendSampleBatch(b)) = %+v; want %+v", got, b)
	}
	if v, ok := got.Samples[8].Float(schemas.SMActive); !ok || v != 0.5 {
		t.Errorf("decoded tick 2 device 0 sm_active = %v, %v; want 0.5, true", v, ok)
	}
	if got.Samples[15].Has(schemas.PowerUsage) {
		t.Errorf("decoded device 7 power_mw is present; want absent")
	}
}

func TestCString(t *testing.T) {
	tests := []struct {
		in   []uint8
		want string
	}{
		{[]uint8("00000000:07:00.0\x00\x00garbage"), "00000000:07:00.0"},
		{[]uint8("no terminator"), "no terminator"},
		{[]uint8{0, 'x'}, ""},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := cString(tt.in); got != tt.want {
			t.Errorf("cString(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
	if got := cString([]int8{'a', 'b', 0, 'c'}); got != "ab" {
		t.Errorf("cString(int8 ab\\0c) = %q; want %q", got, "ab")
	}
}

func TestMIGProfile(t *testing.T) {
	tests := []struct{ in, want string }{
		{"NVIDIA A100-SXM4-40GB MIG 1g.5gb", "1g.5gb"},
		{"NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", "1g.10gb+me"},
		{"NVIDIA H100 80GB HBM3 MIG 7g.80gb ", "7g.80gb"},
		{"1g.5gb", "1g.5gb"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := migProfile(tt.in); got != tt.want {
			t.Errorf("migProfile(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestSetRatio(t *testing.T) {
	tests := []struct {
		pct    float64
		want   float32
		wantOK bool
	}{
		{0, 0, true},
		{37.5, 0.375, true},
		{100, 1, true},
		{100.05, 1, true}, // rounding noise
		{101, 0, false},
		{-1, 0, false},
		{math.NaN(), 0, false},
	}
	for _, tt := range tests {
		s := &Source{logger: slog.New(slog.DiscardHandler)}
		var smp schemas.Sample
		s.setRatio(&device{}, &smp, schemas.SMActive, tt.pct)
		got, ok := smp.Float(schemas.SMActive)
		if ok != tt.wantOK || ok && got != tt.want {
			t.Errorf("setRatio(%v) = %v, %v; want %v, %v", tt.pct, got, ok, tt.want, tt.wantOK)
		}
	}
}

// checkReadErrorsMetric checks that the Prometheus collector reports the
// source's MetricErrors, one series per metric.
func checkReadErrorsMetric(t *testing.T, s *Source, want map[schemas.Metric]uint64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	i := slices.IndexFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "heliostat_collector_nvml_read_errors_total" })
	if i < 0 {
		t.Fatalf("gathered no heliostat_collector_nvml_read_errors_total")
	}
	got := map[string]float64{}
	for _, m := range mfs[i].GetMetric() {
		got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	if len(got) != int(schemas.NumMetrics) {
		t.Errorf("%d series; want one per metric (%d)", len(got), schemas.NumMetrics)
	}
	for m := range schemas.NumMetrics {
		if got[m.String()] != float64(want[m]) {
			t.Errorf("heliostat_collector_nvml_read_errors_total{metric=%q} = %v; want %d", m, got[m.String()], want[m])
		}
	}
}
