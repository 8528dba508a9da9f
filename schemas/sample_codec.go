package schemas

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Sample batch wire format, version 1 (after the 4-byte header 'H' 'S' 'G' 1):
//
//	cluster, host                string (uvarint length + UTF-8 bytes)
//	gpu count                    uvarint
//	per GPU: index uvarint, uuid, pci bus id string, minor varint, model,
//	         driver version, MIG uuid string, GI id varint, CI id varint,
//	         MIG profile string
//	sample count                 uvarint
//	per sample: timestamp        varint, Unix ms minus the previous sample's
//	                             (the first is relative to 0), so samples of one
//	                             tick cost one byte
//	            gpu              uvarint index into the GPU list
//	            present          uvarint bitmask of metrics
//	            values           one per set bit in metric order: ratios as
//	                             float32 little-endian, others uvarint
//
// Encoding into a reused buffer and decoding into a reused SampleBatch do not
// allocate except for the identity strings.

// metricField holds the decode-error field name of each metric, built once so
// that the decode loop does not concatenate strings.
var metricField = func() (f [NumMetrics]string) {
	for m := range f {
		f[m] = "samples[%d]." + metricInfo[m].Column
	}
	return f
}()

// AppendSampleBatch appends the encoding of b to dst. On error it returns dst
// as it was.
func AppendSampleBatch(dst []byte, b *SampleBatch) ([]byte, error) {
	out, err := appendSampleBatch(dst, b)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func appendSampleBatch(dst []byte, b *SampleBatch) ([]byte, error) {
	if err := checkString("cluster", b.Cluster); err != nil {
		return dst, err
	}
	if err := checkString("host", b.Host); err != nil {
		return dst, err
	}
	if len(b.GPUs) > MaxGPUsPerMessage {
		return dst, fmt.Errorf("schemas: encode sample batch: %d GPUs exceeds %d", len(b.GPUs), MaxGPUsPerMessage)
	}
	if len(b.Samples) > MaxSamplesPerMessage {
		return dst, fmt.Errorf("schemas: encode sample batch: %d samples exceeds %d", len(b.Samples), MaxSamplesPerMessage)
	}
	dst = appendHeader(dst, kindSampleBatch)
	dst = appendString(dst, b.Cluster)
	dst = appendString(dst, b.Host)
	dst = binary.AppendUvarint(dst, uint64(len(b.GPUs)))
	for i := range b.GPUs {
		g := &b.GPUs[i]
		for _, s := range [...]struct{ what, v string }{
			{"gpu uuid", g.UUID}, {"pci bus id", g.PCIBusID}, {"model", g.Model},
			{"driver version", g.DriverVersion}, {"mig uuid", g.MIGUUID}, {"mig profile", g.MIGProfile},
		} {
			if err := checkString(s.what, s.v); err != nil {
				return dst, err
			}
		}
		if g.Index > maxU16 {
			return dst, fmt.Errorf("schemas: encode sample batch: gpus[%d].index %d exceeds %d", i, g.Index, maxU16)
		}
		dst = binary.AppendUvarint(dst, uint64(g.Index))
		dst = appendString(dst, g.UUID)
		dst = appendString(dst, g.PCIBusID)
		dst = binary.AppendVarint(dst, int64(g.Minor))
		dst = appendString(dst, g.Model)
		dst = appendString(dst, g.DriverVersion)
		dst = appendString(dst, g.MIGUUID)
		dst = binary.AppendVarint(dst, int64(g.GIID))
		dst = binary.AppendVarint(dst, int64(g.CIID))
		dst = appendString(dst, g.MIGProfile)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Samples)))
	var prev int64
	for i := range b.Samples {
		s := &b.Samples[i]
		if int(s.GPU) >= len(b.GPUs) {
			return dst, fmt.Errorf("schemas: encode sample batch: samples[%d].gpu = %d, batch has %d GPUs", i, s.GPU, len(b.GPUs))
		}
		if s.Present>>NumMetrics != 0 {
			return dst, fmt.Errorf("schemas: encode sample batch: samples[%d] marks unknown metrics present (%#x)", i, s.Present)
		}
		if p := TimeProblem(s.TSMillis); p != "" {
			return dst, fmt.Errorf("schemas: encode sample batch: samples[%d].ts: %s", i, p)
		}
		dst = binary.AppendVarint(dst, s.TSMillis-prev)
		prev = s.TSMillis
		dst = binary.AppendUvarint(dst, uint64(s.GPU))
		dst = binary.AppendUvarint(dst, uint64(s.Present))
		for p := s.Present; p != 0; p &= p - 1 {
			m := Metric(bits.TrailingZeros32(p))
			if metricInfo[m].Float {
				if s.Values[m]>>32 != 0 {
					return dst, fmt.Errorf("schemas: encode sample batch: samples[%d].%s holds %#x, not float32 bits (use SetFloat)", i, m, s.Values[m])
				}
				dst = binary.LittleEndian.AppendUint32(dst, uint32(s.Values[m]))
				continue
			}
			if v := s.Values[m]; v > metricInfo[m].Max {
				return dst, fmt.Errorf("schemas: encode sample batch: samples[%d].%s = %d exceeds %d", i, m, v, metricInfo[m].Max)
			}
			dst = binary.AppendUvarint(dst, s.Values[m])
		}
	}
	return dst, nil
}

// DecodeSampleBatch decodes msg into b, reusing b's slices. On error b holds a
// partial result and the error is a *DecodeError.
func DecodeSampleBatch(msg []byte, b *SampleBatch) error {
	b.Reset()
	r := reader{b: msg, msg: "sample batch"}
	if err := r.header(kindSampleBatch); err != nil {
		return err
	}
	var err error
	if b.Cluster, err = r.string("cluster", -1); err != nil {
		return err
	}
	if b.Host, err = r.string("host", -1); err != nil {
		return err
	}
	n, err := r.bounded("gpu count", -1, MaxGPUsPerMessage)
	if err != nil {
		return err
	}
	// A GPU takes at least ten bytes; a count beyond that must not drive the
	// allocation.
	if left := uint64(len(msg) - r.off); n > left/10 {
		return r.fail("gpu count", -1, ErrKindTruncated, fmt.Sprintf("%d GPUs cannot fit in %d bytes", n, left))
	}
	if cap(b.GPUs) < int(n) {
		b.GPUs = make([]GPU, 0, n)
	}
	for i := 0; i < int(n); i++ {
		var g GPU
		idx, err := r.bounded("gpus[%d].index", i, maxU16)
		if err != nil {
			return err
		}
		g.Index = uint32(idx)
		if g.UUID, err = r.string("gpus[%d].uuid", i); err != nil {
			return err
		}
		if g.PCIBusID, err = r.string("gpus[%d].pci_bus_id", i); err != nil {
			return err
		}
		if g.Minor, err = r.int32("gpus[%d].minor", i); err != nil {
			return err
		}
		if g.Model, err = r.string("gpus[%d].model", i); err != nil {
			return err
		}
		if g.DriverVersion, err = r.string("gpus[%d].driver_version", i); err != nil {
			return err
		}
		if g.MIGUUID, err = r.string("gpus[%d].mig_uuid", i); err != nil {
			return err
		}
		if g.GIID, err = r.int32("gpus[%d].gi_id", i); err != nil {
			return err
		}
		if g.CIID, err = r.int32("gpus[%d].ci_id", i); err != nil {
			return err
		}
		if g.MIGProfile, err = r.string("gpus[%d].mig_profile", i); err != nil {
			return err
		}
		b.GPUs = append(b.GPUs, g)
	}
	n, err = r.bounded("sample count", -1, MaxSamplesPerMessage)
	if err != nil {
		return err
	}
	// Every sample takes at least three bytes; a count beyond that is a lie that
	// must not drive the allocation.
	if left := uint64(len(msg) - r.off); n > left/3 {
		return r.fail("sample count", -1, ErrKindTruncated, fmt.Sprintf("%d samples cannot fit in %d bytes", n, left))
	}
	if cap(b.Samples) < int(n) {
		b.Samples = make([]Sample, n)
	}
	b.Samples = b.Samples[:n]
	nGPUs := uint64(len(b.GPUs))
	var ts int64
	for i := range b.Samples {
		s := &b.Samples[i]
		*s = Sample{}
		start := r.off
		d, err := r.varint("samples[%d].ts", i)
		if err != nil {
			return err
		}
		// Both in range, two times differ by less than MaxTimeMillis+1: a
		// larger step is out of range whatever ts is, and skipping it here
		// keeps the sum from overflowing.
		if d < -MaxTimeMillis || d > MaxTimeMillis {
			r.off = start
			return r.fail("samples[%d].ts", i, ErrKindRange, fmt.Sprintf("step of %d ms from the previous sample exceeds the DateTime range", d))
		}
		ts += d
		if p := TimeProblem(ts); p != "" {
			r.off = start
			return r.fail("samples[%d].ts", i, ErrKindRange, p)
		}
		s.TSMillis = ts
		start = r.off
		g, err := r.uvarint("samples[%d].gpu", i)
		if err != nil {
			return err
		}
		if g >= nGPUs {
			r.off = start
			return r.fail("samples[%d].gpu", i, ErrKindRange, fmt.Sprintf("GPU %d of a batch with %d GPUs", g, nGPUs))
		}
		s.GPU = uint32(g)
		start = r.off
		p, err := r.uvarint("samples[%d].present", i)
		if err != nil {
			return err
		}
		if p>>NumMetrics != 0 {
			r.off = start
			return r.fail("samples[%d].present", i, ErrKindRange, fmt.Sprintf("bitmask %#x names metrics this decoder does not know", p))
		}
		s.Present = uint32(p)
		for q := s.Present; q != 0; q &= q - 1 {
			m := Metric(bits.TrailingZeros32(q))
			info := &metricInfo[m]
			if info.Float {
				v, err := r.float32(metricField[m], i)
				if err != nil {
					return err
				}
				s.Values[m] = uint64(v)
				continue
			}
			v, err := r.bounded(metricField[m], i, info.Max)
			if err != nil {
				return err
			}
			s.Values[m] = v
		}
	}
	return r.end()
}
