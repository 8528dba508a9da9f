package ingest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/collector/synthetic"
	"github.com/heliostat-dev/heliostat/schemas"
)

// BenchmarkSampleHandlerAdd measures decoding one 80-sample message and filing
// its rows into column blocks, the per-message work of ingest's batcher.
func BenchmarkSampleHandlerAdd(b *testing.B) {
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
	h := newSampleHandler(&sync.Pool{New: func() any { return new(schemas.SampleBatch) }})
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
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch.Samples)), "ns/sample")
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
