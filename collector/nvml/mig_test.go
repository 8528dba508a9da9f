package nvml

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/schemas"
)

// migLayout is the MIG slots of the mock's GPU 2, which a test changes as
// nvidia-smi mig -dci/-dgi/-cgi/-cci would while the collector runs.
type migLayout struct {
	mu    sync.Mutex
	slots map[int]*mock.Device
	dead  map[*mock.Device]*atomic.Bool
}

// add creates a MIG instance in slot.
func (l *migLayout) add(slot int, uuid, profile string, gi int) {
	d := migDevice(uuid, "NVIDIA A100 MIG "+profile, gi, 0, 100)
	dead := new(atomic.Bool)
	// A destroyed instance's handle answers as NVML answers a stale one:
	// not found, or invalid argument.
	mem, procs := d.GetMemoryInfo_v2Func, d.GetComputeRunningProcessesFunc
	d.GetMemoryInfo_v2Func = func() (gonvml.Memory_v2, gonvml.Return) {
		if dead.Load() {
			return gonvml.Memory_v2{}, gonvml.ERROR_NOT_FOUND
		}
		return mem()
	}
	d.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
		if dead.Load() {
			return nil, gonvml.ERROR_INVALID_ARGUMENT
		}
		return procs()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slots[slot] = d
	l.dead[d] = dead
}

// destroy destroys the instance in slot, if any.
func (l *migLayout) destroy(slot int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.slots[slot]; ok {
		l.dead[d].Store(true)
		delete(l.slots, slot)
	}
}

// newMIGServer returns the 8-GPU mock whose GPU 2 is in MIG mode with
// MIG-aaaa in slot 0 and three slots in all.
func newMIGServer(t *testing.T) (*dgxa100.Server, *dgxa100.Device, *migLayout) {
	t.Helper()
	srv := newServer(t)
	parent := srv.Devices[2].(*dgxa100.Device)
	parent.GetMigModeFunc = func() (int, int, gonvml.Return) {
		return gonvml.DEVICE_MIG_ENABLE, gonvml.DEVICE_MIG_ENABLE, gonvml.SUCCESS
	}
	parent.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
		return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
	}
	l := &migLayout{slots: map[int]*mock.Device{}, dead: map[*mock.Device]*atomic.Bool{}}
	l.add(0, "MIG-aaaa", "3g.20gb", 1)
	parent.GetMaxMigDeviceCountFunc = func() (int, gonvml.Return) { return 3, gonvml.SUCCESS }
	parent.GetMigDeviceHandleByIndexFunc = func(j int) (gonvml.Device, gonvml.Return) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if d, ok := l.slots[j]; ok {
			return d, gonvml.SUCCESS
		}
		return nil, gonvml.ERROR_NOT_FOUND
	}
	return srv, parent, l
}

// migSampled returns the MIG instances sampled in b, each with whether its
// sample holds fb_used.
func migSampled(b *schemas.SampleBatch) map[string]bool {
	got := map[string]bool{}
	for _, smp := range b.Samples {
		if g := b.GPUs[smp.GPU]; g.MIGUUID != "" {
			_, ok := smp.Uint(schemas.FBUsed)
			got[g.MIGUUID] = ok
		}
	}
	return got
}

// migListed returns the MIG instances GPUProcesses lists, with their PIDs.
func migListed(t *testing.T, s *Source) map[string][]uint32 {
	t.Helper()
	lists, err := s.GPUProcesses()
	if err != nil {
		t.Fatalf("GPUProcesses() = %v", err)
	}
	got := map[string][]uint32{}
	for _, p := range lists {
		if p.MIGUUID != "" {
			got[p.MIGUUID] = p.PIDs
		}
	}
	return got
}

func migReconfigurations(t *testing.T, s *Source) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector())
	n, err := testutil.GatherAndCount(reg, "heliostat_collector_nvml_mig_reconfigurations_total")
	if err != nil || n != 1 {
		t.Fatalf("GatherAndCount(mig_reconfigurations_total) = %d, %v; want 1 series", n, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "heliostat_collector_nvml_mig_reconfigurations_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// TestCollectMIGReconfigured: a MIG instance destroyed and another created
// while the collector runs, without a GPU reset. The destroyed one's stale
// handle answers "not found": it is left out at once, the GPU's instances
// are enumerated again at the next tick, and the new one is sampled and
// listed from then on.
func TestCollectMIGReconfigured(t *testing.T) {
	srv, parent, layout := newMIGServer(t)
	logs := &logLines{}
	s, err := New(srv, logs.logger(t), func() time.Time { return tick })
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	t.Cleanup(func() { s.Close() })

	steps := []struct {
		name        string
		change      func()
		wantSampled map[string]bool // MIG instance: fb_used present
		wantListed  map[string][]uint32
		wantChanges float64
	}{
		{
			name:        "before",
			wantSampled: map[string]bool{"MIG-aaaa": true},
			wantListed:  map[string][]uint32{"MIG-aaaa": {42}},
		},
		{
			name: "MIG-aaaa destroyed, MIG-cccc created in slot 1",
			change: func() {
				layout.destroy(0)
				layout.add(1, "MIG-cccc", "1g.5gb", 2)
			},
			// This tick finds MIG-aaaa gone and leaves it out; the
			// listing after it enumerates the instances again.
			wantSampled: map[string]bool{},
			wantListed:  map[string][]uint32{"MIG-cccc": {42}},
			wantChanges: 1,
		},
		{
			name:        "next tick",
			wantSampled: map[string]bool{"MIG-cccc": true},
			wantListed:  map[string][]uint32{"MIG-cccc": {42}},
			wantChanges: 1,
		},
	}
	for i, st := range steps {
		if st.change != nil {
			st.change()
		}
		var b schemas.SampleBatch
		if err := s.Collect(t.Context(), tick.Add(time.Duration(i)*time.Second), &b); err != nil {
			t.Fatalf("%s: Collect() = %v", st.name, err)
		}
		if got := migSampled(&b); !reflect.DeepEqual(got, st.wantSampled) {
			t.Errorf("%s: MIG instances sampled (fb_used present) = %v; want %v", st.name, got, st.wantSampled)
		}
		if got := migListed(t, s); !reflect.DeepEqual(got, st.wantListed) {
			t.Errorf("%s: GPUProcesses() MIG instances = %v; want %v", st.name, got, st.wantListed)
		}
		if got := migReconfigurations(t, s); got != st.wantChanges {
			t.Errorf("%s: mig_reconfigurations_total = %v; want %v", st.name, got, st.wantChanges)
		}
	}
	var migs []string
	for _, g := range s.GPUs() {
		if g.MIGUUID != "" {
			migs = append(migs, g.MIGUUID)
			if g.UUID != parent.UUID || g.GIID != 2 || g.MIGProfile != "1g.5gb" {
				t.Errorf("GPUs() has %+v; want MIG-cccc of %s, GI 2, 1g.5gb", g, parent.UUID)
			}
		}
	}
	if !reflect.DeepEqual(migs, []string{"MIG-cccc"}) {
		t.Errorf("GPUs() MIG instances = %v; want [MIG-cccc]", migs)
	}
	if n := logs.count("nvml mig layout changed"); n != 1 {
		t.Errorf("%d lines 'nvml mig layout changed'; want 1", n)
	}
	if err := s.Lost(); err != nil {
		t.Errorf("Lost() = %v; want nil", err)
	}
}

// TestCollectMIGRescan: an instance created beside the others, none of which
// fails, is found by the enumeration every MIGRescanInterval of the tick
// clock; an enumeration that finds the same instances changes nothing.
func TestCollectMIGRescan(t *testing.T) {
	srv, parent, layout := newMIGServer(t)
	s := newSource(t, srv)
	at := func(d time.Duration) map[string]bool {
		t.Helper()
		var b schemas.SampleBatch
		if err := s.Collect(t.Context(), tick.Add(d), &b); err != nil {
			t.Fatalf("Collect() at %v = %v", d, err)
		}
		return migSampled(&b)
	}
	at(0)
	enumerations := len(parent.GetMaxMigDeviceCountCalls())
	at(MIGRescanInterval)
	if n := len(parent.GetMaxMigDeviceCountCalls()) - enumerations; n != 1 {
		t.Errorf("enumerations after %v = %d; want 1", MIGRescanInterval, n)
	}
	if got := migReconfigurations(t, s); got != 0 {
		t.Errorf("mig_reconfigurations_total after an unchanged enumeration = %v; want 0", got)
	}

	layout.add(2, "MIG-bbbb", "1g.5gb", 3)
	want := map[string]bool{"MIG-aaaa": true}
	if got := at(MIGRescanInterval + time.Second); !reflect.DeepEqual(got, want) {
		t.Errorf("before the next enumeration: sampled %v; want %v", got, want)
	}
	want = map[string]bool{"MIG-aaaa": true, "MIG-bbbb": true}
	if got := at(2 * MIGRescanInterval); !reflect.DeepEqual(got, want) {
		t.Errorf("at the next enumeration: sampled %v; want %v", got, want)
	}
	if got := migReconfigurations(t, s); got != 1 {
		t.Errorf("mig_reconfigurations_total = %v; want 1", got)
	}
}

// TestGPUProcessesMIGDestroyed: a listing that finds an instance destroyed
// before any tick did leaves it out without an error (its processes ended
// with it), and the next listing has the GPU's new instances.
func TestGPUProcessesMIGDestroyed(t *testing.T) {
	srv, _, layout := newMIGServer(t)
	s := newSource(t, srv)
	if got, want := migListed(t, s), map[string][]uint32{"MIG-aaaa": {42}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("GPUProcesses() MIG instances = %v; want %v", got, want)
	}
	layout.destroy(0)
	layout.add(0, "MIG-dddd", "3g.20gb", 1)
	if got, want := migListed(t, s), map[string][]uint32{}; !reflect.DeepEqual(got, want) {
		t.Errorf("GPUProcesses() after MIG-aaaa was destroyed = %v; want %v", got, want)
	}
	if got, want := migListed(t, s), map[string][]uint32{"MIG-dddd": {42}}; !reflect.DeepEqual(got, want) {
		t.Errorf("next GPUProcesses() = %v; want %v", got, want)
	}
}

// TestMIGReconfiguredConcurrently runs what the collector runs side by side
// (ticks, attribution's listings, readiness, scrapes) while the MIG layout
// changes; run it with -race.
func TestMIGReconfiguredConcurrently(t *testing.T) {
	srv, _, layout := newMIGServer(t)
	s := newSource(t, srv)
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector())
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range []func(){
		func() { _, _ = s.GPUProcesses() },
		func() { _ = s.Lost(); _ = s.GPUs() },
		func() { _, _ = reg.Gather() },
	} {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
					f()
				}
			}
		})
	}
	for i := range 40 {
		slot := 1 + i%2
		if i%4 < 2 {
			layout.add(slot, fmt.Sprintf("MIG-%04d", i), "1g.5gb", 2+slot)
		} else {
			layout.destroy(slot)
		}
		var b schemas.SampleBatch
		if err := s.Collect(t.Context(), tick.Add(time.Duration(i)*MIGRescanInterval), &b); err != nil {
			t.Fatalf("Collect() = %v", err)
		}
	}
	close(done)
	wg.Wait()
	if got := migReconfigurations(t, s); got < 10 {
		t.Errorf("mig_reconfigurations_total = %v; want the layout changes seen", got)
	}
}

// TestCollectMIGModeSwitched: MIG mode switched off and on again on GPU 2
// while the collector runs (nvidia-smi -mig 0|1 with the GPU reset it needs;
// the driver stays loaded). In MIG mode NVML answers the whole GPU's
// utilization "not supported", and its processes "no permission" to an
// unprivileged collector; with MIG off it answers both again. The
// enumeration that finds the mode changed (the next tick once an instance is
// found gone, else the one every MIGRescanInterval) makes the GPU's queries
// asked again: utilization and processes are sampled again, and asked once
// more, then no longer, when MIG is back on. Before, a GPU taken out of MIG
// mode had no utilization until the collector restarted.
func TestCollectMIGModeSwitched(t *testing.T) {
	type step struct {
		at       time.Duration // the tick, after tick
		mig      *bool         // switch MIG mode before the tick
		wantUtil bool          // gpu_util and processes present on GPU 2
		wantMIG  map[string]bool
		// wantAsked is how often GPU 2's utilization was asked so far.
		wantAsked int
	}
	on, off := new(bool), new(bool)
	*on = true
	for _, tc := range []struct {
		name      string
		instances bool // GPU 2 has MIG-aaaa while in MIG mode
		steps     []step
	}{
		{
			name:      "instance destroyed with the mode, found gone",
			instances: true,
			steps: []step{
				{at: 0, wantMIG: map[string]bool{"MIG-aaaa": true}, wantAsked: 1},
				// This tick finds MIG-aaaa gone; the next one
				// enumerates GPU 2 again and finds MIG off.
				{at: time.Second, mig: off, wantMIG: map[string]bool{}, wantAsked: 1},
				{at: 2 * time.Second, wantUtil: true, wantMIG: map[string]bool{}, wantAsked: 2},
				{at: 3 * time.Second, wantUtil: true, wantMIG: map[string]bool{}, wantAsked: 3},
				{at: MIGRescanInterval, mig: on, wantMIG: map[string]bool{"MIG-aaaa": true}, wantAsked: 4},
				{at: MIGRescanInterval + time.Second, wantMIG: map[string]bool{"MIG-aaaa": true}, wantAsked: 4},
			},
		},
		{
			name: "no instances, found by the periodic enumeration",
			steps: []step{
				{at: 0, wantMIG: map[string]bool{}, wantAsked: 1},
				{at: time.Second, mig: off, wantMIG: map[string]bool{}, wantAsked: 1},
				{at: MIGRescanInterval, wantUtil: true, wantMIG: map[string]bool{}, wantAsked: 2},
				{at: MIGRescanInterval + time.Second, wantUtil: true, wantMIG: map[string]bool{}, wantAsked: 3},
				{at: 2 * MIGRescanInterval, mig: on, wantMIG: map[string]bool{}, wantAsked: 4},
				{at: 2*MIGRescanInterval + time.Second, wantMIG: map[string]bool{}, wantAsked: 4},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, parent, layout := newMIGServer(t)
			if !tc.instances {
				layout.destroy(0)
			}
			var migOn atomic.Bool
			migOn.Store(true)
			parent.GetMigModeFunc = func() (int, int, gonvml.Return) {
				if migOn.Load() {
					return gonvml.DEVICE_MIG_ENABLE, gonvml.DEVICE_MIG_ENABLE, gonvml.SUCCESS
				}
				return gonvml.DEVICE_MIG_DISABLE, gonvml.DEVICE_MIG_DISABLE, gonvml.SUCCESS
			}
			parent.GetUtilizationRatesFunc = func() (gonvml.Utilization, gonvml.Return) {
				if migOn.Load() {
					return gonvml.Utilization{}, gonvml.ERROR_NOT_SUPPORTED
				}
				return gonvml.Utilization{Gpu: 77, Memory: 5}, gonvml.SUCCESS
			}
			parent.GetComputeRunningProcessesFunc = func() ([]gonvml.ProcessInfo, gonvml.Return) {
				if migOn.Load() {
					return nil, gonvml.ERROR_NO_PERMISSION
				}
				return procsOf(4242)()
			}
			s := newSource(t, srv)
			for _, st := range tc.steps {
				if st.mig != nil {
					migOn.Store(*st.mig)
					switch {
					case !*st.mig:
						layout.destroy(0)
					case tc.instances:
						layout.add(0, "MIG-aaaa", "3g.20gb", 1)
					}
				}
				var b schemas.SampleBatch
				if err := s.Collect(t.Context(), tick.Add(st.at), &b); err != nil {
					t.Fatalf("at %v: Collect() = %v", st.at, err)
				}
				var smp *schemas.Sample
				for i := range b.Samples {
					if g := b.GPUs[b.Samples[i].GPU]; g.Index == 2 && g.MIGUUID == "" {
						smp = &b.Samples[i]
					}
				}
				if smp == nil {
					t.Fatalf("at %v: no sample of GPU 2", st.at)
				}
				u, uok := smp.Uint(schemas.GPUUtil)
				p, pok := smp.Uint(schemas.Processes)
				if uok != st.wantUtil || pok != st.wantUtil || uok && (u != 77 || p != 1) {
					t.Errorf("at %v (MIG on %v): GPU 2 gpu_util = %d, %v, processes = %d, %v; want 77, 1 present %v",
						st.at, migOn.Load(), u, uok, p, pok, st.wantUtil)
				}
				if got := migSampled(&b); !reflect.DeepEqual(got, st.wantMIG) {
					t.Errorf("at %v: MIG instances sampled = %v; want %v", st.at, got, st.wantMIG)
				}
				if got := len(parent.GetUtilizationRatesCalls()); got != st.wantAsked {
					t.Errorf("at %v: GPU 2 asked for its utilization %d times; want %d", st.at, got, st.wantAsked)
				}
			}
		})
	}
}

// TestCollectMIGAfterLost: a GPU that answers again after it was lost (a
// reset after Xid 79) may come back with other MIG instances; they are
// enumerated again at the next tick, not only at the next periodic rescan.
func TestCollectMIGAfterLost(t *testing.T) {
	srv, parent, layout := newMIGServer(t)
	var lost atomic.Bool
	power := parent.GetPowerUsageFunc
	parent.GetPowerUsageFunc = func() (uint32, gonvml.Return) {
		if lost.Load() {
			return 0, gonvml.ERROR_GPU_IS_LOST
		}
		return power()
	}
	s := newSource(t, srv)
	steps := []struct {
		at   time.Duration
		lost bool
		add  bool // MIG-bbbb is created before this tick
		want map[string]bool
	}{
		{at: 0, want: map[string]bool{"MIG-aaaa": true}},
		{at: time.Second, lost: true, want: map[string]bool{}},
		{at: 30 * time.Second, lost: true, add: true, want: map[string]bool{}},
		// The recheck finds the GPU again and samples the instances it
		// knows; the next tick has its new one, long before the rescan
		// due at 90s.
		{at: time.Second + LostRecheckInterval, want: map[string]bool{"MIG-aaaa": true}},
		{at: 2*time.Second + LostRecheckInterval, want: map[string]bool{"MIG-aaaa": true, "MIG-bbbb": true}},
	}
	for _, st := range steps {
		lost.Store(st.lost)
		if st.add {
			layout.add(2, "MIG-bbbb", "1g.5gb", 3)
		}
		var b schemas.SampleBatch
		if err := s.Collect(t.Context(), tick.Add(st.at), &b); err != nil {
			t.Fatalf("Collect() at %v = %v", st.at, err)
		}
		if got := migSampled(&b); !reflect.DeepEqual(got, st.want) {
			t.Errorf("at %v: sampled MIG instances %v; want %v", st.at, got, st.want)
		}
	}
}
