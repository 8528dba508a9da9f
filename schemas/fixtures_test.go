package schemas_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

// Fixtures shared by the golden, error, fuzz and benchmark tests. Values are
// plausible for the hardware named, and fixed, so that golden files only change
// when the format does.

// baseTS is 2024-11-21T14:40:00Z in Unix milliseconds.
const baseTS = 1732200000000

var h100BusIDs = [8]string{
	"00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
	"00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0",
}

// h100Batch is one DGX H100 host's batch: 8 GPUs, every metric present, ticks
// one second apart, samples ordered tick by tick.
func h100Batch(ticks int) *schemas.SampleBatch {
	b := &schemas.SampleBatch{Cluster: "eos", Host: "dgx-h100-017"}
	for g := range 8 {
		b.AddGPU(schemas.GPU{
			Index:         uint32(g),
			UUID:          fmt.Sprintf("GPU-4b5d9c1e-%04x-4e2a-9c3d-7f10a2b3c4d%d", 0x1000+g, g),
			PCIBusID:      h100BusIDs[g],
			Minor:         int32(g),
			Model:         "NVIDIA H100 80GB HBM3",
			DriverVersion: "550.90.07",
			GIID:          -1,
			CIID:          -1,
		})
	}
	const total, reserved = 85520809984, 567279616
	for tick := range ticks {
		for g := range 8 {
			var s schemas.Sample
			s.TSMillis = baseTS + int64(tick)*1000
			s.GPU = uint32(g)
			used := uint64(61_000_000_000 + g*1_000_000 + tick*4096)
			s.Set(schemas.GPUUtil, uint64(92+g%8))
			s.Set(schemas.MemUtil, uint64(38+g))
			s.Set(schemas.FBUsed, used)
			s.Set(schemas.FBFree, total-reserved-used)
			s.Set(schemas.FBTotal, total)
			s.Set(schemas.FBReserved, reserved)
			s.Set(schemas.PowerUsage, uint64(612_345+g*1_111+tick*17))
			s.Set(schemas.PowerLimit, 700_000)
			s.Set(schemas.Energy, uint64(123_456_789_000+g*1_000_000+tick*612_345))
			s.Set(schemas.GPUTemp, uint64(58+g))
			s.Set(schemas.MemTemp, uint64(66+g))
			s.Set(schemas.SMClock, 1980)
			s.Set(schemas.MemClock, 2619)
			s.Set(schemas.PState, 0)
			s.Set(schemas.ClockEventReasons, 0x4) // SW power cap
			s.Set(schemas.PCIeReplay, uint64(g/7))
			s.Set(schemas.ECCSBEVolatile, 0)
			s.Set(schemas.ECCDBEVolatile, 0)
			s.Set(schemas.RemappedCorrectable, 0)
			s.Set(schemas.RemappedUncorrectable, 0)
			s.SetFloat(schemas.SMActive, 0.80+float64(g)/100)
			s.SetFloat(schemas.SMOccupancy, 0.41)
			s.SetFloat(schemas.TensorActive, 0.57+float64(tick)/100)
			s.SetFloat(schemas.DRAMActive, 0.33)
			s.Set(schemas.Processes, 1)
			b.Samples = append(b.Samples, s)
		}
	}
	return b
}

// absentBatch mixes devices that lack metrics: a V100 (no GPM, no row
// remapping), a GeForce (no ECC, no memory temperature, no GPM) and a sample
// with nothing present at all (a device that stopped answering).
func absentBatch() *schemas.SampleBatch {
	b := &schemas.SampleBatch{Cluster: "legacy", Host: "ws-42"}
	v100 := b.AddGPU(schemas.GPU{
		Index: 0, UUID: "GPU-0d3c1a6e-2b9f-11e9-8c4a-0242ac120002", PCIBusID: "00000000:3B:00.0",
		Minor: 0, Model: "Tesla V100-SXM2-16GB", DriverVersion: "470.256.02", GIID: -1, CIID: -1,
	})
	rtx := b.AddGPU(schemas.GPU{
		Index: 1, UUID: "GPU-9f2e7b44-1c0d-4a35-b1e6-5d8c7a9b0e11", PCIBusID: "00000000:AF:00.0",
		Minor: -1, Model: "NVIDIA GeForce RTX 4090", DriverVersion: "470.256.02", GIID: -1, CIID: -1,
	})
	for tick := range 2 {
		ts := baseTS + int64(tick)*5000
		s := schemas.Sample{TSMillis: ts, GPU: v100}
		s.Set(schemas.GPUUtil, 0)
		s.Set(schemas.MemUtil, 0)
		s.Set(schemas.FBUsed, 0)
		s.Set(schemas.FBTotal, 17179869184)
		s.Set(schemas.PowerUsage, 41_000)
		s.Set(schemas.GPUTemp, 31)
		s.Set(schemas.MemTemp, 29)
		s.Set(schemas.PState, 0)
		s.Set(schemas.ECCSBEVolatile, 3)
		s.Set(schemas.ECCDBEVolatile, 0)
		b.Samples = append(b.Samples, s)

		s = schemas.Sample{TSMillis: ts + 1, GPU: rtx}
		s.Set(schemas.GPUUtil, 100)
		s.Set(schemas.FBUsed, 20_000_000_000)
		s.Set(schemas.PowerUsage, 449_000)
		s.Set(schemas.PowerLimit, 450_000)
		s.Set(schemas.GPUTemp, 83)
		s.Set(schemas.SMClock, 2520)
		s.Set(schemas.PState, 2)
		s.Set(schemas.ClockEventReasons, 0x20|0x4)
		s.Set(schemas.Processes, 3)
		b.Samples = append(b.Samples, s)
	}
	b.Samples = append(b.Samples, schemas.Sample{TSMillis: baseTS + 10_000, GPU: rtx})
	return b
}

// migBatch is an H100 split into three MIG instances; they share the parent's
// UUID and differ by MIG UUID.
func migBatch() *schemas.SampleBatch {
	b := &schemas.SampleBatch{Cluster: "eos", Host: "dgx-h100-018"}
	parent := schemas.GPU{
		Index: 3, UUID: "GPU-5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9", PCIBusID: "00000000:5D:00.0",
		Minor: 3, Model: "NVIDIA H100 80GB HBM3", DriverVersion: "550.90.07",
	}
	for i, mig := range []struct {
		gi, ci  int32
		profile string
		fb      uint64
	}{
		{gi: 2, ci: 0, profile: "3g.40gb", fb: 40_265_318_400},
		{gi: 3, ci: 0, profile: "2g.20gb", fb: 20_937_965_568},
		{gi: 9, ci: 1, profile: "1g.10gb", fb: 10_468_982_784},
	} {
		g := parent
		g.MIGUUID = fmt.Sprintf("MIG-7c2e1f0a-3b4d-5e6f-8a9b-0c1d2e3f4a5%d", i)
		g.GIID, g.CIID, g.MIGProfile = mig.gi, mig.ci, mig.profile
		idx := b.AddGPU(g)
		s := schemas.Sample{TSMillis: baseTS, GPU: idx}
		s.Set(schemas.FBUsed, mig.fb/3)
		s.Set(schemas.FBFree, mig.fb-mig.fb/3)
		s.Set(schemas.FBTotal, mig.fb)
		s.SetFloat(schemas.SMActive, 0.25*float64(i+1))
		s.SetFloat(schemas.TensorActive, 0.125)
		s.Set(schemas.Processes, uint64(i))
		b.Samples = append(b.Samples, s)
	}
	return b
}

// rangeEndsTSBatch has timestamps at both ends of the DateTime range, so that
// the delta encoding takes its largest steps, up and down.
func rangeEndsTSBatch() *schemas.SampleBatch {
	b := &schemas.SampleBatch{Cluster: "time-travel", Host: "h"}
	b.AddGPU(schemas.GPU{UUID: "GPU-00000000-0000-0000-0000-000000000000", Minor: -1, GIID: -1, CIID: -1})
	for _, ts := range []int64{0, schemas.MaxTimeMillis, 0, 1, schemas.MaxTimeMillis, schemas.MaxTimeMillis - 1, 0} {
		s := schemas.Sample{TSMillis: ts}
		s.Set(schemas.GPUUtil, 1)
		b.Samples = append(b.Samples, s)
	}
	return b
}

// eventsBatch holds one event of each type.
func eventsBatch() *schemas.EventBatch {
	const uuid = "GPU-4b5d9c1e-1002-4e2a-9c3d-7f10a2b3c4d2"
	return &schemas.EventBatch{
		Cluster: "eos",
		Host:    "dgx-h100-017",
		Events: []schemas.GPUEvent{
			{TSMillis: baseTS, GPUUUID: uuid, Type: schemas.EventXID, XID: 79},
			{TSMillis: baseTS + 1, GPUUUID: uuid, Type: schemas.EventECCSingleBit, XID: 1},
			{TSMillis: baseTS + 2, GPUUUID: uuid, Type: schemas.EventECCDoubleBit, XID: 48},
			{TSMillis: baseTS + 3, GPUUUID: uuid, Type: schemas.EventPState, XID: 8},
			{TSMillis: 0, GPUUUID: "", Type: schemas.EventClock, XID: 0x4},
			{TSMillis: schemas.MaxTimeMillis, GPUUUID: uuid, Type: schemas.EventPowerSource, XID: math.MaxUint64},
		},
	}
}

// encodeSamples encodes b or fails the test.
func encodeSamples(t testing.TB, b *schemas.SampleBatch) []byte {
	t.Helper()
	msg, err := schemas.AppendSampleBatch(nil, b)
	if err != nil {
		t.Fatalf("AppendSampleBatch: %v", err)
	}
	return msg
}

// encodeEvents encodes b or fails the test.
func encodeEvents(t testing.TB, b *schemas.EventBatch) []byte {
	t.Helper()
	msg, err := schemas.AppendEventBatch(nil, b)
	if err != nil {
		t.Fatalf("AppendEventBatch: %v", err)
	}
	return msg
}

// normSamples returns a copy of b with empty slices made nil: the decoder
// reuses slices, so "no GPUs" may come back as nil or as an empty slice.
func normSamples(b *schemas.SampleBatch) schemas.SampleBatch {
	c := *b
	if len(c.GPUs) == 0 {
		c.GPUs = nil
	}
	if len(c.Samples) == 0 {
		c.Samples = nil
	}
	return c
}

// normEvents is normSamples for event batches.
func normEvents(b *schemas.EventBatch) schemas.EventBatch {
	c := *b
	if len(c.Events) == 0 {
		c.Events = nil
	}
	return c
}

// wire builds messages by hand so that a test can put a fault at a known byte
// offset. Every method returns a new slice: prefixes can be shared safely.
type wire []byte

func sampleHeader() wire { return wire{'H', 'S', 'G', 1} }
func eventHeader() wire  { return wire{'H', 'S', 'E', 1} }

func (w wire) uv(v uint64) wire   { return binary.AppendUvarint(slices.Clip(w), v) }
func (w wire) sv(v int64) wire    { return binary.AppendVarint(slices.Clip(w), v) }
func (w wire) raw(b ...byte) wire { return append(slices.Clip(w), b...) }
func (w wire) text(s string) wire { return append(slices.Clip(w), s...) }
func (w wire) str(s string) wire  { return append(w.uv(uint64(len(s))), s...) }
func (w wire) f32(v float32) wire {
	return binary.LittleEndian.AppendUint32(slices.Clip(w), math.Float32bits(v))
}

// gpu appends a whole GPU entry with the given index and UUID.
func (w wire) gpu(index uint64, uuid string) wire {
	return w.uv(index).str(uuid).str("00000000:18:00.0").sv(0).str("NVIDIA H100 80GB HBM3").
		str("550.90.07").str("").sv(-1).sv(-1).str("")
}

// actionsBatch is one actuator write as the audit log holds it: a priority
// change planned then applied, a dry-run power-down skipped, a power-up that
// failed, and a priority lowered below zero over an unknown previous one.
func actionsBatch() *schemas.ActionBatch {
	p := func(v int64) *int64 { return &v }
	const basis = `{"predicted_s":5400,"source":"model","qssf_rank":3,"gpu_service_s":86400}`
	return &schemas.ActionBatch{Cluster: "eos", Actions: []schemas.Action{
		{
			ID: "1732200000000000000-a1b2c3", Adapter: "slurm", Kind: "set_priority", Target: "4242_3",
			Partition: "batch", Value: p(9000), Previous: p(100), Reason: "qssf: short predicted job first",
			Basis: basis, ModelVersion: 7, Outcome: "planned", DecidedAtMillis: baseTS,
		},
		{
			ID: "1732200000000000000-a1b2c3", Adapter: "slurm", Kind: "set_priority", Target: "4242_3",
			Partition: "batch", Value: p(9000), Previous: p(100), Reason: "qssf: short predicted job first",
			Basis: basis, ModelVersion: 7, Outcome: "applied", DecidedAtMillis: baseTS, RecordedAtMillis: baseTS + 1000,
		},
		{
			ID: "1732200000000000001-a1b2c3", Adapter: "sim", Kind: "power_down", Target: "gpu17", Partition: "batch",
			Reason: "idle above forecast", Basis: `{"forecast_gpus":96,"target_nodes":12}`, DryRun: true,
			Outcome: "skipped", Error: "dry run", DecidedAtMillis: baseTS + 1, RecordedAtMillis: baseTS + 1001,
		},
		{
			ID: "1732200000000000002-a1b2c3", Adapter: "slurm", Kind: "power_up", Target: "gpu03",
			Reason: "peak ahead", Basis: "{}", ModelVersion: 0, Outcome: "failed",
			Error: "scontrol: Invalid node state specified", DecidedAtMillis: baseTS + 2, RecordedAtMillis: baseTS + 1002,
		},
		{
			ID: "1732200000000000003-a1b2c3", Adapter: "slurm", Kind: "set_priority", Target: "77", Partition: "débug",
			Value: p(-5), Reason: "hold back", Basis: "{}", ModelVersion: 1 << 40, Outcome: "planned",
			DecidedAtMillis: 0,
		},
	}}
}

func actionHeader() wire { return wire{'H', 'S', 'X', 1} }
