package qssf

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/collector/sim"
	"github.com/heliostat-dev/heliostat/schemas"
)

// events keeps the job events the simulated cluster publishes.
type events struct {
	mu     sync.Mutex
	starts map[string]int64 // job → start, Unix ms
	err    error
}

func (e *events) Publish(_ context.Context, topic string, _, value []byte) error {
	if topic != schemas.TopicJobEvents {
		return nil
	}
	var b schemas.JobEventBatch
	if err := schemas.DecodeJobEventBatch(value, &b); err != nil {
		e.mu.Lock()
		e.err = err
		e.mu.Unlock()
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range b.Events {
		if ev.Type == schemas.JobStart {
			e.starts[ev.JobID] = ev.StartMillis
		}
	}
	return nil
}

// TestPolicyDrivesSim runs the live simulated cluster with Policy: the same
// order as Rank, at the simulator's clock.
func TestPolicyDrivesSim(t *testing.T) {
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	// One 8-GPU node. a holds it for 100 s; b (long) and c (short) wait.
	jobs := []sim.JobSpec{
		{ID: "a", User: "u", VC: "vc1", GPUs: 8, Duration: sec(100), TimeLimit: sec(100)},
		{ID: "b", User: "u", VC: "vc1", GPUs: 8, Submit: sec(1), Duration: sec(1000), TimeLimit: sec(1000)},
		{ID: "c", User: "u", VC: "vc1", GPUs: 8, Submit: sec(50), Duration: sec(10), TimeLimit: sec(10)},
	}
	for _, tc := range []struct {
		name    string
		pol     sim.Policy
		wantOrd []string
	}{
		{"fifo", sim.FIFO{}, []string{"a", "b", "c"}},
		{"qssf runs the short job first", &Policy{}, []string{"a", "c", "b"}},
		// Rate 1000: b's window (8,000 GPU·s / 1000 = 8 s) closed before
		// c was submitted (49 s after b).
		{"qssf with aging: c came after b's window", &Policy{Config: Config{AgingRate: 1000}}, []string{"a", "b", "c"}},
		{"qssf with a predictor", &Policy{Predict: func(j *sim.PendingJob) time.Duration {
			if j.ID == "b" {
				return time.Second // predicted (wrongly) tiny
			}
			return time.Hour
		}}, []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
			pub := &events{starts: map[string]int64{}}
			s, err := sim.New(sim.Config{Nodes: 1, Start: start, Cluster: "t"}, sim.Jobs(slices.Clone(jobs)), tc.pol, pub, nil, nil, func() time.Time { return start })
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Advance(context.Background(), start.Add(2000*time.Second)); err != nil {
				t.Fatal(err)
			}
			if pub.err != nil {
				t.Fatal(pub.err)
			}
			var got []string
			for id := range pub.starts {
				got = append(got, id)
			}
			slices.SortFunc(got, func(x, y string) int { return int(pub.starts[x] - pub.starts[y]) })
			if !slices.Equal(got, tc.wantOrd) {
				t.Fatalf("start order %v (%v); want %v", got, pub.starts, tc.wantOrd)
			}
		})
	}
}
