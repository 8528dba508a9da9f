package ingest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/collector/synthetic"
	"github.com/heliostat-dev/heliostat/schemas"
)

// BenchmarkSampleHandlerAdd measures decoding one 80-sample message and filing
// its rows into column blocks, the per-message work of ingest's batcher.
func BenchmarkSampleHandlerAdd(b *testing.B) {
	msg, samples := benchSampleMessage(b)
	h := newSampleHandler(&sync.Pool{New: func() any { return new(schemas.SampleBatch) }}, nil)
	b.ReportAllocs()
	b.ResetTimer()
	rows := 0
	for i := range b.N {
		d, err := h.decode(msg)
		if err != nil {
			b.Fatal(err)
		}
		rows += h.add(d, 0, int64(i), nil)
		if rows >= 200_000 {
			h.reset()
			rows = 0
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
}

// TestSampleHandlerSpares checks that a flush of samples spread over many
// days leaves at most maxSpareBlocks emptied blocks behind, and that the
// next flush reuses them.
func TestSampleHandlerSpares(t *testing.T) {
	h := newSampleHandler(&sync.Pool{New: func() any { return new(schemas.SampleBatch) }}, nil)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	days := func(n int) *schemas.SampleBatch {
		b := &schemas.SampleBatch{Cluster: "c", Host: "h", GPUs: []schemas.GPU{{UUID: "GPU-1", Minor: -1, GIID: -1, CIID: -1}}}
		for d := range n {
			s := schemas.Sample{TSMillis: t0.AddDate(0, 0, d).UnixMilli()}
			s.Set(schemas.GPUUtil, 10)
			b.Samples = append(b.Samples, s)
		}
		return b
	}
	if n := h.add(days(10), 0, 1, nil); n != 10 {
		t.Fatalf("add: %d rows; want 10", n)
	}
	if n := len(h.blocks()); n != 10 {
		t.Fatalf("%d blocks for 10 days; want 10", n)
	}
	h.reset()
	if n := len(h.spare); n != maxSpareBlocks {
		t.Fatalf("after a flush of 10 days: %d spare blocks; want %d", n, maxSpareBlocks)
	}
	kept := slices.Clone(h.spare)
	h.add(days(1), 0, 2, nil)
	blks := h.blocks()
	if len(blks) != 1 || !slices.Contains(kept, blks[0].(*sampleBlock)) || blks[0].rows() != 1 {
		t.Errorf("the next flush's block is not a spare one holding its 1 row")
	}
}

func TestDayKey(t *testing.T) {
	for _, tc := range []struct {
		sec  int64
		want uint32
	}{
		{0, 19700101},
		{-1, 19691231},
		{951782400, 20000229},
		{1763769599, 20251121},
		{1763769600, 20251122},
		{4102444800, 21000101},
	} {
		if got := dayKey(tc.sec); got != tc.want {
			t.Errorf("dayKey(%d) = %d; want %d", tc.sec, got, tc.want)
		}
		if got, want := dayKey(tc.sec), uint32(time.Unix(tc.sec, 0).UTC().Year()*10000+int(time.Unix(tc.sec, 0).UTC().Month())*100+time.Unix(tc.sec, 0).UTC().Day()); got != want {
			t.Errorf("dayKey(%d) = %d; time package says %d", tc.sec, got, want)
		}
	}
}

// benchSampleMessage returns the benchmarks' sample message: 8 synthetic
// GPUs of one host × 10 ticks 5 s apart, and its sample count (80).
func benchSampleMessage(b *testing.B) ([]byte, int) {
	b.Helper()
	src := synthetic.New("bench-host", 8, 1)
	var batch schemas.SampleBatch
	batch.Cluster, batch.Host = "bench", "bench-host"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for k := range 10 {
		if err := src.Collect(context.Background(), t0.Add(time.Duration(k)*5*time.Second), &batch); err != nil {
			b.Fatal(err)
		}
	}
	msg, err := schemas.AppendSampleBatch(nil, &batch)
	if err != nil {
		b.Fatal(err)
	}
	return msg, len(batch.Samples)
}
