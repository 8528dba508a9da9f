package schemas

import (
	"math"
	"time"
)

// GPU is the identity of one GPU or MIG instance on a host. It travels once per
// message, not once per sample.
type GPU struct {
	Index         uint32 // NVML device index on the host, at most 65535
	UUID          string // GPU-…
	PCIBusID      string
	Minor         int32 // /dev/nvidiaN; -1 when unknown
	Model         string
	DriverVersion string
	// MIG fields are empty (and GIID/CIID -1) for a whole GPU.
	MIGUUID    string
	GIID       int32
	CIID       int32
	MIGProfile string
}

// Sample is one GPU's measurements at one tick. A metric that the device does not
// support is absent (its bit in Present is clear), never 0.
type Sample struct {
	TSMillis int64  // collector clock, Unix milliseconds
	GPU      uint32 // index into SampleBatch.GPUs
	Present  uint32 // bit m set when metric m is present
	// Values holds integer metrics as is and float metrics as float32 bits.
	Values [NumMetrics]uint64
}

// Set records integer metric m.
func (s *Sample) Set(m Metric, v uint64) {
	s.Present |= 1 << m
	s.Values[m] = v
}

// SetFloat records ratio metric m (stored with float32 precision).
func (s *Sample) SetFloat(m Metric, v float64) {
	s.Present |= 1 << m
	s.Values[m] = uint64(math.Float32bits(float32(v)))
}

// Has reports whether metric m is present.
func (s *Sample) Has(m Metric) bool { return s.Present&(1<<m) != 0 }

// Uint returns integer metric m and whether it is present.
func (s *Sample) Uint(m Metric) (uint64, bool) { return s.Values[m], s.Has(m) }

// Float returns ratio metric m and whether it is present.
func (s *Sample) Float(m Metric) (float32, bool) {
	return math.Float32frombits(uint32(s.Values[m])), s.Has(m)
}

// Time returns the sample's timestamp.
func (s *Sample) Time() time.Time { return time.UnixMilli(s.TSMillis).UTC() }

// SampleBatch is one Kafka message on TopicGPUSamples: one host's samples for one
// or more ticks.
type SampleBatch struct {
	Cluster string
	Host    string
	GPUs    []GPU
	Samples []Sample
}

// Reset empties b, keeping its allocated slices for reuse.
func (b *SampleBatch) Reset() {
	b.Cluster, b.Host = "", ""
	b.GPUs = b.GPUs[:0]
	b.Samples = b.Samples[:0]
}

// AddGPU returns g's index in b.GPUs, appending g if no GPU with the same UUID and
// MIG UUID is there yet.
func (b *SampleBatch) AddGPU(g GPU) uint32 {
	for i := range b.GPUs {
		if b.GPUs[i].UUID == g.UUID && b.GPUs[i].MIGUUID == g.MIGUUID {
			return uint32(i)
		}
	}
	b.GPUs = append(b.GPUs, g)
	return uint32(len(b.GPUs) - 1)
}
