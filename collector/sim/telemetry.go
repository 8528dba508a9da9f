package sim

import (
	"math"

	"github.com/heliostat-dev/heliostat/schemas"
)

// fbReserved is the framebuffer the driver reserves on every simulated board.
const fbReserved = 512 << 20

// outbox holds what the simulation produced since the last flush.
type outbox struct {
	jobs    []schemas.JobEvent
	allocs  []schemas.Alloc
	samples []schemas.SampleBatch // per node, in node order
	most    int                   // most samples of one node
}

func (o *outbox) init(nodes int) {
	o.samples = make([]schemas.SampleBatch, nodes)
}

// full reports whether the outbox should be flushed before the simulation
// goes on.
func (o *outbox) full() bool {
	return o.most >= maxSamplesPerMessage || len(o.jobs) >= maxEventsBuffered || len(o.allocs) >= maxEventsBuffered
}

func (o *outbox) reset() {
	o.jobs = o.jobs[:0]
	o.allocs = o.allocs[:0]
	for i := range o.samples {
		o.samples[i].Reset()
	}
	o.most = 0
}

// tick takes one sample of every GPU of every powered node at the current
// time. A GPU held by a running job shows that job's load (utilization
// 40–100% with a little noise, its board's busy power, its framebuffer
// share); any other GPU shows 0% and its board's idle power (H100: 250–650 W
// busy, 60–90 W idle). Nodes that are down or waking send
// nothing.
func (s *Sim) tick() {
	dt := s.cfg.SampleInterval.Seconds()
	for _, n := range s.nodes {
		if n.state != NodeUp {
			continue
		}
		b := &s.out.samples[n.idx]
		if len(b.GPUs) == 0 {
			b.Cluster, b.Host = s.cfg.Cluster, n.name
			b.GPUs = append(b.GPUs, n.ids...)
		}
		for i, j := range n.gpus {
			b.Samples = append(b.Samples, s.sample(n, i, j, dt))
		}
		s.out.most = max(s.out.most, len(b.Samples))
		s.m.samples.Add(float64(len(n.gpus)))
	}
}

// sample returns GPU i of n's sample at the current time; j is the job
// holding it, or nil.
func (s *Sim) sample(n *node, i int, j *job, dt float64) schemas.Sample {
	r1 := unit(mix(s.cfg.Seed, uint64(n.idx), uint64(i), uint64(s.t), 1))
	r2 := unit(mix(s.cfg.Seed, uint64(n.idx), uint64(i), uint64(s.t), 2))
	b := &n.board
	var util, powerW, used, temp, smMHz float64
	if j != nil {
		util = min(1, max(0.4, j.util+(r1-0.5)*0.1))
		powerW = min(b.busyMaxW, max(b.busyMinW, b.busyLoW+(util-0.4)/0.6*b.busySpanW+(r2-0.5)*10))
		used = j.mem * float64(b.fb-fbReserved)
		temp = 40 + util*40
		smMHz = b.busySMMHz + util*b.spanSMMHz
	} else {
		powerW = n.idleW[i] + (r2-0.5)*2
		temp = 30 + (n.idleW[i]-b.idleLoW)/6
		smMHz = b.idleSMMHz
	}
	n.energy[i] += uint64(powerW * dt * 1000)
	pct := uint64(math.Round(util * 100))
	if j != nil {
		pct = max(1, pct)
	}
	var smp schemas.Sample
	smp.TSMillis = s.t * 1000
	smp.GPU = uint32(i)
	usedB := uint64(used)
	smp.Set(schemas.GPUUtil, pct)
	smp.Set(schemas.MemUtil, uint64(math.Round(util*60)))
	smp.Set(schemas.FBUsed, usedB)
	smp.Set(schemas.FBFree, b.fb-fbReserved-usedB)
	smp.Set(schemas.FBTotal, b.fb)
	smp.Set(schemas.FBReserved, fbReserved)
	smp.Set(schemas.PowerUsage, uint64(powerW*1000))
	smp.Set(schemas.PowerLimit, b.limitMW)
	smp.Set(schemas.Energy, n.energy[i])
	smp.Set(schemas.GPUTemp, uint64(temp))
	smp.Set(schemas.MemTemp, uint64(temp+5))
	smp.Set(schemas.SMClock, uint64(smMHz))
	smp.Set(schemas.MemClock, b.memMHz)
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
	if j != nil {
		smp.Set(schemas.PState, 0)
		smp.Set(schemas.Processes, 1)
	} else {
		smp.Set(schemas.PState, 8)
		smp.Set(schemas.Processes, 0)
	}
	return smp
}
