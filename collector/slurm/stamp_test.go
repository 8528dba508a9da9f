package slurm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/schemas"
)

// TestEventsSortAfterUpdate: an UPDATE is stamped with the collector's
// clock, START and END with slurmctld's times. With the collector's clock
// ahead of slurmctld's, a job whose priority changed shortly before it
// ended got an END that sorted before that UPDATE, so the jobs table (latest
// event wins) kept it RUNNING for good. Each event must sort after the
// previous one of its job, by (time, type); the job's own times stay
// slurmctld's.
func TestEventsSortAfterUpdate(t *testing.T) {
	raw, err := os.ReadFile("testdata/squeue-running.json")
	if err != nil {
		t.Fatal(err)
	}
	var listing struct {
		Jobs []map[string]any `json:"jobs"`
	}
	if err := json.Unmarshal(raw, &listing); err != nil {
		t.Fatal(err)
	}
	job := listing.Jobs[0] // job 1, running
	if job["job_id"] != 1.0 {
		t.Fatalf("testdata job 0 is %v; want job 1", job["job_id"])
	}
	start := int64(job["start_time"].(float64))
	list := func(change func(map[string]any)) []byte {
		t.Helper()
		change(job)
		b, err := json.Marshal(map[string]any{"jobs": []any{job}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// The collector's clock is an hour ahead of slurmctld's.
	clock := time.Unix(start, 0).Add(time.Hour + 10*time.Minute)
	now := func() time.Time { return clock }
	rec := newRecorder(t, testCluster)
	src, err := New(Config{Cluster: testCluster, StateFile: filepath.Join(t.TempDir(), "state.json")}, rec, testLogger(t), prometheus.NewRegistry(), now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	apply := func(out []byte) {
		t.Helper()
		clock = clock.Add(30 * time.Second)
		if err := src.apply(ctx, out, clock); err != nil {
			t.Fatal(err)
		}
	}
	apply(list(func(map[string]any) {}))
	apply(list(func(j map[string]any) { j["priority"] = 12345.0 })) // seen at the collector's clock
	// slurmctld ends it 20 minutes after its start: before the UPDATE's
	// time on the collector's clock.
	end := start + 20*60
	apply(list(func(j map[string]any) { j["job_state"] = "COMPLETED"; j["end_time"] = float64(end) }))

	evs := rec.jobEvents("1")
	if got := types(evs); got != "SUBMIT START UPDATE END" {
		t.Fatalf("events %q; want SUBMIT START UPDATE END", got)
	}
	upd, fin := evs[2], evs[3]
	if fin.EndMillis != end*1000 || fin.State != schemas.StateCompleted {
		t.Errorf("END state %v end %d; want COMPLETED ending at slurmctld's %d", fin.State, fin.EndMillis, end*1000)
	}
	if fin.EventMillis <= upd.EventMillis {
		t.Errorf("END at %d, UPDATE at %d: the END sorts before the UPDATE and the job stays RUNNING in jobs", fin.EventMillis, upd.EventMillis)
	}
	for i := 1; i < len(evs); i++ {
		a, b := evs[i-1], evs[i]
		if b.EventMillis < a.EventMillis || b.EventMillis == a.EventMillis && b.Type <= a.Type {
			t.Errorf("event %d (%v at %d) does not sort after event %d (%v at %d)", i, b.Type, b.EventMillis, i-1, a.Type, a.EventMillis)
		}
	}
	if evs[1].EventMillis != evs[1].StartMillis {
		t.Errorf("START at %d; want its start time %d (no move when already in order)", evs[1].EventMillis, evs[1].StartMillis)
	}
}
