package synthetic

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// collect runs ticks ticks of a fresh source, one second apart.
func collect(t *testing.T, host string, gpus int, seed uint64, ticks int) schemas.SampleBatch {
	t.Helper()
	s := New(host, gpus, seed)
	b := schemas.SampleBatch{Cluster: "c", Host: host}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range ticks {
		if err := s.Collect(context.Background(), t0.Add(time.Duration(i)*time.Second), &b); err != nil {
			t.Fatalf("Collect(tick %d) = %v", i, err)
		}
	}
	return b
}

func TestCollect(t *testing.T) {
	for _, tc := range []struct {
		gpus, ticks int
	}{{1, 1}, {8, 10}, {64, 3}} {
		b := collect(t, "node-1", tc.gpus, 42, tc.ticks)
		if len(b.GPUs) != tc.gpus || len(b.Samples) != tc.gpus*tc.ticks {
			t.Errorf("New(%d GPUs) after %d ticks: %d GPUs, %d samples; want %d, %d",
				tc.gpus, tc.ticks, len(b.GPUs), len(b.Samples), tc.gpus, tc.gpus*tc.ticks)
		}
		for i, s := range b.Samples {
			if s.Present != 1<<schemas.NumMetrics-1 {
				t.Fatalf("samples[%d].Present = %#x; want every metric", i, s.Present)
			}
		}
		// Every value is within the wire format's limits.
		msg, err := schemas.AppendSampleBatch(nil, &b)
		if err != nil {
			t.Fatalf("AppendSampleBatch(%d GPUs) = %v", tc.gpus, err)
		}
		var got schemas.SampleBatch
		if err := schemas.DecodeSampleBatch(msg, &got); err != nil {
			t.Fatalf("DecodeSampleBatch(%d GPUs) = %v", tc.gpus, err)
		}
		if !slices.Equal(got.Samples, b.Samples) || !slices.Equal(got.GPUs, b.GPUs) {
			t.Errorf("round trip of %d GPUs changed the batch", tc.gpus)
		}
	}
}

func TestDeterministic(t *testing.T) {
	a, b := collect(t, "node-1", 8, 7, 20), collect(t, "node-1", 8, 7, 20)
	if !slices.Equal(a.Samples, b.Samples) || !slices.Equal(a.GPUs, b.GPUs) {
		t.Errorf("two sources with seed 7 differ")
	}
	if c := collect(t, "node-1", 8, 8, 20); slices.Equal(a.Samples, c.Samples) {
		t.Errorf("seeds 7 and 8 give the same samples")
	}
	if d := collect(t, "node-2", 8, 7, 1); d.GPUs[0].UUID == a.GPUs[0].UUID {
		t.Errorf("hosts node-1 and node-2 share GPU UUID %s", a.GPUs[0].UUID)
	}
}
