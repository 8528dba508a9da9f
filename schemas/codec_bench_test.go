package schemas_test

import (
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

// The benchmark message is what one DGX H100 collector publishes every ten
// seconds at a one-second tick: 8 GPUs × 10 ticks, every metric present.
const benchTicks = 10

func reportPerSample(b *testing.B, samples int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
}

func BenchmarkAppendSampleBatch(b *testing.B) {
	batch := h100Batch(benchTicks)
	buf := encodeSamples(b, batch)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = schemas.AppendSampleBatch(buf[:0], batch); err != nil {
			b.Fatal(err)
		}
	}
	reportPerSample(b, len(batch.Samples))
}

// BenchmarkDecodeSampleBatch decodes into a reused batch, as ingest does: only
// the identity strings allocate.
func BenchmarkDecodeSampleBatch(b *testing.B) {
	batch := h100Batch(benchTicks)
	msg := encodeSamples(b, batch)
	var got schemas.SampleBatch
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := schemas.DecodeSampleBatch(msg, &got); err != nil {
			b.Fatal(err)
		}
	}
	reportPerSample(b, len(batch.Samples))
}

// BenchmarkDecodeSampleBatchFresh decodes into a new batch each time, for
// comparison: the cost of not reusing.
func BenchmarkDecodeSampleBatchFresh(b *testing.B) {
	batch := h100Batch(benchTicks)
	msg := encodeSamples(b, batch)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		var got schemas.SampleBatch
		if err := schemas.DecodeSampleBatch(msg, &got); err != nil {
			b.Fatal(err)
		}
	}
	reportPerSample(b, len(batch.Samples))
}

func BenchmarkAppendEventBatch(b *testing.B) {
	batch := eventsBatch()
	buf := encodeEvents(b, batch)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = schemas.AppendEventBatch(buf[:0], batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEventBatch(b *testing.B) {
	msg := encodeEvents(b, eventsBatch())
	var got schemas.EventBatch
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := schemas.DecodeEventBatch(msg, &got); err != nil {
			b.Fatal(err)
		}
	}
}
