// Package nvml samples NVIDIA GPUs through NVML (go-nvml) and watches their
// XID and ECC events. It is the only package of heliostat that talks to the
// driver: everything else sees schemas.Sample and schemas.GPUEvent.
//
// A Source is built once per process with Open (the host's driver) or New (an
// injected nvml.Interface, for tests), sampled with Collect, watched with
// WatchEvents and released with Close. A host without the NVIDIA driver makes
// Open fail with an error for which errors.Is(err, ErrNoDriver) holds; callers
// use that to fall back to another source or to report "no GPUs here".
//
// Metrics the device or driver does not support are absent from the sample,
// never 0 and never an error; the first "not supported" answer is remembered so
// later ticks do not ask again. Devices are enumerated once, in New; their MIG
// instances again every MIGRescanInterval and as soon as one is no longer
// found (see "MIG reconfiguration" below).
//
// # Lost GPUs
//
// One GPU that stops answering (ERROR_GPU_IS_LOST or ERROR_RESET_REQUIRED,
// e.g. after Xid 79 "fallen off the bus") costs only its own samples:
//
//   - Collect leaves it and its MIG instances out, logs the loss once and
//     asks it again every LostRecheckInterval (of the tick clock); as soon as
//     it answers again it is sampled again, and its MIG instances are
//     enumerated again at the next tick. A GPU whose handles NVML keeps
//     refusing after a reset comes back only with a new Source (a restart).
//   - New leaves out a GPU whose handle, UUID or MIG instances cannot be read
//     (for any reason but the driver's) and starts with the others; such a
//     GPU is not asked again by this Source.
//   - WatchEvents, when waiting answers that a GPU is lost, registers the
//     GPUs that still answer in a new event set and goes on.
//
// Lost names every such GPU (for readiness) and Collector exports them as
// metrics. Only NVML as a whole going away (ERROR_UNINITIALIZED,
// ERROR_DRIVER_NOT_LOADED: errors wrapping ErrDriverLost), or every GPU being
// lost, fails Collect, WatchEvents (driver only) or New.
//
// # Stalled calls
//
// A GPU can also stop answering by not answering at all: after Xid 79 an
// NVML call on it can stay in the driver for minutes. So the calls of each
// GPU (and of its MIG instances) run on a goroutine of their own, the GPUs
// concurrently, and Collect, GPUProcesses and the MIG enumeration wait for
// each GPU at most StallTimeout. A GPU whose call has not returned by then is
// left out of that tick, logged once, named by Lost (wrapping
// ErrDeviceStalled) and exported as stalled; no call on it starts until the
// stalled one returns (at most one goroutine per GPU is ever stuck), and from
// the next tick after that it is asked again. A tick that finds a GPU
// stalled takes StallTimeout longer; the ticks after it do not wait for that
// GPU.
// Close does not wait for a stalled call, nor shut NVML down under it.
//
// # MIG reconfiguration
//
// MIG instances can be destroyed and created while the driver runs, without
// a GPU reset. A destroyed instance's handle answers ERROR_NOT_FOUND or
// ERROR_INVALID_ARGUMENT, which are also how an instance says it does not
// support a query: such an answer to a query the instance answered before
// means it is gone. Collect then leaves it out and, at its next tick,
// enumerates that GPU's instances again; GPUProcesses leaves it out too.
// Collect also enumerates every GPU's instances every MIGRescanInterval, to
// find new ones. When a GPU's instances changed, its devices are rebuilt (new
// instances sampled and listed, destroyed ones dropped), the change is logged
// and counted (heliostat_collector_nvml_mig_reconfigurations_total).
//
// The same enumeration finds a GPU's MIG mode switched (nvidia-smi -mig 0|1
// and the GPU reset it needs). In MIG mode NVML answers some of the whole
// GPU's queries "not supported" (its utilization) that it answers without,
// so the GPU's remembered answers are then forgotten and every query asked
// again (logged as "nvml mig mode changed").
package nvml

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/heliostat-dev/heliostat/internal/logthrottle"
	"github.com/heliostat-dev/heliostat/schemas"
)

// ErrNoDriver means NVML could not be loaded: libnvidia-ml.so.1 is missing or
// the kernel driver is not loaded. Open and New return it wrapped.
var ErrNoDriver = errors.New("nvml: no NVIDIA driver (libnvidia-ml.so.1 not found or driver not loaded)")

// ErrDeviceLost means a GPU stopped answering: it fell off the bus or needs a
// reset (ERROR_GPU_IS_LOST, ERROR_RESET_REQUIRED). Lost and GPUProcesses
// return it wrapped with the GPU named; Collect returns it only when every
// GPU is lost.
var ErrDeviceLost = errors.New("nvml: gpu inaccessible")

// ErrDriverLost means NVML as a whole stopped answering after New: the driver
// was unloaded or NVML shut down (ERROR_UNINITIALIZED,
// ERROR_DRIVER_NOT_LOADED). Collect and WatchEvents return it wrapped; no GPU
// can be sampled until the process starts again.
var ErrDriverLost = errors.New("nvml: driver unloaded or nvml shut down")

// LostRecheckInterval is how often Collect asks a lost GPU again, measured on
// the clock of the ticks (Collect's now).
const LostRecheckInterval = time.Minute

// Source samples the GPUs of this host through NVML. Collect and WatchEvents
// may run concurrently; Close must come after both have returned.
type Source struct {
	lib    gonvml.Interface
	logger *slog.Logger
	now    func() time.Time
	// stallTimeout is StallTimeout; tests may shorten it.
	stallTimeout time.Duration

	// devices are the whole GPUs, each followed by its MIG instances. The
	// whole GPUs do not change after New; a MIG reconfiguration replaces the
	// slice (never its elements in place) with another holding the same
	// whole GPUs and their new instances. It is replaced by a holder of mu
	// and lostMu both, so holding either is enough to read it.
	devices []*device
	// unusable are the GPUs New left out; fixed after New.
	unusable []unusableGPU

	// mu serialises Collect, GPUProcesses and Close, which own the
	// per-device query state and the device list, and hand a GPU's devices
	// to the call running on its lane (see lane) while it runs. It also
	// keeps Close's shutdown and the freeing of GPM samples from racing a
	// call. It is held while the calls run, at most StallTimeout per phase.
	mu sync.Mutex
	// lanes is reused by Collect for the GPUs it asks.
	lanes  []*device
	closed bool

	errs [schemas.NumMetrics]atomic.Uint64

	// migScanAt is the tick at which Collect next enumerates every GPU's
	// MIG instances again; zero before the first tick.
	migScanAt time.Time

	// lostMu guards device.lostErr and lostSince, and losses, so that Lost
	// and the metrics need not wait for a tick that may hang in the driver.
	// They are written only by a holder of mu as well.
	lostMu sync.Mutex
	losses uint64 // GPUs found lost since New, the unusable ones included
	// migChanges counts the MIG layouts found changed since New, per GPU.
	migChanges uint64
	// stalls counts the calls found stalled since New.
	stalls uint64
	// found counts lost GPUs that answered again; WatchEvents registers them
	// anew when it changes.
	found atomic.Uint64
	// logs throttles WatchEvents' lines about failed waits and GPUs it
	// cannot register because they are lost.
	logs logthrottle.Throttle
}

// unusableGPU is a GPU New left out: its index, its UUID where it could be
// read, and why.
type unusableGPU struct {
	index int
	uuid  string
	err   error
}

// device is one whole GPU or one MIG instance.
type device struct {
	gpu schemas.GPU
	h   gonvml.Device
	// parent is the whole GPU of a MIG instance, nil for a whole GPU.
	parent gonvml.Device
	// whole is the device of the whole GPU: d itself, or a MIG instance's
	// parent. Whether a GPU is lost is recorded on its whole device.
	whole *device
	// lane runs the calls of a whole GPU and its instances; nil for a MIG
	// instance.
	*lane

	// lostErr is why a whole GPU is lost, nil while it answers; lostSince
	// is the tick that found it lost. Guarded by Source.lostMu.
	lostErr   error
	lostSince time.Time
	// recheck is the first tick at which Collect asks a lost GPU again.
	recheck time.Time

	skip     uint32 // bit q: query q answered "not supported" and is not asked again
	failing  uint32 // bit q: query q failed last time; logged once until it succeeds
	answered uint32 // bit q: query q succeeded at least once
	// gone (bit q) says that MIG instance d answered query q, which it had
	// answered before, as if it no longer existed (migGone).
	gone uint32
	// migStale says that one of whole GPU d's MIG instances is gone, so that
	// its instances are enumerated again.
	migStale bool
	// migMode is whole GPU d's MIG mode at its last enumeration
	// (gonvml.DEVICE_MIG_DISABLE where it has no MIG), migModeUnknown where
	// NVML could not tell.
	migMode  int
	badValue uint32 // bit m: metric m was out of range last time; logged once
	gpm      *gpmState
}

// gpmState holds the previous GPM sample of a device: GPM metrics are rates
// between two samples.
type gpmState struct {
	prev, cur gonvml.GpmSample
	havePrev  bool
}

// Open loads the host's NVML library and calls New with it. now stamps events
// (nil means time.Now).
func Open(logger *slog.Logger, now func() time.Time) (*Source, error) {
	return New(gonvml.New(), logger, now)
}

// New initialises lib, enumerates its GPUs and MIG instances and reads their
// identity. now stamps received events (nil means time.Now); logger nil
// discards logs. When the driver is missing the error wraps ErrNoDriver; a
// driver without GPUs gives a Source whose GPUs() is empty. On success the
// caller must Close the Source.
func New(lib gonvml.Interface, logger *slog.Logger, now func() time.Time) (*Source, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	switch ret := lib.Init(); ret {
	case gonvml.SUCCESS:
	case gonvml.ERROR_LIBRARY_NOT_FOUND, gonvml.ERROR_DRIVER_NOT_LOADED:
		return nil, fmt.Errorf("%w: %w", ErrNoDriver, ret)
	default:
		return nil, fmt.Errorf("nvml: init: %w", ret)
	}
	s := &Source{lib: lib, logger: logger, now: now, stallTimeout: StallTimeout,
		logs: logthrottle.Throttle{Every: eventLogInterval}}
	if err := s.discover(); err != nil {
		s.freeGPM()
		lib.Shutdown()
		return nil, err
	}
	return s, nil
}

// Name returns "nvml".
func (s *Source) Name() string { return "nvml" }

// GPUs returns the identity of every GPU and MIG instance, in Collect order.
// MIG instances are those known at the last tick (see MIGRescanInterval).
func (s *Source) GPUs() []schemas.GPU {
	devices := s.deviceList()
	gpus := make([]schemas.GPU, len(devices))
	for i, d := range devices {
		gpus[i] = d.gpu
	}
	return gpus
}

// deviceList returns the devices for a reader that does not hold mu.
func (s *Source) deviceList() []*device {
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	return s.devices
}

// MetricErrors returns how many times, over all devices since New, reading
// metric m failed for a reason other than "not supported" or gave a value out
// of m's range. Such a metric is absent from that tick's sample.
func (s *Source) MetricErrors(m schemas.Metric) uint64 {
	if m >= schemas.NumMetrics {
		return 0
	}
	return s.errs[m].Load()
}

// Lost returns nil while every GPU New found answers, and otherwise an error
// naming each one that does not: a GPU lost while sampling (asked again every
// LostRecheckInterval), one whose call stalled (wrapping ErrDeviceStalled;
// asked again once the call returns) or one New left out (not asked again:
// the collector needs a restart once the GPU is back). Each wraps the NVML
// answer, and ErrDeviceLost where the GPU is lost. It does not wait for a
// tick in progress.
func (s *Source) Lost() error {
	var errs []error
	for _, u := range s.unusable {
		errs = append(errs, fmt.Errorf("gpu %d %s left out at start-up, not asked again until the collector restarts: %w", u.index, u.uuid, u.err))
	}
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	for _, d := range s.devices {
		if d.lostErr != nil {
			errs = append(errs, fmt.Errorf("gpu %d %s lost since %s, asked again every %v: %w",
				d.gpu.Index, d.gpu.UUID, d.lostSince.UTC().Format(time.RFC3339), LostRecheckInterval, d.lostErr))
		}
		if d.parent == nil && !d.stalledSince.IsZero() {
			errs = append(errs, s.stalledErr(d))
		}
	}
	return errors.Join(errs...)
}

// Close frees the GPM samples and shuts NVML down. Calling it again does
// nothing. It does not wait for a stalled call: while one is in the driver,
// Close frees only the other GPUs' samples, leaves NVML initialised (the
// process is about to exit) and returns an error naming the GPUs, wrapping
// ErrDeviceStalled.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.harvest(s.now())
	s.stopLanes()
	s.freeGPM()
	var stuck []error
	s.lostMu.Lock()
	for _, d := range s.devices {
		if d.parent == nil && d.busy {
			stuck = append(stuck, s.stalledErr(d))
		}
	}
	s.lostMu.Unlock()
	if len(stuck) > 0 {
		return fmt.Errorf("nvml: close: nvml not shut down under calls still in flight: %w", errors.Join(stuck...))
	}
	if ret := s.lib.Shutdown(); ret != gonvml.SUCCESS {
		return fmt.Errorf("nvml: shutdown: %w", ret)
	}
	return nil
}

// freeGPM frees the GPM samples of every device but those a stalled call
// may still write to.
func (s *Source) freeGPM() {
	for _, d := range s.devices {
		if !d.whole.busy {
			d.freeGPM()
		}
	}
}

func (d *device) freeGPM() {
	if d.gpm == nil {
		return
	}
	for _, smp := range []gonvml.GpmSample{d.gpm.prev, d.gpm.cur} {
		if smp != nil {
			smp.Free()
		}
	}
	d.gpm = nil
}

// discover enumerates the devices and their MIG instances. A GPU that cannot
// be enumerated is left out (unusable) unless the driver itself is gone; if
// no GPU is left, discover fails.
func (s *Source) discover() error {
	driver, ret := s.lib.SystemGetDriverVersion()
	if ret != gonvml.SUCCESS {
		s.logger.Warn("nvml driver version unknown", "err", ret)
		driver = ""
	}
	n, ret := s.lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		return fmt.Errorf("nvml: count devices: %w", retErr(ret))
	}
	var errs []error
	for i := range n {
		d, migs, err := s.openGPU(i, driver)
		if errors.Is(err, ErrDriverLost) {
			return err
		}
		if err != nil {
			u := unusableGPU{index: i, err: err}
			if d != nil {
				u.uuid = d.gpu.UUID
				d.freeGPM()
			}
			s.unusable = append(s.unusable, u)
			errs = append(errs, err)
			s.logger.Error("nvml gpu cannot be enumerated, sampling the others; restart the collector once it is back",
				"gpu_index", i, "gpu_uuid", u.uuid, "err", err)
			continue
		}
		s.devices = append(s.devices, d)
		s.devices = append(s.devices, migs...)
	}
	if n > 0 && len(s.unusable) == n {
		return fmt.Errorf("nvml: none of the %d gpus can be enumerated: %w", n, errors.Join(errs...))
	}
	s.losses = uint64(len(s.unusable))
	gpus, gpm := 0, 0
	for _, d := range s.devices {
		if d.parent == nil {
			gpus++
		}
		if d.gpm != nil {
			gpm++
		}
	}
	s.logger.Info("nvml devices found", "gpus", gpus, "mig_instances", len(s.devices)-gpus, "with_gpm", gpm,
		"left_out", len(s.unusable), "driver", driver)
	return nil
}

// openGPU enumerates GPU i and its MIG instances. On error it returns the
// whole GPU's device where its identity was read, so that the caller can name
// it and free its GPM samples.
func (s *Source) openGPU(i int, driver string) (*device, []*device, error) {
	h, ret := s.lib.DeviceGetHandleByIndex(i)
	if ret != gonvml.SUCCESS {
		return nil, nil, fmt.Errorf("nvml: get device %d: %w", i, retErr(ret))
	}
	d, err := s.wholeGPU(i, h, driver)
	if err != nil {
		return nil, nil, err
	}
	migs, err := s.migInstances(d)
	if err != nil {
		return d, nil, err
	}
	return d, migs, nil
}

// wholeGPU reads the identity of device i. Only the UUID is required; other
// fields are left empty (minor -1) when NVML cannot tell.
func (s *Source) wholeGPU(i int, h gonvml.Device, driver string) (*device, error) {
	uuid, ret := h.GetUUID()
	if ret != gonvml.SUCCESS {
		return nil, fmt.Errorf("nvml: get uuid of device %d: %w", i, retErr(ret))
	}
	g := schemas.GPU{
		Index:         uint32(i),
		UUID:          uuid,
		Minor:         -1,
		DriverVersion: driver,
		GIID:          -1,
		CIID:          -1,
	}
	if p, ret := h.GetPciInfo(); ret == gonvml.SUCCESS {
		g.PCIBusID = cString(p.BusId[:])
	} else if !absent(ret) {
		s.logger.Warn("nvml pci bus id unknown", "gpu_uuid", uuid, "err", ret)
	}
	if m, ret := h.GetMinorNumber(); ret == gonvml.SUCCESS && m >= 0 && m <= 1<<31-1 {
		g.Minor = int32(m)
	} else if ret != gonvml.SUCCESS && !absent(ret) {
		s.logger.Warn("nvml minor number unknown", "gpu_uuid", uuid, "err", ret)
	}
	if name, ret := h.GetName(); ret == gonvml.SUCCESS {
		g.Model = name
	} else {
		s.logger.Warn("nvml model unknown", "gpu_uuid", uuid, "err", ret)
	}
	d := &device{gpu: g, h: h, lane: &lane{done: make(chan error, 1)}}
	d.whole = d
	d.gpm = s.openGPM(uuid, h)
	if d.gpm == nil {
		d.skip |= gpmQueries
	}
	return d, nil
}

// openGPM returns the GPM state of a whole GPU, nil where it has no GPM.
//
// go-nvml v0.13.0-1 sends GpmQueryDeviceSupport's struct version as
// NVML_STRUCT_VERSION(nvmlGpmSupport_t, 1), where NVML wants the plain 1, and
// the driver answers ERROR_ARGUMENT_VERSION_MISMATCH even for a GPU with GPM
// (go-nvml issue 168): on an H100 with driver 580.159.04, version 0x1000008
// got 25 (the mismatch) and version 1 "supported". That answer, like a yes,
// is settled by taking one GPM sample: a GPU without GPM refuses it.
func (s *Source) openGPM(uuid string, h gonvml.Device) *gpmState {
	sup, ret := h.GpmQueryDeviceSupport()
	switch {
	case ret == gonvml.SUCCESS && sup.IsSupportedDevice == 0:
		s.logger.Debug("nvml gpm not supported", "gpu_uuid", uuid)
		return nil
	case ret == gonvml.SUCCESS, ret == gonvml.ERROR_ARGUMENT_VERSION_MISMATCH:
	case absent(ret):
		s.logger.Debug("nvml gpm not supported", "gpu_uuid", uuid, "err", ret)
		return nil
	default:
		s.logger.Warn("nvml gpm support unknown; sm_active, sm_occupancy, tensor_active and dram_active are not sampled", "gpu_uuid", uuid, "err", ret)
		return nil
	}
	g := s.allocGPM(uuid)
	if g == nil {
		return nil
	}
	switch ret := h.GpmSampleGet(g.prev); {
	case ret == gonvml.SUCCESS:
		return g
	case absent(ret):
		s.logger.Debug("nvml gpm not supported", "gpu_uuid", uuid, "err", ret)
	default:
		s.logger.Warn("nvml gpm sample failed; sm_active, sm_occupancy, tensor_active and dram_active are not sampled", "gpu_uuid", uuid, "err", ret)
	}
	g.prev.Free()
	g.cur.Free()
	return nil
}

// migInstance is one MIG instance as enumeration found it: its handle and
// identity.
type migInstance struct {
	h   gonvml.Device
	gpu schemas.GPU
}

// migInstances returns the MIG instances of gpu, none when MIG is off or not
// supported. On error it frees what it allocated.
func (s *Source) migInstances(gpu *device) ([]*device, error) {
	found, mode, err := s.enumMIG(gpu)
	gpu.migMode = mode
	if err != nil {
		return nil, err
	}
	migs := make([]*device, 0, len(found))
	for _, m := range found {
		migs = append(migs, s.newMIGDevice(gpu, m))
	}
	return migs, nil
}

// migModeUnknown is the MIG mode of a GPU whose mode NVML could not tell.
const migModeUnknown = -1

// enumMIG enumerates the MIG instances of gpu and reads their identity,
// allocating nothing: none when MIG is off or not supported. It returns the
// GPU's current MIG mode too, also with an error: DEVICE_MIG_DISABLE where
// the GPU has no MIG, migModeUnknown where NVML could not tell. NVML numbers
// MIG slots up to GetMaxMigDeviceCount; empty slots answer ERROR_NOT_FOUND.
func (s *Source) enumMIG(gpu *device) ([]migInstance, int, error) {
	uuid := gpu.gpu.UUID
	mode, _, ret := gpu.h.GetMigMode()
	switch {
	case absent(ret):
		return nil, gonvml.DEVICE_MIG_DISABLE, nil
	case ret != gonvml.SUCCESS:
		s.logger.Warn("nvml mig mode unknown", "gpu_uuid", uuid, "err", ret)
		return nil, migModeUnknown, nil
	case mode != gonvml.DEVICE_MIG_ENABLE:
		return nil, mode, nil
	}
	n, ret := gpu.h.GetMaxMigDeviceCount()
	if ret != gonvml.SUCCESS {
		return nil, mode, fmt.Errorf("nvml: gpu %s: count mig devices: %w", uuid, retErr(ret))
	}
	var found []migInstance
	for j := range n {
		h, ret := gpu.h.GetMigDeviceHandleByIndex(j)
		switch ret {
		case gonvml.SUCCESS:
		case gonvml.ERROR_NOT_FOUND, gonvml.ERROR_INVALID_ARGUMENT:
			continue
		default:
			return nil, mode, fmt.Errorf("nvml: gpu %s: get mig device %d: %w", uuid, j, retErr(ret))
		}
		migUUID, ret := h.GetUUID()
		if ret != gonvml.SUCCESS {
			return nil, mode, fmt.Errorf("nvml: gpu %s: get uuid of mig device %d: %w", uuid, j, retErr(ret))
		}
		g := gpu.gpu
		g.MIGUUID = migUUID
		g.GIID, g.CIID = -1, -1
		if id, ret := h.GetGpuInstanceId(); ret == gonvml.SUCCESS {
			g.GIID = int32(id)
		} else {
			s.logger.Warn("nvml gpu instance id unknown", "gpu_uuid", uuid, "mig_uuid", migUUID, "err", ret)
		}
		if id, ret := h.GetComputeInstanceId(); ret == gonvml.SUCCESS {
			g.CIID = int32(id)
		} else {
			s.logger.Warn("nvml compute instance id unknown", "gpu_uuid", uuid, "mig_uuid", migUUID, "err", ret)
		}
		if name, ret := h.GetName(); ret == gonvml.SUCCESS {
			g.MIGProfile = migProfile(name)
		}
		found = append(found, migInstance{h: h, gpu: g})
	}
	return found, mode, nil
}

// newMIGDevice returns the device of MIG instance m of gpu, with its GPM
// samples where the GPU has GPM.
func (s *Source) newMIGDevice(gpu *device, m migInstance) *device {
	d := &device{gpu: m.gpu, h: m.h, parent: gpu.h, whole: gpu, skip: ^uint32(migQueries)}
	if gpu.gpm != nil && m.gpu.GIID >= 0 {
		d.gpm = s.allocGPM(m.gpu.MIGUUID)
	}
	if d.gpm == nil {
		d.skip |= gpmQueries
	}
	return d
}

// allocGPM allocates the two GPM samples of a device, nil if NVML cannot.
func (s *Source) allocGPM(uuid string) *gpmState {
	a, ret := s.lib.GpmSampleAlloc()
	if ret != gonvml.SUCCESS {
		s.logger.Warn("nvml gpm sample alloc failed", "gpu_uuid", uuid, "err", ret)
		return nil
	}
	b, ret := s.lib.GpmSampleAlloc()
	if ret != gonvml.SUCCESS {
		a.Free()
		s.logger.Warn("nvml gpm sample alloc failed", "gpu_uuid", uuid, "err", ret)
		return nil
	}
	return &gpmState{prev: a, cur: b}
}

// cString returns the bytes of a NUL-terminated C char array as a string.
// go-nvml declares such arrays as int8 or uint8 depending on its version.
func cString[T ~int8 | ~uint8](a []T) string {
	b := make([]byte, len(a))
	for i, c := range a {
		b[i] = byte(c)
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// migProfile returns the profile of a MIG device from its NVML name, e.g.
// "1g.10gb" from "NVIDIA H100 80GB HBM3 MIG 1g.10gb". A name without " MIG "
// is returned whole.
func migProfile(name string) string {
	if i := strings.LastIndex(name, "MIG "); i >= 0 {
		return strings.TrimSpace(name[i+len("MIG "):])
	}
	return strings.TrimSpace(name)
}
