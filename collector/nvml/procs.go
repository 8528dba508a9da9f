package nvml

import (
	"errors"
	"fmt"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/heliostat-dev/heliostat/collector"
)

// GPUProcesses lists the compute processes of every GPU, in the order of
// GPUs(). A GPU with MIG instances is listed per instance and not as a whole:
// in MIG mode the whole GPU's list is an aggregate of its instances' (and
// needs privileges), so listing both would name each process twice. A device
// that does not support the query ("not supported", "no permission") is
// listed with no processes. A MIG instance found destroyed (see "MIG
// reconfiguration" in the package comment) is left out, without an error,
// and the instances of its GPU are enumerated again at the next call.
//
// A device that fails (lost, or any other error) is left out, and the error,
// naming it, is joined into the returned one; the other devices are still
// listed. A GPU whose calls stalled (see "Stalled calls" in the package
// comment) is left out the same way, its error wrapping ErrDeviceStalled,
// and is not asked until its call returns. When no device could be listed, or NVML as a whole stopped
// answering (an error wrapping ErrDriverLost), the list is nil: the whole
// listing failed, and a caller must not read it as GPUs without processes.
// A closed Source returns no list and an error.
func (s *Source) GPUProcesses() ([]collector.GPUProcesses, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("nvml: list processes: source is closed")
	}
	now := s.now()
	s.harvest(now)
	s.refreshMIG(now, false)
	var lanes []*device
	for _, g := range s.devices {
		if g.parent == nil && !g.busy {
			lanes = append(lanes, g)
		}
	}
	s.runLanes(now, lanes, func(g *device) error {
		s.listLane(g)
		return nil
	})
	out := make([]collector.GPUProcesses, 0, len(s.devices))
	var (
		errs   []error
		driver bool // an error wraps ErrDriverLost
	)
	for _, g := range s.devices {
		if g.parent != nil {
			continue
		}
		if g.busy {
			s.lostMu.Lock()
			err := s.stalledErr(g)
			s.lostMu.Unlock()
			errs = append(errs, fmt.Errorf("nvml: list processes: %w", err))
			continue
		}
		out = append(out, g.procs...)
		errs = append(errs, g.procErrs...)
		driver = driver || g.driver
	}
	if len(errs) > 0 && (len(out) == 0 || driver) {
		return nil, errors.Join(errs...)
	}
	return out, errors.Join(errs...)
}

// listLane lists the processes of the devices of g's lane into g.procs, and
// the errors of those that failed into g.procErrs. It runs on the lane's
// goroutine.
func (s *Source) listLane(g *device) {
	g.procs, g.procErrs, g.driver = g.procs[:0], g.procErrs[:0], false
	for i, d := range g.devs {
		if i == 0 && len(g.devs) > 1 {
			continue // a MIG-enabled GPU: its instances follow
		}
		procs, ret := d.h.GetComputeRunningProcesses()
		switch {
		case ret == gonvml.SUCCESS:
			d.answered |= 1 << qProcesses
		case migGone(d, qProcesses, ret):
			// Destroyed, and its processes with it: left out, and its
			// GPU's instances enumerated again at the next listing.
			d.markGone(qProcesses)
			continue
		case absent(ret) || d.parent != nil && ret == gonvml.ERROR_INVALID_ARGUMENT:
			procs = nil
		default:
			err := retErr(ret)
			g.driver = g.driver || errors.Is(err, ErrDriverLost)
			g.procErrs = append(g.procErrs, fmt.Errorf("nvml: gpu %s: list processes: %w", d.name(), err))
			continue
		}
		g.procs = append(g.procs, collector.GPUProcesses{
			Index:   int(d.gpu.Index),
			UUID:    d.gpu.UUID,
			MIGUUID: d.gpu.MIGUUID,
			PIDs:    uniquePIDs(procs),
		})
	}
}

// uniquePIDs returns the PIDs of procs, each once, in order. NVML can list a
// process twice (once per context it holds on the device).
func uniquePIDs(procs []gonvml.ProcessInfo) []uint32 {
	if len(procs) == 0 {
		return nil
	}
	pids := make([]uint32, 0, len(procs))
outer:
	for _, p := range procs {
		for _, q := range pids {
			if q == p.Pid {
				continue outer
			}
		}
		pids = append(pids, p.Pid)
	}
	return pids
}

// countPIDs returns how many PIDs uniquePIDs(procs) would list, without
// allocating: Collect counts every tick.
func countPIDs(procs []gonvml.ProcessInfo) int {
	n := 0
outer:
	for i, p := range procs {
		for _, q := range procs[:i] {
			if q.Pid == p.Pid {
				continue outer
			}
		}
		n++
	}
	return n
}
