package nvml

import (
	"errors"
	"slices"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// MIGRescanInterval is how often Collect enumerates the MIG instances of
// every GPU again, on the clock of the ticks, to find instances created or
// destroyed since (nvidia-smi mig -cgi/-cci/-dci/-dgi, which need no GPU
// reset). A GPU one of whose instances stops being found is enumerated again
// at the next tick instead. The cost is a few NVML calls per GPU, none of
// which reaches the GPU.
const MIGRescanInterval = 30 * time.Second

// errMIGGone means a MIG instance answered a query it had answered before
// with ERROR_NOT_FOUND or ERROR_INVALID_ARGUMENT: its handle is stale, the
// instance destroyed. Collect leaves the instance out of the tick and
// enumerates its GPU's instances again.
var errMIGGone = errors.New("nvml: mig instance no longer found")

// migGone reports whether ret, MIG instance d's answer to query q, says that
// the instance is gone: NVML answers a destroyed instance's handle with "not
// found" or "invalid argument", which for a query the instance never
// answered means only that it does not support it.
func migGone(d *device, q query, ret gonvml.Return) bool {
	return d.parent != nil && d.answered&(1<<q) != 0 &&
		(ret == gonvml.ERROR_NOT_FOUND || ret == gonvml.ERROR_INVALID_ARGUMENT)
}

// markGone records that MIG instance d answered query q as gone.
func (d *device) markGone(q query) {
	d.gone |= 1 << q
	d.whole.migStale = true
}

// refreshMIG enumerates again the MIG instances of every GPU one of whose
// instances was found gone and, when periodic and MIGRescanInterval has
// passed on now's clock since the last time, of every GPU; it rebuilds the
// device list of each GPU whose instances changed. Lost GPUs wait until they
// answer, and stalled ones until their call returns. The GPUs are enumerated
// on their lanes, at most StallTimeout; now is the tick (the time GPUs are
// found stalled at). The caller holds s.mu.
func (s *Source) refreshMIG(now time.Time, periodic bool) {
	all := false
	if periodic {
		switch {
		case s.migScanAt.IsZero(): // New has just enumerated them
			s.migScanAt = now.Add(MIGRescanInterval)
		case !now.Before(s.migScanAt):
			all = true
			s.migScanAt = now.Add(MIGRescanInterval)
		}
	}
	var scan []*device
	for _, g := range s.devices {
		if g.parent != nil || g.busy || g.lostErr != nil || !all && !g.migStale {
			continue
		}
		scan = append(scan, g)
	}
	s.runLanes(now, scan, func(g *device) error {
		found, mode, err := s.enumMIG(g)
		g.scan = migScan{found: found, mode: mode, err: err}
		return nil
	})
	for _, g := range scan {
		if !g.busy {
			s.rescanMIG(g)
		}
	}
}

// rescanMIG takes the MIG instances of whole GPU g enumerated again (g.scan)
// and, when they are not those it has, replaces them in s.devices: an
// instance still there keeps its device (its skipped queries, its GPM
// samples), a new one gets a new device, a destroyed one is dropped. When g's MIG mode changed, g's
// queries are asked again (migModeChanged). The caller holds s.mu.
func (s *Source) rescanMIG(g *device) {
	found, mode, err := g.scan.found, g.scan.mode, g.scan.err
	g.scan = migScan{}
	if mode != migModeUnknown && mode != g.migMode {
		s.migModeChanged(g, mode)
	}
	if err != nil {
		// A GPU lost or a driver gone shows at Collect's next query; for
		// any other failure the instances known are kept, and asked again
		// at the next rescan.
		if n, ok := s.logs.Note("mig "+g.gpu.UUID, s.now(), 1); ok {
			s.logger.Warn("nvml mig instances cannot be enumerated again, keeping those known",
				"gpu_index", g.gpu.Index, "gpu_uuid", g.gpu.UUID, "err", err, "failures", n)
		}
		return
	}
	g.migStale = false
	i := slices.Index(s.devices, g)
	j := i + 1
	for j < len(s.devices) && s.devices[j].whole == g {
		j++
	}
	old := s.devices[i+1 : j]
	if sameMIG(old, found) {
		for k, d := range old {
			d.h = found[k].h
			if d.gone != 0 {
				// Still there, yet it refused a query it answered
				// before: from now on that answer means "not
				// supported", as it would have on the first ask.
				s.logger.Warn("nvml mig instance refused a query it answered before but is still there",
					"gpu_uuid", g.gpu.UUID, "mig_uuid", d.gpu.MIGUUID, "gone_queries", d.gone)
				d.answered &^= d.gone
				d.gone = 0
			}
		}
		return
	}
	kept := make(map[*device]bool, len(old))
	migs := make([]*device, 0, len(found))
	var added, removed []string
	for _, m := range found {
		k := slices.IndexFunc(old, func(d *device) bool { return d.gpu == m.gpu && d.gone == 0 })
		if k >= 0 && !kept[old[k]] {
			d := old[k]
			d.h = m.h
			kept[d] = true
			migs = append(migs, d)
			continue
		}
		migs = append(migs, s.newMIGDevice(g, m))
		added = append(added, m.gpu.MIGUUID)
	}
	for _, d := range old {
		if !kept[d] {
			d.freeGPM()
			removed = append(removed, d.gpu.MIGUUID)
		}
	}
	devices := make([]*device, 0, len(s.devices)-len(old)+len(migs))
	devices = append(devices, s.devices[:i+1]...)
	devices = append(devices, migs...)
	devices = append(devices, s.devices[j:]...)
	s.lostMu.Lock()
	s.devices = devices
	s.migChanges++
	s.lostMu.Unlock()
	s.logger.Info("nvml mig layout changed", "gpu_index", g.gpu.Index, "gpu_uuid", g.gpu.UUID,
		"mig_instances", len(migs), "added", added, "removed", removed)
}

// migModeChanged records that whole GPU g is now in MIG mode mode. What g
// answers depends on it: in MIG mode NVML answers its utilization "not
// supported" and its processes, to an unprivileged caller, "no permission".
// So g forgets which queries it refused or failed and is asked them all
// again, as a GPU New has just found, GPM's only where it has GPM. The
// caller holds s.mu.
func (s *Source) migModeChanged(g *device, mode int) {
	s.logger.Info("nvml mig mode changed, asking the gpu every query again", "gpu_index", g.gpu.Index,
		"gpu_uuid", g.gpu.UUID, "mig_enabled", mode == gonvml.DEVICE_MIG_ENABLE)
	g.migMode = mode
	g.skip, g.failing, g.answered = 0, 0, 0
	if g.gpm == nil {
		g.skip = gpmQueries
	} else {
		// GPM rates over an interval across the change (and the GPU
		// reset it takes) would mean nothing.
		g.gpm.havePrev = false
	}
}

// sameMIG reports whether devices have the identities found, in order.
func sameMIG(devices []*device, found []migInstance) bool {
	return slices.EqualFunc(devices, found, func(d *device, m migInstance) bool { return d.gpu == m.gpu })
}
