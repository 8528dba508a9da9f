// Package synthetic is a GPU source for machines without GPUs: it reports a
// fixed set of made-up GPUs whose load wanders over time, with every metric of
// a Hopper-class GPU present. Output is deterministic for a given seed and clock.
package synthetic

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// Source reports GPUs GPUs on Host.
type Source struct {
	gpus   []schemas.GPU
	state  []gpuState
	lastMS int64
}

type gpuState struct {
	rng    uint64
	load   float64 // 0..1, drifts
	energy uint64  // mJ
}

const fbTotal = 80 << 30 // 80 GiB

// New returns a source of n GPUs for host; seed varies the load pattern.
func New(host string, n int, seed uint64) *Source {
	s := &Source{}
	for i := range n {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d", host, i)
		id := h.Sum64()
		s.gpus = append(s.gpus, schemas.GPU{
			Index:         uint32(i),
			UUID:          fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x", uint32(id>>32), uint16(id>>16), uint16(id), i, id&0xffffffffffff),
			PCIBusID:      fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x10),
			Minor:         int32(i),
			Model:         "NVIDIA H100 80GB HBM3 (synthetic)",
			DriverVersion: "550.54.15",
			GIID:          -1,
			CIID:          -1,
		})
		s.state = append(s.state, gpuState{rng: id ^ seed | 1, load: float64(i%4) / 4})
	}
	return s
}

// Name returns "synthetic".
func (s *Source) Name() string { return "synthetic" }

// GPUs returns the reported GPUs.
func (s *Source) GPUs() []schemas.GPU { return s.gpus }

// Collect appends one sample per GPU at now.
func (s *Source) Collect(_ context.Context, now time.Time, b *schemas.SampleBatch) error {
	ms := now.UnixMilli()
	dt := 0.0
	if s.lastMS != 0 && ms > s.lastMS {
		dt = float64(ms-s.lastMS) / 1000
	}
	s.lastMS = ms
	for i := range s.gpus {
		idx := b.AddGPU(s.gpus[i])
		st := &s.state[i]
		st.load = math.Min(1, math.Max(0, st.load+(st.next()-0.5)*0.2))
		util := st.load
		if util < 0.05 {
			util = 0
		}
		power := 70_000 + util*630_000 // mW, 70 W idle to 700 W
		st.energy += uint64(power * dt)
		var smp schemas.Sample
		smp.TSMillis = ms
		smp.GPU = idx
		used := uint64(util * 0.9 * fbTotal)
		smp.Set(schemas.GPUUtil, uint64(util*100))
		smp.Set(schemas.MemUtil, uint64(util*60))
		smp.Set(schemas.FBUsed, used)
		smp.Set(schemas.FBFree, fbTotal-used-(512<<20))
		smp.Set(schemas.FBTotal, fbTotal)
		smp.Set(schemas.FBReserved, 512<<20)
		smp.Set(schemas.PowerUsage, uint64(power))
		smp.Set(schemas.PowerLimit, 700_000)
		smp.Set(schemas.Energy, st.energy)
		smp.Set(schemas.GPUTemp, uint64(30+util*45))
		smp.Set(schemas.MemTemp, uint64(35+util*40))
		smp.Set(schemas.SMClock, uint64(345+util*1635))
		smp.Set(schemas.MemClock, 2619)
		if util > 0 {
			smp.Set(schemas.PState, 0)
		} else {
			smp.Set(schemas.PState, 8)
		}
		smp.Set(schemas.ClockEventReasons, 0)
		smp.Set(schemas.PCIeReplay, 0)
		smp.Set(schemas.ECCSBEVolatile, 0)
		smp.Set(schemas.ECCDBEVolatile, 0)
		smp.Set(schemas.RemappedCorrectable, 0)
		smp.Set(schemas.RemappedUncorrectable, 0)
		smp.SetFloat(schemas.SMActive, util*0.8)
		smp.SetFloat(schemas.SMOccupancy, util*0.5)
		smp.SetFloat(schemas.TensorActive, util*0.4)
		smp.SetFloat(schemas.DRAMActive, util*0.3)
		if util > 0 {
			smp.Set(schemas.Processes, 1)
		} else {
			smp.Set(schemas.Processes, 0)
		}
		b.Samples = append(b.Samples, smp)
	}
	return nil
}

// next returns a pseudo-random float in [0,1) (xorshift64*).
func (g *gpuState) next() float64 {
	g.rng ^= g.rng >> 12
	g.rng ^= g.rng << 25
	g.rng ^= g.rng >> 27
	return float64((g.rng*2685821657736338717)>>11) / (1 << 53)
}
