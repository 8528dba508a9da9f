package nvml

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/heliostat-dev/heliostat/schemas"
)

// query identifies one NVML question asked of a device each tick. Whether a
// device supports it is remembered per query, not per metric, because one
// answer can carry several metrics and one metric can have a fallback query.
type query uint8

const (
	qUtil query = iota
	qMemV2
	qMem
	qPower
	qPowerLimit
	qEnergy
	qGPUTemp
	qMemTempField
	qPCIeReplayField
	qPCIeReplay
	qSMClock
	qMemClock
	qPState
	qEventReasons
	qThrottleReasons
	qECCSBE
	qECCDBE
	qRemapped
	qProcesses
	qGPM
	qGPMSMActive
	qGPMSMOccupancy
	qGPMTensorActive
	qGPMDRAMActive

	numQueries
)

var queryInfo = [numQueries]struct {
	name    string
	metrics []schemas.Metric
}{
	qUtil:            {"utilization", []schemas.Metric{schemas.GPUUtil, schemas.MemUtil}},
	qMemV2:           {"memory info v2", []schemas.Metric{schemas.FBUsed, schemas.FBFree, schemas.FBTotal, schemas.FBReserved}},
	qMem:             {"memory info", []schemas.Metric{schemas.FBUsed, schemas.FBFree, schemas.FBTotal}},
	qPower:           {"power usage", []schemas.Metric{schemas.PowerUsage}},
	qPowerLimit:      {"enforced power limit", []schemas.Metric{schemas.PowerLimit}},
	qEnergy:          {"total energy consumption", []schemas.Metric{schemas.Energy}},
	qGPUTemp:         {"gpu temperature", []schemas.Metric{schemas.GPUTemp}},
	qMemTempField:    {"field memory temperature", []schemas.Metric{schemas.MemTemp}},
	qPCIeReplayField: {"field pcie replay counter", []schemas.Metric{schemas.PCIeReplay}},
	qPCIeReplay:      {"pcie replay counter", []schemas.Metric{schemas.PCIeReplay}},
	qSMClock:         {"sm clock", []schemas.Metric{schemas.SMClock}},
	qMemClock:        {"memory clock", []schemas.Metric{schemas.MemClock}},
	qPState:          {"performance state", []schemas.Metric{schemas.PState}},
	qEventReasons:    {"clocks event reasons", []schemas.Metric{schemas.ClockEventReasons}},
	qThrottleReasons: {"clocks throttle reasons", []schemas.Metric{schemas.ClockEventReasons}},
	qECCSBE:          {"volatile corrected ecc errors", []schemas.Metric{schemas.ECCSBEVolatile}},
	qECCDBE:          {"volatile uncorrected ecc errors", []schemas.Metric{schemas.ECCDBEVolatile}},
	qRemapped:        {"remapped rows", []schemas.Metric{schemas.RemappedCorrectable, schemas.RemappedUncorrectable}},
	qProcesses:       {"compute running processes", []schemas.Metric{schemas.Processes}},
	qGPM:             {"gpm sample", []schemas.Metric{schemas.SMActive, schemas.SMOccupancy, schemas.TensorActive, schemas.DRAMActive}},
	qGPMSMActive:     {"gpm sm active", []schemas.Metric{schemas.SMActive}},
	qGPMSMOccupancy:  {"gpm sm occupancy", []schemas.Metric{schemas.SMOccupancy}},
	qGPMTensorActive: {"gpm tensor active", []schemas.Metric{schemas.TensorActive}},
	qGPMDRAMActive:   {"gpm dram active", []schemas.Metric{schemas.DRAMActive}},
}

func (q query) String() string { return queryInfo[q].name }

const (
	// gpmQueries are skipped on devices without GPM.
	gpmQueries = 1<<qGPM | 1<<qGPMSMActive | 1<<qGPMSMOccupancy | 1<<qGPMTensorActive | 1<<qGPMDRAMActive
	// migQueries are the only ones asked of a MIG instance. Power,
	// temperature, clocks, ECC and the rest belong to the whole GPU and are
	// reported on its row: repeating them on each instance would count a
	// GPU's energy once per instance.
	migQueries = 1<<qUtil | 1<<qMemV2 | 1<<qMem | 1<<qProcesses | gpmQueries
)

// gpmMetricOf maps the GPM queries to NVML's GPM metrics, which are
// percentages; the sample carries them as ratios. The mapping is DCGM's:
// DCGM_FI_PROF_SM_ACTIVE is NVML_GPM_METRIC_SM_UTIL, and so on.
var gpmMetricOf = [...]struct {
	q  query
	id gonvml.GpmMetricId
	m  schemas.Metric
}{
	{qGPMSMActive, gonvml.GPM_METRIC_SM_UTIL, schemas.SMActive},
	{qGPMSMOccupancy, gonvml.GPM_METRIC_SM_OCCUPANCY, schemas.SMOccupancy},
	{qGPMTensorActive, gonvml.GPM_METRIC_ANY_TENSOR_UTIL, schemas.TensorActive},
	{qGPMDRAMActive, gonvml.GPM_METRIC_DRAM_BW_UTIL, schemas.DRAMActive},
}

// absent reports whether ret says that the device or driver cannot answer at
// all, so that the metric is absent rather than failed.
func absent(ret gonvml.Return) bool {
	switch ret {
	case gonvml.ERROR_NOT_SUPPORTED, gonvml.ERROR_NOT_FOUND, gonvml.ERROR_NO_PERMISSION,
		gonvml.ERROR_FUNCTION_NOT_FOUND, gonvml.ERROR_ARGUMENT_VERSION_MISMATCH:
		return true
	}
	return false
}

// lostGPU reports whether ret says that the GPU asked is unusable as a whole
// (fallen off the bus, or in need of a reset) while the driver still answers.
func lostGPU(ret gonvml.Return) bool {
	return ret == gonvml.ERROR_GPU_IS_LOST || ret == gonvml.ERROR_RESET_REQUIRED
}

// driverLost reports whether ret says that NVML as a whole no longer answers.
func driverLost(ret gonvml.Return) bool {
	return ret == gonvml.ERROR_UNINITIALIZED || ret == gonvml.ERROR_DRIVER_NOT_LOADED
}

// retErr returns ret as an error, wrapping ErrDriverLost or ErrDeviceLost
// where ret says so.
func retErr(ret gonvml.Return) error {
	switch {
	case driverLost(ret):
		return fmt.Errorf("%w: %w", ErrDriverLost, ret)
	case lostGPU(ret):
		return fmt.Errorf("%w: %w", ErrDeviceLost, ret)
	}
	return ret
}

// readers are the per-tick queries, in the order they are asked.
var readers = [...]func(*Source, *device, *schemas.Sample) error{
	(*Source).readUtil,
	(*Source).readMemory,
	(*Source).readPower,
	(*Source).readTemp,
	(*Source).readFields,
	(*Source).readClocks,
	(*Source).readReasons,
	(*Source).readECC,
	(*Source).readProcesses,
	(*Source).readGPM,
}

// Collect appends one sample per GPU and MIG instance that answers, stamped
// now, to b. A metric that fails is left out of this tick and counted
// (MetricErrors). A GPU that stops answering as a whole (ERROR_GPU_IS_LOST,
// ERROR_RESET_REQUIRED) is left out with its MIG instances, logged once and
// named by Lost; Collect asks it again once every LostRecheckInterval of now
// and samples it again as soon as it answers. A GPU whose calls have not
// returned within StallTimeout is left out the same way until they have (see
// "Stalled calls" in the package comment). A MIG instance found destroyed
// is left out, and its GPU's instances enumerated again at the next tick;
// every MIGRescanInterval of now all GPUs' are. The GPUs are read
// concurrently. The tick fails, with b as it was, only when NVML as a whole
// stops answering (an error wrapping ErrDriverLost), when no GPU answers
// (ErrDeviceLost), or when ctx is done.
func (s *Source) Collect(ctx context.Context, now time.Time, b *schemas.SampleBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	nGPUs, nSamples := len(b.GPUs), len(b.Samples)
	fail := func(err error) error {
		b.GPUs, b.Samples = b.GPUs[:nGPUs], b.Samples[:nSamples]
		return err
	}
	if s.closed {
		return fail(fmt.Errorf("nvml: collect: source is closed"))
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("nvml: collect: %w", err))
	}
	s.harvest(now)
	s.refreshMIG(now, true)
	ts := now.UnixMilli()
	lanes := s.lanes[:0]
	for _, g := range s.devices {
		// A lost GPU's MIG instances wait for the GPU itself to answer,
		// which comes first in its lane.
		if g.parent != nil || g.busy || g.lostErr != nil && now.Before(g.recheck) {
			continue
		}
		lanes = append(lanes, g)
	}
	s.lanes = lanes
	s.runLanes(now, lanes, func(g *device) error { return s.readLane(ctx, g, ts) })
	answered := 0
	for _, g := range lanes {
		if g.busy {
			continue // stalled
		}
		err := g.result
		if err != nil && !errors.Is(err, ErrDeviceLost) {
			return fail(err)
		}
		if len(g.out) > 0 && g.lostErr != nil {
			s.markFound(g, now)
		}
		for k := range g.out {
			smp := g.out[k]
			smp.GPU = b.AddGPU(g.outGPU[k])
			b.Samples = append(b.Samples, smp)
		}
		answered += len(g.out)
		if err != nil {
			// Its samples read before (the whole GPU's, when one of
			// its MIG instances answered that it is lost) are kept.
			s.markLost(g, now, err)
		}
	}
	if answered == 0 && len(s.devices) > 0 {
		return fail(fmt.Errorf("nvml: collect: no gpu answers: %w", ErrDeviceLost))
	}
	return nil
}

// readLane reads the devices of g's lane into g.out, stamped ts, stopping
// at the first device that fails for another reason than being a destroyed
// MIG instance. It runs on the lane's goroutine.
func (s *Source) readLane(ctx context.Context, g *device, ts int64) error {
	g.out, g.outGPU = g.out[:0], g.outGPU[:0]
	for _, d := range g.devs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("nvml: collect: %w", err)
		}
		g.out = append(g.out, schemas.Sample{TSMillis: ts})
		if err := s.read(d, &g.out[len(g.out)-1]); err != nil {
			g.out = g.out[:len(g.out)-1]
			if errors.Is(err, errMIGGone) {
				// Destroyed: its GPU's instances are enumerated
				// again at the next tick.
				continue
			}
			return err
		}
		g.outGPU = append(g.outGPU, d.gpu)
	}
	return nil
}

// read asks every reader of d, stopping at the first error.
func (s *Source) read(d *device, smp *schemas.Sample) error {
	for _, read := range readers {
		if err := read(s, d, smp); err != nil {
			return err
		}
	}
	return nil
}

// markLost records that GPU g answered a query of its own or of one of its
// MIG instances with err, wrapping ErrDeviceLost, at tick now. The first such
// answer is logged and counted; later ones only move the next recheck.
func (s *Source) markLost(g *device, now time.Time, err error) {
	g.recheck = now.Add(LostRecheckInterval)
	// GPM rates over an interval the GPU spent lost would mean nothing.
	for _, d := range s.devices {
		if d.whole == g && d.gpm != nil {
			d.gpm.havePrev = false
		}
	}
	if g.lostErr != nil {
		return
	}
	s.lostMu.Lock()
	g.lostErr, g.lostSince = err, now
	s.losses++
	s.lostMu.Unlock()
	s.logger.Error("nvml gpu lost, sampling the others", "gpu_index", g.gpu.Index, "gpu_uuid", g.gpu.UUID,
		"pci_bus_id", g.gpu.PCIBusID, "err", err, "recheck_interval", LostRecheckInterval)
}

// markFound records that lost GPU g answered again at tick now. Its MIG
// instances are enumerated again at the next tick: the reset that brought it
// back may have changed them, or its MIG mode.
func (s *Source) markFound(g *device, now time.Time) {
	g.migStale = true
	s.lostMu.Lock()
	since := g.lostSince
	g.lostErr, g.lostSince = nil, time.Time{}
	s.lostMu.Unlock()
	s.found.Add(1)
	s.logger.Info("nvml gpu answers again", "gpu_index", g.gpu.Index, "gpu_uuid", g.gpu.UUID,
		"lost_for", now.Sub(since))
}

func (d *device) wants(q query) bool { return d.skip&(1<<q) == 0 }

// check classifies the answer ret to query q. It reports whether the answer
// carries values; it returns an error only when the GPU is lost (wrapping
// ErrDeviceLost), NVML no longer answers (ErrDriverLost) or a MIG instance
// was destroyed (errMIGGone).
func (s *Source) check(d *device, q query, ret gonvml.Return) (bool, error) {
	switch {
	case ret == gonvml.SUCCESS:
		d.failing &^= 1 << q
		d.answered |= 1 << q
		return true, nil
	case migGone(d, q, ret):
		d.markGone(q)
		return false, fmt.Errorf("nvml: mig instance %s: %s: %w: %w", d.name(), q, errMIGGone, ret)
	// MIG instance handles refuse whole-GPU queries with INVALID_ARGUMENT on
	// some drivers.
	case absent(ret) || d.parent != nil && ret == gonvml.ERROR_INVALID_ARGUMENT:
		d.skip |= 1 << q
		s.logger.Debug("nvml query not supported", "gpu_uuid", d.gpu.UUID, "mig_uuid", d.gpu.MIGUUID,
			"query", q.String(), "err", ret)
		return false, nil
	case lostGPU(ret), driverLost(ret):
		return false, fmt.Errorf("nvml: gpu %s: %s: %w", d.name(), q, retErr(ret))
	}
	for _, m := range queryInfo[q].metrics {
		s.errs[m].Add(1)
	}
	if d.failing&(1<<q) == 0 {
		d.failing |= 1 << q
		s.logger.Warn("nvml query failed", "gpu_uuid", d.gpu.UUID, "mig_uuid", d.gpu.MIGUUID,
			"query", q.String(), "err", ret)
	}
	return false, nil
}

// name returns the UUID that identifies d in errors.
func (d *device) name() string {
	if d.gpu.MIGUUID != "" {
		return d.gpu.MIGUUID
	}
	return d.gpu.UUID
}

// set records integer metric m unless v exceeds its range, in which case m is
// absent and the bad value counted.
func (s *Source) set(d *device, smp *schemas.Sample, m schemas.Metric, v uint64) {
	if v <= m.Info().Max {
		d.badValue &^= 1 << m
		smp.Set(m, v)
		return
	}
	s.invalid(d, m, float64(v))
}

// setInt is set for NVML's signed answers.
func (s *Source) setInt(d *device, smp *schemas.Sample, m schemas.Metric, v int64) {
	if v < 0 {
		s.invalid(d, m, float64(v))
		return
	}
	s.set(d, smp, m, uint64(v))
}

// setRatio records ratio metric m from an NVML percentage.
func (s *Source) setRatio(d *device, smp *schemas.Sample, m schemas.Metric, pct float64) {
	r := pct / 100
	// GPM rates are computed in floating point and can overshoot 100% by
	// rounding; only that noise is forgiven.
	if r > 1 && r <= 1+schemas.RatioSlack {
		r = 1
	}
	if math.IsNaN(r) || r < 0 || r > 1 {
		s.invalid(d, m, pct)
		return
	}
	d.badValue &^= 1 << m
	smp.SetFloat(m, r)
}

func (s *Source) invalid(d *device, m schemas.Metric, v float64) {
	s.errs[m].Add(1)
	if d.badValue&(1<<m) == 0 {
		d.badValue |= 1 << m
		s.logger.Warn("nvml value out of range", "gpu_uuid", d.gpu.UUID, "mig_uuid", d.gpu.MIGUUID,
			"metric", m.String(), "value", v, "max", m.Info().Max)
	}
}

// scalar asks query q for metric m through get.
func scalar[T ~int | ~int32 | ~uint32 | ~uint64](s *Source, d *device, smp *schemas.Sample, q query, m schemas.Metric, get func() (T, gonvml.Return)) error {
	if !d.wants(q) {
		return nil
	}
	v, ret := get()
	ok, err := s.check(d, q, ret)
	if ok {
		if v < 0 {
			s.invalid(d, m, float64(v))
		} else {
			s.set(d, smp, m, uint64(v))
		}
	}
	return err
}

func (s *Source) readUtil(d *device, smp *schemas.Sample) error {
	if !d.wants(qUtil) {
		return nil
	}
	u, ret := d.h.GetUtilizationRates()
	ok, err := s.check(d, qUtil, ret)
	if ok {
		s.set(d, smp, schemas.GPUUtil, uint64(u.Gpu))
		s.set(d, smp, schemas.MemUtil, uint64(u.Memory))
	}
	return err
}

// readMemory prefers GetMemoryInfo_v2, which reports the driver-reserved
// memory separately (and leaves it out of used), and falls back to
// GetMemoryInfo only where v2 is not supported.
func (s *Source) readMemory(d *device, smp *schemas.Sample) error {
	if d.wants(qMemV2) {
		m, ret := d.h.GetMemoryInfo_v2()
		ok, err := s.check(d, qMemV2, ret)
		if ok {
			s.set(d, smp, schemas.FBUsed, m.Used)
			s.set(d, smp, schemas.FBFree, m.Free)
			s.set(d, smp, schemas.FBTotal, m.Total)
			s.set(d, smp, schemas.FBReserved, m.Reserved)
		}
		if err != nil || d.wants(qMemV2) {
			return err
		}
	}
	if !d.wants(qMem) {
		return nil
	}
	m, ret := d.h.GetMemoryInfo()
	ok, err := s.check(d, qMem, ret)
	if ok {
		s.set(d, smp, schemas.FBUsed, m.Used)
		s.set(d, smp, schemas.FBFree, m.Free)
		s.set(d, smp, schemas.FBTotal, m.Total)
	}
	return err
}

func (s *Source) readPower(d *device, smp *schemas.Sample) error {
	if err := scalar(s, d, smp, qPower, schemas.PowerUsage, d.h.GetPowerUsage); err != nil {
		return err
	}
	if err := scalar(s, d, smp, qPowerLimit, schemas.PowerLimit, d.h.GetEnforcedPowerLimit); err != nil {
		return err
	}
	return scalar(s, d, smp, qEnergy, schemas.Energy, d.h.GetTotalEnergyConsumption)
}

func (s *Source) readTemp(d *device, smp *schemas.Sample) error {
	return scalar(s, d, smp, qGPUTemp, schemas.GPUTemp, func() (uint32, gonvml.Return) {
		return d.h.GetTemperature(gonvml.TEMPERATURE_GPU)
	})
}

// readFields asks for the memory temperature and the PCIe replay counter in
// one GetFieldValues call; where the replay field is not supported it falls
// back to GetPcieReplayCounter. It runs on d's lane: the request is its.
func (s *Source) readFields(d *device, smp *schemas.Sample) error {
	var (
		req = &d.whole.fields
		qs  [2]query
		n   int
	)
	for _, f := range [...]struct {
		q  query
		id uint32
	}{{qMemTempField, gonvml.FI_DEV_MEMORY_TEMP}, {qPCIeReplayField, gonvml.FI_DEV_PCIE_REPLAY_COUNTER}} {
		if d.wants(f.q) {
			req[n], qs[n] = gonvml.FieldValue{FieldId: f.id}, f.q
			n++
		}
	}
	if n > 0 {
		if ret := d.h.GetFieldValues(req[:n]); ret != gonvml.SUCCESS {
			for _, q := range qs[:n] {
				if _, err := s.check(d, q, ret); err != nil {
					return err
				}
			}
		} else {
			for i, f := range req[:n] {
				ok, err := s.check(d, qs[i], gonvml.Return(f.NvmlReturn))
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				m := schemas.MemTemp
				if qs[i] == qPCIeReplayField {
					m = schemas.PCIeReplay
				}
				s.setField(d, smp, m, f)
			}
		}
	}
	if d.wants(qPCIeReplayField) {
		return nil
	}
	return scalar(s, d, smp, qPCIeReplay, schemas.PCIeReplay, d.h.GetPcieReplayCounter)
}

// setField records metric m from a field value of any of NVML's value types.
func (s *Source) setField(d *device, smp *schemas.Sample, m schemas.Metric, f gonvml.FieldValue) {
	v := f.Value[:]
	switch gonvml.ValueType(f.ValueType) {
	case gonvml.VALUE_TYPE_UNSIGNED_INT:
		s.set(d, smp, m, uint64(binary.NativeEndian.Uint32(v)))
	case gonvml.VALUE_TYPE_UNSIGNED_LONG, gonvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		s.set(d, smp, m, binary.NativeEndian.Uint64(v))
	case gonvml.VALUE_TYPE_SIGNED_LONG_LONG:
		s.setInt(d, smp, m, int64(binary.NativeEndian.Uint64(v)))
	case gonvml.VALUE_TYPE_SIGNED_INT:
		s.setInt(d, smp, m, int64(int32(binary.NativeEndian.Uint32(v))))
	case gonvml.VALUE_TYPE_UNSIGNED_SHORT:
		s.set(d, smp, m, uint64(binary.NativeEndian.Uint16(v)))
	case gonvml.VALUE_TYPE_DOUBLE:
		x := math.Float64frombits(binary.NativeEndian.Uint64(v))
		if math.IsNaN(x) || x < 0 || x >= math.MaxUint64 {
			s.invalid(d, m, x)
			return
		}
		s.set(d, smp, m, uint64(math.Round(x)))
	default:
		s.invalid(d, m, math.NaN())
	}
}

func (s *Source) readClocks(d *device, smp *schemas.Sample) error {
	if err := scalar(s, d, smp, qSMClock, schemas.SMClock, func() (uint32, gonvml.Return) {
		return d.h.GetClockInfo(gonvml.CLOCK_SM)
	}); err != nil {
		return err
	}
	if err := scalar(s, d, smp, qMemClock, schemas.MemClock, func() (uint32, gonvml.Return) {
		return d.h.GetClockInfo(gonvml.CLOCK_MEM)
	}); err != nil {
		return err
	}
	if !d.wants(qPState) {
		return nil
	}
	p, ret := d.h.GetPerformanceState()
	ok, err := s.check(d, qPState, ret)
	// PSTATE_UNKNOWN is an answer, not a bad value: absent this tick.
	if ok && p != gonvml.PSTATE_UNKNOWN {
		s.setInt(d, smp, schemas.PState, int64(p))
	}
	return err
}

// readReasons prefers GetCurrentClocksEventReasons and falls back to its
// deprecated name on drivers that lack it.
func (s *Source) readReasons(d *device, smp *schemas.Sample) error {
	if d.wants(qEventReasons) {
		err := scalar(s, d, smp, qEventReasons, schemas.ClockEventReasons, d.h.GetCurrentClocksEventReasons)
		if err != nil || d.wants(qEventReasons) {
			return err
		}
	}
	return scalar(s, d, smp, qThrottleReasons, schemas.ClockEventReasons, d.h.GetCurrentClocksThrottleReasons)
}

func (s *Source) readECC(d *device, smp *schemas.Sample) error {
	if err := scalar(s, d, smp, qECCSBE, schemas.ECCSBEVolatile, func() (uint64, gonvml.Return) {
		return d.h.GetTotalEccErrors(gonvml.MEMORY_ERROR_TYPE_CORRECTED, gonvml.VOLATILE_ECC)
	}); err != nil {
		return err
	}
	if err := scalar(s, d, smp, qECCDBE, schemas.ECCDBEVolatile, func() (uint64, gonvml.Return) {
		return d.h.GetTotalEccErrors(gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.VOLATILE_ECC)
	}); err != nil {
		return err
	}
	if !d.wants(qRemapped) {
		return nil
	}
	corr, unc, _, _, ret := d.h.GetRemappedRows()
	ok, err := s.check(d, qRemapped, ret)
	if ok {
		s.setInt(d, smp, schemas.RemappedCorrectable, int64(corr))
		s.setInt(d, smp, schemas.RemappedUncorrectable, int64(unc))
	}
	return err
}

func (s *Source) readProcesses(d *device, smp *schemas.Sample) error {
	if !d.wants(qProcesses) {
		return nil
	}
	procs, ret := d.h.GetComputeRunningProcesses()
	ok, err := s.check(d, qProcesses, ret)
	if ok {
		// Each process once, as GPUProcesses lists them: NVML lists a
		// process once per context it holds on the device.
		s.set(d, smp, schemas.Processes, uint64(countPIDs(procs)))
	}
	return err
}

// readGPM takes this tick's GPM sample and, from the second tick on, derives
// the GPM metrics over the interval since the previous one.
func (s *Source) readGPM(d *device, smp *schemas.Sample) error {
	g := d.gpm
	if g == nil || !d.wants(qGPM) {
		return nil
	}
	if d.skip&gpmQueries == gpmQueries&^(1<<qGPM) {
		// Every GPM metric is unsupported: stop sampling.
		d.skip |= 1 << qGPM
		return nil
	}
	var ret gonvml.Return
	if d.parent != nil {
		ret = d.parent.GpmMigSampleGet(int(d.gpu.GIID), g.cur)
	} else {
		ret = d.h.GpmSampleGet(g.cur)
	}
	ok, err := s.check(d, qGPM, ret)
	if !ok {
		g.havePrev = false
		return err
	}
	if g.havePrev {
		if err := s.gpmMetrics(d, g, smp); err != nil {
			return err
		}
	}
	g.prev, g.cur = g.cur, g.prev
	g.havePrev = true
	return nil
}

// gpmMetrics derives the GPM metrics of d over the interval between g's two
// samples, asking NVML for one metric per GpmMetricsGet. go-nvml v0.13.0-1
// declares GpmMetric with a wrong metricInfo member (1,624 bytes where NVML's
// nvmlGpmMetric_t has 40), so in a request of several metrics NVML reads and
// writes only the first where Go put it: on an H100 the others came back 0
// with SUCCESS.
func (s *Source) gpmMetrics(d *device, g *gpmState, smp *schemas.Sample) error {
	req := d.whole.gpmReq
	if req == nil {
		req = new(gonvml.GpmMetricsGetType)
		d.whole.gpmReq = req
	}
	for _, gm := range gpmMetricOf {
		if !d.wants(gm.q) {
			continue
		}
		*req = gonvml.GpmMetricsGetType{Version: gonvml.GPM_METRICS_GET_VERSION, NumMetrics: 1, Sample1: g.prev, Sample2: g.cur}
		req.Metrics[0].MetricId = uint32(gm.id)
		ret := s.lib.GpmMetricsGet(req)
		if ret == gonvml.SUCCESS {
			ret = gonvml.Return(req.Metrics[0].NvmlReturn)
		}
		ok, err := s.check(d, gm.q, ret)
		if err != nil {
			return err
		}
		if ok {
			s.setRatio(d, smp, gm.m, req.Metrics[0].Value)
		}
	}
	return nil
}
