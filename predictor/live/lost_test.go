package live

import (
	"context"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestLostSlurmJobHasNoRunTime checks that a Slurm job the collector lost
// track of (ended as UNKNOWN) loads as ended with no run time, while a
// trace's UNKNOWN job and a Slurm job that completed keep theirs.
func TestLostSlurmJobHasNoRunTime(t *testing.T) {
	ch, conn := schematest.Database(t)
	db := ch.Database
	submit := t0
	start, end := submit.Add(time.Minute), submit.Add(2*time.Hour)
	for _, tc := range []struct {
		id    string
		src   schemas.JobSource
		state schemas.JobState
	}{
		{"lost", schemas.SourceSlurm, schemas.StateUnknown},
		{"slurm-done", schemas.SourceSlurm, schemas.StateCompleted},
		{"trace-unknown", schemas.SourceTrace, schemas.StateUnknown},
	} {
		evs := tjob{id: tc.id, user: "alice", gpus: 1, submit: submit, start: start, end: end}.events()
		evs[len(evs)-1].State = tc.state
		if err := ingest.InsertJobEvents(context.Background(), conn, db, "c1", tc.src, evs); err != nil {
			t.Fatal(err)
		}
	}
	recs, _, err := loadJobs(context.Background(), conn, db, time.Unix(0, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	checkEndedRuns(t, recs, map[string]time.Duration{"lost": 0, "slurm-done": end.Sub(start), "trace-unknown": end.Sub(start)})
	// The lost job neither trains nor joins the history.
	h := replay(recs, func(*rec) bool { return false }, nil)
	if n := h.Len(); n != 2 {
		t.Errorf("history holds %d jobs; want 2", n)
	}
}

// TestFutureEndedJobHasNoRunTime checks that a live source's job whose end is
// stamped far ahead of ClickHouse's clock (a node's clock a year off) loads
// as ended with no run time, so it neither trains nor joins the history,
// while a trace's job ending as far ahead, and a Slurm job ending within
// maxAhead, keep their run times.
func TestFutureEndedJobHasNoRunTime(t *testing.T) {
	ch, conn := schematest.Database(t)
	db := ch.Database
	wall := time.Now().UTC().Truncate(time.Second)
	submit, start := wall.Add(-2*time.Hour), wall.Add(-time.Hour)
	year := 365 * 24 * time.Hour
	insertFrom(t, conn, db, schemas.SourceSlurm,
		tjob{id: "skewed-end", user: "alice", gpus: 1, submit: submit, start: start, end: wall.Add(year)},
		tjob{id: "slurm-near", user: "alice", gpus: 1, submit: submit, start: start, end: wall.Add(maxAhead / 2)})
	insertFrom(t, conn, db, schemas.SourceTrace, tjob{id: "trace-ahead", user: "alice", gpus: 1, submit: submit, start: start, end: wall.Add(year)})
	recs, _, err := loadJobs(context.Background(), conn, db, time.Unix(0, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	checkEndedRuns(t, recs, map[string]time.Duration{"skewed-end": 0, "slurm-near": time.Hour + maxAhead/2, "trace-ahead": time.Hour + year})
	if n := replay(recs, func(*rec) bool { return false }, nil).Len(); n != 2 {
		t.Errorf("history holds %d jobs; want 2 (not the skewed end)", n)
	}
}

// checkEndedRuns checks that recs are the jobs of want, each ended with the
// run time want gives it.
func checkEndedRuns(t *testing.T, recs []*rec, want map[string]time.Duration) {
	t.Helper()
	if len(recs) != len(want) {
		t.Fatalf("loaded %d jobs; want %d", len(recs), len(want))
	}
	for _, r := range recs {
		if !r.ended {
			t.Errorf("%s: not ended", r.jobID)
		}
		if r.run() != want[r.jobID] {
			t.Errorf("%s: run %v; want %v", r.jobID, r.run(), want[r.jobID])
		}
	}
}
