package nvml

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/heliostat-dev/heliostat/collector"
)

// procsOf returns a GetComputeRunningProcesses stub answering pids.
func procsOf(pids ...uint32) func() ([]gonvml.ProcessInfo, gonvml.Return) {
	return func() ([]gonvml.ProcessInfo, gonvml.Return) {
		p := make([]gonvml.ProcessInfo, len(pids))
		for i, pid := range pids {
			p[i] = gonvml.ProcessInfo{Pid: pid, UsedGpuMemory: 1 << 20}
		}
		return p, gonvml.SUCCESS
	}
}

func procsFail(ret gonvml.Return) func() ([]gonvml.ProcessInfo, gonvml.Return) {
	return func() ([]gonvml.ProcessInfo, gonvml.Return) { return nil, ret }
}

// everyDevice returns stub for each of the mock's 8 GPUs.
func everyDevice(stub func() ([]gonvml.ProcessInfo, gonvml.Return)) map[int]func() ([]gonvml.ProcessInfo, gonvml.Return) {
	m := make(map[int]func() ([]gonvml.ProcessInfo, gonvml.Return))
	for i := range 8 {
		m[i] = stub
	}
	return m
}

func TestGPUProcesses(t *testing.T) {
	tests := []struct {
		name     string
		stub     map[int]func() ([]gonvml.ProcessInfo, gonvml.Return) // by device index; others answer none
		want     map[int][]uint32                                     // by device index; nil for an empty list
		missing  []int                                                // devices left out of the list
		wantErr  []string                                             // substrings of the error
		wantLost bool
		wantNil  bool // no list at all: the whole listing failed
		// wantDriver: the error wraps ErrDriverLost.
		wantDriver bool
	}{
		{
			name: "processes on some GPUs",
			stub: map[int]func() ([]gonvml.ProcessInfo, gonvml.Return){
				0: procsOf(1234),
				1: procsOf(1234, 1300, 1301),
				7: procsOf(99),
			},
			want: map[int][]uint32{0: {1234}, 1: {1234, 1300, 1301}, 7: {99}},
		},
		{
			name: "a process listed twice on one GPU is listed once",
			stub: map[int]func() ([]gonvml.ProcessInfo, gonvml.Return){4: procsOf(50, 51, 50)},
			want: map[int][]uint32{4: {50, 51}},
		},
		{
			name: "not supported and no permission mean no processes",
			stub: map[int]func() ([]gonvml.ProcessInfo, gonvml.Return){
				2: procsFail(gonvml.ERROR_NOT_SUPPORTED),
				3: procsFail(gonvml.ERROR_NO_PERMISSION),
				5: procsOf(7),
			},
			want: map[int][]uint32{5: {7}},
		},
		{
			name: "a failing GPU is left out and named",
			stub: map[int]func() ([]gonvml.ProcessInfo, gonvml.Return){
				1: procsOf(11),
				6: procsFail(gonvml.ERROR_UNKNOWN),
			},
			want:    map[int][]uint32{1: {11}},
			missing: []int{6},
			wantErr: []string{"list processes", "GPU-"},
		},
		{
			name: "a lost GPU wraps ErrDeviceLost",
			stub: map[int]func() ([]gonvml.ProcessInfo, gonvml.Return){
				0: procsFail(gonvml.ERROR_GPU_IS_LOST),
				3: procsFail(gonvml.ERROR_UNKNOWN),
			},
			missing:  []int{0, 3},
			wantErr:  []string{"list processes"},
			wantLost: true,
		},
		{
			// An empty list would tell the attributor that every job left
			// its GPU, closing every open interval.
			name:    "every GPU failing gives no list",
			stub:    everyDevice(procsFail(gonvml.ERROR_UNKNOWN)),
			wantErr: []string{"list processes", "ERROR_UNKNOWN"},
			wantNil: true,
		},
		{
			name: "the driver gone gives no list, though some GPUs answered first",
			stub: map[int]func() ([]gonvml.ProcessInfo, gonvml.Return){
				0: procsOf(11),
				5: procsFail(gonvml.ERROR_UNINITIALIZED),
			},
			wantErr:    []string{"list processes"},
			wantNil:    true,
			wantDriver: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t)
			for i, dev := range srv.Devices {
				d := dev.(*dgxa100.Device)
				d.GetComputeRunningProcessesFunc = procsOf()
				if f, ok := tt.stub[i]; ok {
					d.GetComputeRunningProcessesFunc = f
				}
			}
			s := newSource(t, srv)
			got, err := s.GPUProcesses()
			if (err != nil) != (len(tt.wantErr) > 0) {
				t.Fatalf("GPUProcesses() error = %v; want error %v", err, len(tt.wantErr) > 0)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("GPUProcesses() error = %q; want it to contain %q", err, w)
				}
			}
			if lost := errors.Is(err, ErrDeviceLost); lost != tt.wantLost {
				t.Errorf("errors.Is(%v, ErrDeviceLost) = %v; want %v", err, lost, tt.wantLost)
			}
			if driver := errors.Is(err, ErrDriverLost); driver != tt.wantDriver {
				t.Errorf("errors.Is(%v, ErrDriverLost) = %v; want %v", err, driver, tt.wantDriver)
			}
			if tt.wantNil {
				if got != nil {
					t.Errorf("GPUProcesses() = %+v; want nil", got)
				}
				return
			}
			var want []collector.GPUProcesses
			for i, dev := range srv.Devices {
				if slices.Contains(tt.missing, i) {
					continue
				}
				d := dev.(*dgxa100.Device)
				want = append(want, collector.GPUProcesses{Index: i, UUID: d.UUID, PIDs: tt.want[i]})
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("GPUProcesses() = %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestGPUProcessesMIG(t *testing.T) {
	srv := newServer(t)
	for _, dev := range srv.Devices {
		dev.(*dgxa100.Device).GetComputeRunningProcessesFunc = procsOf()
	}
	parent := srv.Devices[2].(*dgxa100.Device)
	parent.GetMigModeFunc = func() (int, int, gonvml.Return) {
		return gonvml.DEVICE_MIG_ENABLE, gonvml.DEVICE_MIG_ENABLE, gonvml.SUCCESS
	}
	parentAsked := 0
	parent.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		parentAsked++
		return []gonvml.ProcessInfo{{Pid: 42}, {Pid: 43}}, gonvml.SUCCESS
	}
	a := migDevice("MIG-aaaa", "Mock NVIDIA A100-SXM4-40GB MIG 3g.20gb", 1, 0, 100)
	a.GetComputeRunningProcessesFunc = procsOf(42)
	b := migDevice("MIG-bbbb", "Mock NVIDIA A100-SXM4-40GB MIG 1g.5gb", 2, 0, 200)
	b.GetComputeRunningProcessesFunc = procsFail(gonvml.ERROR_INVALID_ARGUMENT)
	c := migDevice("MIG-cccc", "Mock NVIDIA A100-SXM4-40GB MIG 1g.5gb", 3, 0, 200)
	c.GetComputeRunningProcessesFunc = procsOf(43)
	migs := map[int]*mock.Device{0: a, 1: b, 3: c}
	parent.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 4, gonvml.SUCCESS }
	parent.GetMigDeviceHandleByIndexFunc = func(j int) (gonvml.Device, gonvml.Return) {
		if d, ok := migs[j]; ok {
			return d, gonvml.SUCCESS
		}
		return nil, gonvml.ERROR_NOT_FOUND
	}
	s := newSource(t, srv)
	got, err := s.GPUProcesses()
	if err != nil {
		t.Fatalf("GPUProcesses() = %v", err)
	}
	uuid := func(i int) string { return srv.Devices[i].(*dgxa100.Device).UUID }
	want := []collector.GPUProcesses{
		{Index: 0, UUID: uuid(0)},
		{Index: 1, UUID: uuid(1)},
		{Index: 2, UUID: uuid(2), MIGUUID: "MIG-aaaa", PIDs: []uint32{42}},
		{Index: 2, UUID: uuid(2), MIGUUID: "MIG-bbbb"},
		{Index: 2, UUID: uuid(2), MIGUUID: "MIG-cccc", PIDs: []uint32{43}},
	}
	for i := 3; i < 8; i++ {
		want = append(want, collector.GPUProcesses{Index: i, UUID: uuid(i)})
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GPUProcesses() = %+v\nwant %+v", got, want)
	}
	if parentAsked != 0 {
		t.Errorf("the MIG-enabled GPU itself was asked %d times; want 0", parentAsked)
	}
}

func TestGPUProcessesClosed(t *testing.T) {
	s := newSource(t, newServer(t))
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	got, err := s.GPUProcesses()
	if err == nil || got != nil {
		t.Errorf("GPUProcesses() after Close = %v, %v; want nil and an error", got, err)
	}
}

// TestHardwareGPUProcesses lists the processes of the host's real GPUs. It is
// skipped only where libnvidia-ml.so.1 cannot be loaded.
func TestHardwareGPUProcesses(t *testing.T) {
	s := openHardware(t)
	got, err := s.GPUProcesses()
	if err != nil {
		t.Fatalf("GPUProcesses() = %v", err)
	}
	if len(got) == 0 {
		t.Fatal("GPUProcesses() listed no GPU")
	}
	uuids := make(map[string]bool)
	listed := make(map[uint32]bool)
	for _, g := range s.GPUs() {
		uuids[g.UUID+"/"+g.MIGUUID] = true
	}
	for _, g := range got {
		if !uuids[g.UUID+"/"+g.MIGUUID] {
			t.Errorf("GPUProcesses() lists %+v, not among GPUs()", g)
		}
		for _, pid := range g.PIDs {
			if pid == 0 {
				t.Errorf("GPUProcesses() lists pid 0 on %s", g.UUID)
			}
			listed[pid] = true
		}
		t.Logf("gpu %s %s: pids %v", g.UUID, g.MIGUUID, g.PIDs)
	}
	// A GPU program the caller started (HELIOSTAT_TEST_GPU_PID) must be listed.
	if v := os.Getenv("HELIOSTAT_TEST_GPU_PID"); v != "" {
		pid, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			t.Fatalf("HELIOSTAT_TEST_GPU_PID=%q: %v", v, err)
		}
		if !listed[uint32(pid)] {
			t.Errorf("GPUProcesses() does not list pid %d, which HELIOSTAT_TEST_GPU_PID says runs on a GPU", pid)
		}
	}
}
