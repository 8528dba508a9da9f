package nvml

import (
	"errors"
	"fmt"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/schemas"
)

// StallTimeout is how long Collect, GPUProcesses and the MIG enumeration wait
// for the NVML calls of one GPU before they go on without it. Healthy calls
// take milliseconds; a GPU that fell off the bus can keep a call in the driver
// for minutes.
const StallTimeout = 2 * time.Second

// ErrDeviceStalled means an NVML call on a GPU has not returned within
// StallTimeout. Lost, GPUProcesses and Close return it wrapped with the GPU
// named; the GPU is not asked again until that call returns.
var ErrDeviceStalled = errors.New("nvml: gpu call stalled")

// lane is the part of a whole GPU's device that lets its NVML calls, and
// those of its MIG instances, run on a goroutine of their own: a call that
// hangs in the driver then costs only that GPU. What a call writes in it is
// read by the holder of Source.mu once the call has returned.
//
// The goroutine (work) is started by the first call and lives until Close
// (or, when a call is stalled then, until that call returns). A goroutine
// started per call instead made BenchmarkCollect about 1.5 times slower,
// most of it spent growing each new goroutine's stack.
type lane struct {
	// jobs carries the calls to the lane's goroutine, nil until it runs;
	// closed by Close. Guarded by Source.mu.
	jobs chan func(*device) error
	// busy says that a call on this GPU has not returned; until it has,
	// the GPU's devices belong to it and no other call on the GPU starts.
	// Guarded by Source.mu.
	busy bool
	// done receives the outcome of the call; buffered, so that a call
	// nobody waits for any more can end.
	done chan error
	// result is the outcome of the last call that returned in time.
	result error
	// stalledSince is when a call on this GPU was found to outlive
	// StallTimeout, zero while none did. Guarded by Source.lostMu.
	stalledSince time.Time
	// devs are the GPU's devices for the call: the whole GPU, then its MIG
	// instances; a slice of Source.devices, which is never changed in place.
	devs []*device

	// Collect's reads: the samples of devs that answered, in order, and
	// their identities; fields and gpmReq are reused requests (go-nvml
	// v0.13.0-1 makes gpmReq about 340 KiB, allocated only for a GPU with
	// GPM).
	out    []schemas.Sample
	outGPU []schemas.GPU
	fields [2]gonvml.FieldValue
	gpmReq *gonvml.GpmMetricsGetType

	// The MIG enumeration (see refreshMIG).
	scan migScan

	// GPUProcesses' listing: the lists of devs, the errors of the devices
	// that failed and whether one of them wraps ErrDriverLost.
	procs    []collector.GPUProcesses
	procErrs []error
	driver   bool
}

// migScan is what enumMIG found.
type migScan struct {
	found []migInstance
	mode  int
	err   error
}

// laneOf returns the devices of whole GPU g in s.devices: g, then its MIG
// instances. The caller holds s.mu.
func (s *Source) laneOf(g *device) []*device {
	for i, d := range s.devices {
		if d != g {
			continue
		}
		j := i + 1
		for j < len(s.devices) && s.devices[j].whole == g {
			j++
		}
		return s.devices[i:j:j]
	}
	return nil
}

// runLanes runs job for every whole GPU of gpus (none of them busy), each on
// a goroutine of its own, and waits until every job has returned or
// StallTimeout has passed. A GPU whose job returned has its outcome in
// g.result; one whose job has not is left busy and marked stalled at now. The
// caller holds s.mu.
//
// It does not stop waiting when a context is done: a job checks its context
// and returns soon, and a GPU is left busy only when its job is stalled.
func (s *Source) runLanes(now time.Time, gpus []*device, job func(g *device) error) {
	if len(gpus) == 0 {
		return
	}
	for _, g := range gpus {
		g.busy = true
		g.devs = s.laneOf(g)
		if g.jobs == nil {
			// Buffered: a lane has at most one call outstanding.
			g.jobs = make(chan func(*device) error, 1)
			go g.work(g, g.jobs)
		}
		g.jobs <- job
	}
	timer := time.NewTimer(s.stallTimeout)
	defer timer.Stop()
	expired := false
	for _, g := range gpus {
		if !expired {
			select {
			case g.result = <-g.done:
				g.busy = false
				continue
			case <-timer.C:
				expired = true
			}
		}
		select {
		case g.result = <-g.done:
			g.busy = false
		default:
			s.markStalled(g, now)
		}
	}
}

// work runs the calls of whole GPU g that jobs carries, until it is closed.
func (l *lane) work(g *device, jobs <-chan func(*device) error) {
	for job := range jobs {
		l.done <- job(g)
	}
}

// stopLanes ends the goroutines of the lanes once their calls, if any, have
// returned. The caller holds s.mu and calls no lane again.
func (s *Source) stopLanes() {
	for _, g := range s.devices {
		if g.parent == nil && g.jobs != nil {
			close(g.jobs)
			g.jobs = nil
		}
	}
}

// harvest takes the outcome of the calls found stalled that have returned
// since: their GPUs are asked again from now on. What such a late call read
// is dropped, except that a GPU it found lost is marked lost. The caller
// holds s.mu.
func (s *Source) harvest(now time.Time) {
	for _, g := range s.devices {
		if g.parent != nil || !g.busy {
			continue
		}
		var err error
		select {
		case err = <-g.done:
		default:
			continue
		}
		g.busy = false
		// Whatever kept the call in the driver (a GPU reset) may have
		// changed its MIG instances.
		g.migStale = true
		for _, d := range s.laneOf(g) {
			// GPM rates over an interval the call spent stuck would
			// mean nothing.
			if d.gpm != nil {
				d.gpm.havePrev = false
			}
		}
		s.lostMu.Lock()
		since := g.stalledSince
		g.stalledSince = time.Time{}
		s.lostMu.Unlock()
		s.found.Add(1)
		s.logger.Info("nvml gpu call returned after stalling", "gpu_index", g.gpu.Index, "gpu_uuid", g.gpu.UUID,
			"stalled_for", now.Sub(since), "err", err)
		if errors.Is(err, ErrDeviceLost) {
			s.markLost(g, now, err)
		}
	}
}

// markStalled records that a call on whole GPU g outlived StallTimeout in
// the tick at now.
func (s *Source) markStalled(g *device, now time.Time) {
	s.lostMu.Lock()
	g.stalledSince = now
	s.stalls++
	s.lostMu.Unlock()
	s.logger.Error("nvml gpu call stalled, sampling the others", "gpu_index", g.gpu.Index, "gpu_uuid", g.gpu.UUID,
		"pci_bus_id", g.gpu.PCIBusID, "timeout", s.stallTimeout)
}

// stalledErr returns the error naming stalled GPU g. The caller holds
// s.lostMu.
func (s *Source) stalledErr(g *device) error {
	return fmt.Errorf("gpu %d %s: an nvml call stalled since %s (over %v), not asked again until it returns: %w",
		g.gpu.Index, g.gpu.UUID, g.stalledSince.UTC().Format(time.RFC3339), s.stallTimeout, ErrDeviceStalled)
}
