package schemas_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

func TestDecodeSampleBatchErrors(t *testing.T) {
	const (
		truncated = schemas.ErrKindTruncated
		badMagic  = schemas.ErrKindMagic
		wrongKind = schemas.ErrKindKind
		version   = schemas.ErrKindVersion
		outRange  = schemas.ErrKindRange
		badUTF8   = schemas.ErrKindUTF8
		trailing  = schemas.ErrKindTrailing
		badVarint = schemas.ErrKindVarint
	)
	hdr := sampleHeader()
	ids := hdr.str("eos").str("dgx-h100-017")
	oneGPU := ids.uv(1).gpu(0, "GPU-a")
	gpuTo := func(n int) wire { // GPU 0 up to and excluding field n (0 = index)
		w := ids.uv(1)
		fields := []func(wire) wire{
			func(w wire) wire { return w.uv(0) },
			func(w wire) wire { return w.str("GPU-a") },
			func(w wire) wire { return w.str("00000000:18:00.0") },
			func(w wire) wire { return w.sv(0) },
			func(w wire) wire { return w.str("NVIDIA H100 80GB HBM3") },
			func(w wire) wire { return w.str("550.90.07") },
			func(w wire) wire { return w.str("MIG-a") },
			func(w wire) wire { return w.sv(1) },
			func(w wire) wire { return w.sv(0) },
		}
		for _, f := range fields[:n] {
			w = f(w)
		}
		return w
	}
	// Two samples; the first has nothing present.
	two := oneGPU.uv(2).sv(baseTS).uv(0).uv(0)
	// One sample, up to its present bitmask.
	one := oneGPU.uv(1).sv(baseTS).uv(0)
	valid := encodeSamples(t, h100Batch(1))
	events := encodeEvents(t, eventsBatch())
	long := strings.Repeat("x", schemas.MaxStringLen+1)
	// Nine continuation bytes and a tenth that sets bits above 64.
	overflow := append(bytes.Repeat([]byte{0xff}, 9), 0x02)

	tests := []decodeErrorCase{
		{"empty", nil, "header", truncated, 0},
		{"short header", []byte("HSG"), "header", truncated, 0},
		{"bad magic", []byte("XSG\x01"), "header", badMagic, 0},
		{"lowercase magic", []byte("hsG\x01"), "header", badMagic, 0},
		{"event batch", events, "header.kind", wrongKind, 0},
		{"version 2", []byte("HSG\x02"), "header.version", version, 0},
		{"version 0", []byte("HSG\x00"), "header.version", version, 0},
		{"header only", hdr, "cluster", truncated, 4},
		{"truncated in cluster", hdr.uv(10).text("eos"), "cluster", truncated, 5},
		{"truncated in host", hdr.str("eos").uv(12).text("dgx"), "host", truncated, len(hdr.str("eos")) + 1},
		{"host over MaxStringLen", hdr.str("eos").str(long), "host", outRange, len(hdr.str("eos"))},
		{"host not UTF-8", hdr.str("eos").str("dgx\xff"), "host", badUTF8, len(hdr.str("eos")) + 1},
		{"cluster with UTF-16 surrogate", hdr.str("\xed\xa0\x80"), "cluster", badUTF8, 5},
		{"truncated in gpu count", ids.raw(0x80), "gpu count", truncated, len(ids)},
		{"gpu count overflows 64 bits", ids.raw(overflow...), "gpu count", badVarint, len(ids)},
		{"gpu count over MaxGPUsPerMessage", ids.uv(schemas.MaxGPUsPerMessage + 1), "gpu count", outRange, len(ids)},
		{"gpu count that cannot fit", ids.uv(1), "gpu count", truncated, len(ids) + 1},
		{"gpu index over uint16", ids.uv(1).uv(1 << 16).text("0123456789"), "gpus[0].index", outRange, len(ids) + 1},
		{"gpu uuid over MaxStringLen", gpuTo(1).str(long), "gpus[0].uuid", outRange, len(gpuTo(1))},
		{"truncated in second gpu uuid", ids.uv(2).gpu(0, "GPU-a").uv(1).uv(40).text("GPU-"), "gpus[1].uuid", truncated, len(ids.uv(2).gpu(0, "GPU-a").uv(1)) + 1},
		{"truncated in pci bus id", gpuTo(2).uv(16).text("0000"), "gpus[0].pci_bus_id", truncated, len(gpuTo(2)) + 1},
		{"minor over int32", gpuTo(3).sv(math.MaxInt32 + 1), "gpus[0].minor", outRange, len(gpuTo(3))},
		{"minor under int32", gpuTo(3).sv(math.MinInt32 - 1), "gpus[0].minor", outRange, len(gpuTo(3))},
		{"model not UTF-8", gpuTo(4).str("NVIDIA \xc0\xaf"), "gpus[0].model", badUTF8, len(gpuTo(4)) + 1},
		{"truncated in driver version", gpuTo(5), "gpus[0].driver_version", truncated, len(gpuTo(5))},
		{"mig uuid over MaxStringLen", gpuTo(6).str(long), "gpus[0].mig_uuid", outRange, len(gpuTo(6))},
		{"truncated in gi_id", gpuTo(7).raw(0x81), "gpus[0].gi_id", truncated, len(gpuTo(7))},
		{"ci_id over int32", gpuTo(8).sv(1 << 40), "gpus[0].ci_id", outRange, len(gpuTo(8))},
		{"truncated in mig_profile", gpuTo(9).uv(7).text("1g."), "gpus[0].mig_profile", truncated, len(gpuTo(9)) + 1},
		{"truncated in sample count", oneGPU, "sample count", truncated, len(oneGPU)},
		{"sample count over MaxSamplesPerMessage", oneGPU.uv(schemas.MaxSamplesPerMessage + 1), "sample count", outRange, len(oneGPU)},
		// The size check runs after the count is read, so the offset is past it.
		{"sample count cannot fit", oneGPU.uv(100).raw(0, 0, 0, 0, 0, 0), "sample count", truncated, len(oneGPU.uv(100))},
		{"sample count of a batch without GPUs cannot fit", ids.uv(0).uv(1).raw(0, 0), "sample count", truncated, len(ids) + 2},
		{"truncated in ts", oneGPU.uv(1).raw(0x80, 0x80, 0x80), "samples[0].ts", truncated, len(oneGPU) + 1},
		{"ts overflows 64 bits", oneGPU.uv(1).raw(overflow...), "samples[0].ts", badVarint, len(oneGPU) + 1},
		{"truncated in gpu", oneGPU.uv(1).sv(0).raw(0x80, 0x80), "samples[0].gpu", truncated, len(oneGPU) + 2},
		{"gpu out of range", two.sv(1000).uv(1).uv(0), "samples[1].gpu", outRange, len(two.sv(1000))},
		{"gpu out of range in a batch without GPUs", ids.uv(0).uv(1).sv(0).uv(0).uv(0), "samples[0].gpu", outRange, len(ids) + 3},
		{"gpu over uint32", two.sv(1000).uv(1 << 33).uv(0), "samples[1].gpu", outRange, len(two.sv(1000))},
		{"truncated in present", one.raw(0x80), "samples[0].present", truncated, len(one)},
		{"present names unknown metric", one.uv(1 << schemas.NumMetrics), "samples[0].present", outRange, len(one)},
		{"present over 32 bits", one.uv(1<<40 | 1), "samples[0].present", outRange, len(one)},
		{"gpu_util 101", one.uv(1 << schemas.GPUUtil).uv(101), "samples[0].gpu_util", outRange, len(one) + 1},
		{"mem_util 255", one.uv(1 << schemas.MemUtil).uv(255), "samples[0].mem_util", outRange, len(one) + 1},
		{"pstate 16", one.uv(1 << schemas.PState).uv(16), "samples[0].pstate", outRange, len(one.uv(1 << schemas.PState))},
		{"gpu_temp_c over uint16", one.uv(1 << schemas.GPUTemp).uv(1 << 16), "samples[0].gpu_temp_c", outRange, len(one.uv(1 << schemas.GPUTemp))},
		{"power_mw over uint32", one.uv(1 << schemas.PowerUsage).uv(1 << 32), "samples[0].power_mw", outRange, len(one.uv(1 << schemas.PowerUsage))},
		{"processes over uint16 after a valid metric", one.uv(1<<schemas.GPUUtil | 1<<schemas.Processes).uv(50).uv(70000), "samples[0].processes", outRange, len(one.uv(1<<schemas.GPUUtil | 1<<schemas.Processes).uv(50))},
		{"truncated in fb_used_bytes", one.uv(1 << schemas.FBUsed).raw(0x80), "samples[0].fb_used_bytes", truncated, len(one.uv(1 << schemas.FBUsed))},
		{"energy_mj overflows 64 bits", one.uv(1 << schemas.Energy).raw(overflow...), "samples[0].energy_mj", badVarint, len(one.uv(1 << schemas.Energy))},
		{"truncated in sm_active", one.uv(1<<schemas.SMActive).raw(0, 0), "samples[0].sm_active", truncated, len(one.uv(1 << schemas.SMActive))},
		{"truncated in second float", one.uv(1<<schemas.SMActive|1<<schemas.DRAMActive).f32(0.5).raw(0, 0, 0), "samples[0].dram_active", truncated, len(one.uv(1<<schemas.SMActive | 1<<schemas.DRAMActive).f32(0.5))},
		{"trailing byte", wire(valid).raw(0), "end", trailing, len(valid)},
		{"two messages", wire(valid).raw(valid...), "end", trailing, len(valid)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b schemas.SampleBatch
			err := schemas.DecodeSampleBatch(tt.msg, &b)
			checkDecodeError(t, "DecodeSampleBatch", "sample batch", tt, err)
		})
	}
}

func TestAppendSampleBatchRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(b *schemas.SampleBatch)
		want   string // in the error text
	}{
		{"gpu index out of range", func(b *schemas.SampleBatch) { b.Samples[9].GPU = 8 }, "samples[9].gpu = 8, batch has 8 GPUs"},
		{"gpu_util 101", func(b *schemas.SampleBatch) { b.Samples[3].Set(schemas.GPUUtil, 101) }, "samples[3].gpu_util = 101 exceeds 100"},
		{"pstate 16", func(b *schemas.SampleBatch) { b.Samples[0].Set(schemas.PState, 16) }, "samples[0].pstate = 16 exceeds 15"},
		{"power_mw over uint32", func(b *schemas.SampleBatch) { b.Samples[0].Set(schemas.PowerUsage, 1<<32) }, "samples[0].power_mw"},
		{"unknown metric present", func(b *schemas.SampleBatch) { b.Samples[1].Present |= 1 << 30 }, "samples[1] marks unknown metrics present"},
		{"host not UTF-8", func(b *schemas.SampleBatch) { b.Host = "dgx-\xff" }, "host: not valid UTF-8"},
		{"cluster not UTF-8", func(b *schemas.SampleBatch) { b.Cluster = "\xed\xa0\x80" }, "cluster: not valid UTF-8"},
		{"cluster too long", func(b *schemas.SampleBatch) { b.Cluster = strings.Repeat("c", schemas.MaxStringLen+1) }, "cluster: 1025 bytes exceeds 1024"},
		{"gpu uuid too long", func(b *schemas.SampleBatch) { b.GPUs[2].UUID = strings.Repeat("u", 4000) }, "gpu uuid: 4000 bytes exceeds 1024"},
		{"mig profile not UTF-8", func(b *schemas.SampleBatch) { b.GPUs[7].MIGProfile = "1g.\x80" }, "mig profile: not valid UTF-8"},
		{"too many GPUs", func(b *schemas.SampleBatch) {
			b.GPUs = make([]schemas.GPU, schemas.MaxGPUsPerMessage+1)
		}, "4097 GPUs exceeds 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := h100Batch(2)
			tt.mutate(b)
			_, err := schemas.AppendSampleBatch(nil, b)
			if err == nil {
				t.Fatalf("AppendSampleBatch(%s) error = nil; want one containing %q", tt.name, tt.want)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "schemas: encode ") || !strings.Contains(msg, tt.want) {
				t.Errorf("AppendSampleBatch(%s) error = %q; want one starting with \"schemas: encode \" and containing %q", tt.name, msg, tt.want)
			}
		})
	}
}

// TestSampleBatchLimits round-trips values at the edges of what the format
// allows.
func TestSampleBatchLimits(t *testing.T) {
	full := schemas.Sample{TSMillis: 0, Present: 1<<schemas.NumMetrics - 1}
	for m := range schemas.NumMetrics {
		if !m.Info().Float {
			full.Values[m] = m.Info().Max
		}
	}
	full.Values[schemas.SMActive] = 0x7fc00001    // NaN with payload
	full.Values[schemas.SMOccupancy] = 0x80000000 // -0
	full.Values[schemas.TensorActive] = uint64(math.Float32bits(float32(math.Inf(1))))
	full.Values[schemas.DRAMActive] = math.MaxUint32

	tests := []struct {
		name string
		b    *schemas.SampleBatch
	}{
		{"every metric at its maximum", &schemas.SampleBatch{
			Cluster: strings.Repeat("é", schemas.MaxStringLen/2),
			Host:    strings.Repeat("🚀", schemas.MaxStringLen/4),
			GPUs: []schemas.GPU{{
				Index: math.MaxUint16, UUID: strings.Repeat("u", schemas.MaxStringLen), Minor: math.MinInt32,
				GIID: math.MaxInt32, CIID: math.MinInt32, MIGProfile: "7g.80gb",
			}},
			Samples: []schemas.Sample{full, {TSMillis: schemas.MaxTimeMillis}},
		}},
		{"MaxGPUsPerMessage GPUs", &schemas.SampleBatch{GPUs: make([]schemas.GPU, schemas.MaxGPUsPerMessage)}},
		{"samples but no metrics", &schemas.SampleBatch{
			GPUs:    []schemas.GPU{{}},
			Samples: make([]schemas.Sample, 1000),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := encodeSamples(t, tt.b)
			var got schemas.SampleBatch
			if err := schemas.DecodeSampleBatch(msg, &got); err != nil {
				t.Fatalf("DecodeSampleBatch(AppendSampleBatch(%s)): %v", tt.name, err)
			}
			if g, w := normSamples(&got), normSamples(tt.b); !reflect.DeepEqual(g, w) {
				t.Errorf("DecodeSampleBatch(AppendSampleBatch(%s)) = %+v; want %+v", tt.name, g, w)
			}
		})
	}
}

// TestDecodeSampleBatchReuse decodes different messages into one batch: nothing
// of an earlier message, not even a failed one, may leak into a later one.
func TestDecodeSampleBatchReuse(t *testing.T) {
	var b schemas.SampleBatch
	for _, want := range []*schemas.SampleBatch{
		h100Batch(3), migBatch(), absentBatch(), nil, {}, h100Batch(1), rangeEndsTSBatch(),
	} {
		if want == nil { // a message that fails half-way through the samples
			msg := encodeSamples(t, h100Batch(2))
			if err := schemas.DecodeSampleBatch(msg[:len(msg)-5], &b); err == nil {
				t.Fatalf("DecodeSampleBatch(truncated) error = nil; want one")
			}
			continue
		}
		if err := schemas.DecodeSampleBatch(encodeSamples(t, want), &b); err != nil {
			t.Fatalf("DecodeSampleBatch(%s): %v", want.Host, err)
		}
		if g, w := normSamples(&b), normSamples(want); !reflect.DeepEqual(g, w) {
			t.Errorf("DecodeSampleBatch(%s) into a used batch = %+v; want %+v", want.Host, g, w)
		}
	}
}

// TestSampleBatchAllocs checks the package's promise: encoding into a reused
// buffer does not allocate, and decoding into a reused batch allocates only the
// identity strings.
func TestSampleBatchAllocs(t *testing.T) {
	b := h100Batch(10)
	buf := encodeSamples(t, b)
	encAllocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = schemas.AppendSampleBatch(buf[:0], b); err != nil {
			t.Fatal(err)
		}
	})
	if encAllocs != 0 {
		t.Errorf("AppendSampleBatch into a reused buffer: %v allocations; want 0", encAllocs)
	}

	var got schemas.SampleBatch
	decAllocs := testing.AllocsPerRun(100, func() {
		if err := schemas.DecodeSampleBatch(buf, &got); err != nil {
			t.Fatal(err)
		}
	})
	// cluster and host, then per GPU its UUID, PCI bus ID, model and driver
	// version (the MIG strings are empty and cost nothing).
	if want := float64(2 + 4*len(b.GPUs)); decAllocs > want {
		t.Errorf("DecodeSampleBatch into a reused batch: %v allocations; want at most %v", decAllocs, want)
	}
}

func FuzzDecodeSampleBatch(f *testing.F) {
	for _, c := range goldenCases() {
		if c.samples != nil {
			f.Add(c.encode(f))
		}
	}
	ids := sampleHeader().str("eos").str("h")
	one := ids.uv(1).gpu(0, "GPU-a").uv(1).sv(baseTS).uv(0)
	for _, msg := range [][]byte{
		nil,
		[]byte("HSG\x01"),
		[]byte("HSE\x01"),
		ids.uv(schemas.MaxGPUsPerMessage),
		ids.uv(1).gpu(0, "GPU-a").uv(schemas.MaxSamplesPerMessage),
		one.uv(1 << schemas.GPUUtil).uv(101),
		one.uv(1<<schemas.SMActive).raw(0, 0),
		one.uv(1<<schemas.NumMetrics - 1),
		ids.uv(1).uv(0).raw(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		// An overlong (non-minimal) varint for the sample count: valid, and
		// re-encoded shorter.
		ids.uv(1).gpu(0, "GPU-a").raw(0x81, 0x00).sv(5).uv(0).uv(0),
	} {
		f.Add(msg)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var b schemas.SampleBatch
		err := schemas.DecodeSampleBatch(msg, &b)
		if err != nil {
			var de *schemas.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("DecodeSampleBatch(%q) error = %v (%T); want a *schemas.DecodeError", msg, err, err)
			}
			if de.Offset < 0 || de.Offset > len(msg) || de.Field == "" || de.Kind == "" {
				t.Fatalf("DecodeSampleBatch(%q) = %#v; want a field, a kind and an offset within the message", msg, de)
			}
			return
		}
		enc, err := schemas.AppendSampleBatch(nil, &b)
		if err != nil {
			t.Fatalf("AppendSampleBatch(DecodeSampleBatch(%q)): %v; the encoder must accept what the decoder accepts", msg, err)
		}
		if len(enc) > len(msg) {
			t.Errorf("re-encoding %d bytes gave %d; the encoder should write minimal varints", len(msg), len(enc))
		}
		// Decode into a dirty batch: reuse must not leak old values.
		again := h100Batch(2)
		if err := schemas.DecodeSampleBatch(enc, again); err != nil {
			t.Fatalf("DecodeSampleBatch(AppendSampleBatch(DecodeSampleBatch(%q))): %v", msg, err)
		}
		if g, w := normSamples(again), normSamples(&b); !reflect.DeepEqual(g, w) {
			t.Fatalf("round trip of %q = %+v; want %+v", msg, g, w)
		}
		enc2, err := schemas.AppendSampleBatch(nil, again)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("second re-encoding of %q = %x, %v; want %x", msg, enc2, err, enc)
		}
	})
}
