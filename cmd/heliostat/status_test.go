package main

import (
	"context"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestQueryStatusCountsRunSummaries: the status line counts one job summary
// per run (job_run_summary): a job requeued once has two.
func TestQueryStatusCountsRunSummaries(t *testing.T) {
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+cfg.Database+".job_run_summary (cluster, job_id, user, state, gpus, submit_time, start_time, end_time, computed_at, version)")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		state       string
		submit, end time.Time
		computedAt  time.Time
		version     uint64
	}{
		{"PREEMPTED", t0, t0.Add(2 * time.Hour), t0.Add(2 * time.Hour), 1},
		{"COMPLETED", t0.Add(2 * time.Hour), t0.Add(5 * time.Hour), t0.Add(5 * time.Hour), 2},
	} {
		if err := b.Append("c1", "100", "alice", r.state, uint32(4), r.submit, r.submit, r.end, r.computedAt, r.version); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	s, err := queryStatus(ctx, conn, cfg.Database)
	if err != nil {
		t.Fatal(err)
	}
	if s.summaries != 2 {
		t.Errorf("queryStatus: %d job summaries; want 2 (one per run of job 100)", s.summaries)
	}
}
