package analytics_test

import (
	"context"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestLostSlurmJobs checks that a Slurm job lost from squeue (source slurm,
// state UNKNOWN, ended at the last listing that showed it) counts as an
// ended job of class unknown, but its run time, only a lower bound, stays
// out of the run-time figures and GPU time; a trace's UNKNOWN job keeps the
// run time the trace gives.
func TestLostSlurmJobs(t *testing.T) {
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	db := cfg.Database
	submit := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	var rows [][]any
	for _, j := range []struct {
		id, source, state string
		run               time.Duration
		gpus              uint32
	}{
		{"1", "slurm", "COMPLETED", 100 * time.Second, 2},
		{"2", "slurm", "UNKNOWN", 50 * time.Second, 4}, // lost
		{"3", "trace", "UNKNOWN", 70 * time.Second, 1},
	} {
		start := submit.Add(time.Minute)
		end := start.Add(j.run)
		rows = append(rows, []any{"c", j.id, j.source, "alice", "gpu", j.state, submit, start, end, j.gpus, "END", end, end, uint64(1)})
	}
	schematest.InsertJobRows(t, conn, db, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, end_time, gpus, last_event, updated_at, inserted_at, version", rows...)
	w := analytics.Window{Since: submit.Truncate(24 * time.Hour), Until: submit.Truncate(24*time.Hour).AddDate(0, 0, 1)}
	if _, err := newRunner(t, conn, db, farFuture).RunWindow(ctx, w, "jobs"); err != nil {
		t.Fatal(err)
	}

	var runs uint64
	var minS, maxS float64
	if err := conn.QueryRow(ctx, "SELECT jobs, min_s, max_s FROM "+db+".analytics_duration "+
		"WHERE scope = 'cluster' AND job_class = 'all' AND metric = 'run'").Scan(&runs, &minS, &maxS); err != nil {
		t.Fatal(err)
	}
	if runs != 2 || minS != 70 || maxS != 100 {
		t.Errorf("run times: %d jobs, %v..%v s; want 2 jobs, 70..100 s (the lost job's 50 s left out)", runs, minS, maxS)
	}
	var unknown uint64
	var gpuSeconds float64
	if err := conn.QueryRow(ctx, "SELECT sum(jobs), sum(gpu_seconds) FROM "+db+".analytics_state "+
		"WHERE scope = 'cluster' AND job_class = 'all' AND state_class = 'unknown'").Scan(&unknown, &gpuSeconds); err != nil {
		t.Fatal(err)
	}
	if unknown != 2 || gpuSeconds != 70 {
		t.Errorf("unknown: %d jobs, %v GPU-s; want 2 jobs, 70 GPU-s (the trace job's only)", unknown, gpuSeconds)
	}
	h, err := analytics.ReadHeadline(ctx, conn, db, w, "c")
	if err != nil {
		t.Fatal(err)
	}
	if h.EndedJobs != 3 || h.DurationJobs != 2 {
		t.Errorf("headline: %d ended, %d with a run time; want 3, 2", h.EndedJobs, h.DurationJobs)
	}
}
