package slurm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/schemas"
)

// TestLostJobsEndAndResume feeds the source listings that Slurm 22.05.8
// printed (five running jobs and a pending one), then listings without
// them: after two such listings each job ends as UNKNOWN at the last listing
// that showed it, its allocation intervals closed then. Listed again, each
// job's state comes back with one UPDATE (no second SUBMIT or START), and a
// second loss ends it again, later.
func TestLostJobsEndAndResume(t *testing.T) {
	running, err := os.ReadFile("testdata/squeue-running.json")
	if err != nil {
		t.Fatal(err)
	}
	empty := []byte(`{"jobs": []}`)
	ids := []string{"1", "2", "3_0", "3_1", "3_2", "4"}

	clock := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	rec := newRecorder(t, testCluster)
	cfg := Config{Cluster: testCluster, StateFile: filepath.Join(t.TempDir(), "state.json")}
	src, err := New(cfg, rec, testLogger(t), prometheus.NewRegistry(), now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	listing := func(out []byte) time.Time {
		t.Helper()
		clock = clock.Add(30 * time.Second)
		if err := src.apply(ctx, out, clock); err != nil {
			t.Fatal(err)
		}
		return clock
	}
	// checkLost requires the last event of every job to be a lost END at
	// seen, and its allocations to be closed then.
	checkLost := func(round string, seen time.Time) {
		t.Helper()
		for _, id := range ids {
			evs := rec.jobEvents(id)
			end := evs[len(evs)-1]
			if end.Type != schemas.JobEnd || end.State != schemas.StateUnknown || end.ExitCode != schemas.Unknown ||
				end.EventMillis != seen.UnixMilli() || end.EndMillis != seen.UnixMilli() {
				t.Errorf("%s: job %s last event %v %v exit %d at %d end %d; want END UNKNOWN exit -1 at and ending %d",
					round, id, end.Type, end.State, end.ExitCode, end.EventMillis, end.EndMillis, seen.UnixMilli())
			}
			if end.SubmitMillis != evs[0].SubmitMillis || (id == "4") != (end.StartMillis == 0) {
				t.Errorf("%s: job %s lost END submit %d start %d; want submit %d and a start unless pending", round, id, end.SubmitMillis, end.StartMillis, evs[0].SubmitMillis)
			}
		}
	}

	first := listing(running)
	listing(empty)
	if got := types(rec.jobEvents("1")); got != "SUBMIT START" {
		t.Fatalf("job 1 after one listing without it: %q; want SUBMIT START (one miss is not lost)", got)
	}
	listing(empty)
	checkLost("first loss", first)
	for _, id := range ids {
		want := map[string]string{"4": "SUBMIT END"}[id]
		if want == "" {
			want = "SUBMIT START END"
		}
		if got := types(rec.jobEvents(id)); got != want {
			t.Errorf("job %s: events %q; want %q", id, got, want)
		}
	}
	allocs := rec.jobAllocs("1")
	if len(allocs) != 32 {
		t.Fatalf("job 1 (16 GPUs): %d allocation records; want 16 opened and 16 closed", len(allocs))
	}
	for _, a := range allocs[16:] {
		if a.EndMillis != first.UnixMilli() {
			t.Errorf("job 1 GPU %s/%d closed at %d; want %d", a.Host, a.GPUIndex, a.EndMillis, first.UnixMilli())
		}
	}
	if got := testutil.ToFloat64(src.m.lost); got != float64(len(ids)) {
		t.Errorf("heliostat_slurm_jobs_lost_total = %v; want %d", got, len(ids))
	}

	// Listed again: the state comes back, once.
	again := listing(running)
	listing(running)
	for _, id := range ids {
		evs := rec.jobEvents(id)
		last := evs[len(evs)-1]
		want := schemas.StateRunning
		if id == "4" {
			want = schemas.StatePending
		}
		if last.Type != schemas.JobUpdate || last.State != want || last.EventMillis != again.UnixMilli() || last.EndMillis != 0 {
			t.Errorf("job %s listed again: last event %v %v at %d end %d; want UPDATE %v at %d", id, last.Type, last.State, last.EventMillis, last.EndMillis, want, again.UnixMilli())
		}
		if n := len(evs); n != map[bool]int{true: 3, false: 4}[id == "4"] {
			t.Errorf("job %s listed again: events %q; want one UPDATE after the lost END", id, types(evs))
		}
	}
	if n := len(rec.jobAllocs("1")); n != 32 {
		t.Errorf("job 1 listed again: %d allocation records; want the 32 from before (intervals stay closed)", n)
	}

	// Lost again: a second END, at the later listing.
	last := listing(running)
	listing(empty)
	listing(empty)
	checkLost("second loss", last)

	// Nothing more once lost: the records stay (ended) for the retention.
	n := rec.eventCount()
	listing(empty)
	if got := rec.eventCount(); got != n {
		t.Errorf("events grew from %d to %d on a listing with nothing new", n, got)
	}
}

// TestLostNotBeforeJobCompRead: a job missing from squeue is not lost while
// the job-completion log may still hold its end (an unfinished last line).
func TestLostNotBeforeJobCompRead(t *testing.T) {
	running, err := os.ReadFile("testdata/squeue-running.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "jobcomp.log")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	rec := newRecorder(t, testCluster)
	cfg := Config{Cluster: testCluster, StateFile: filepath.Join(dir, "state.json"), JobCompLog: logPath, JobCompLocation: time.UTC}
	src, err := New(cfg, rec, testLogger(t), prometheus.NewRegistry(), func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, out := range []string{string(running), `{"jobs": []}`} {
		clock = clock.Add(30 * time.Second)
		if err := src.apply(ctx, []byte(out), clock); err != nil {
			t.Fatal(err)
		}
	}
	// slurmctld is writing a line: the log is not read to its end.
	if err := os.WriteFile(logPath, []byte("JobId=99 UserId=root(0) GroupId=root(0) Name=x JobState=COMPLETED"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clock = clock.Add(30 * time.Second)
		if err := src.apply(ctx, []byte(`{"jobs": []}`), clock); err != nil {
			t.Fatal(err)
		}
	}
	if got := types(rec.jobEvents("2")); got != "SUBMIT START" {
		t.Errorf("job 2 while the log ends in an unfinished line: %q; want SUBMIT START (not lost yet)", got)
	}
	if got := testutil.ToFloat64(src.m.lost); got != 0 {
		t.Errorf("heliostat_slurm_jobs_lost_total = %v; want 0", got)
	}
}

// TestLostWaitsForAccounting: with --slurm.accounting, a job missing from
// squeue is not ended as lost while sacct cannot be read (slurmdbd down):
// its end may still be there. Readiness says why.
func TestLostWaitsForAccounting(t *testing.T) {
	running, err := os.ReadFile("testdata/squeue-running.json")
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	rec := newRecorder(t, testCluster)
	cfg := Config{Cluster: testCluster, StateFile: filepath.Join(t.TempDir(), "state.json"), Accounting: true,
		Sacct: filepath.Join(t.TempDir(), "no-such-sacct")}
	src, err := New(cfg, rec, testLogger(t), prometheus.NewRegistry(), func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, out := range []string{string(running), `{"jobs": []}`, `{"jobs": []}`, `{"jobs": []}`, `{"jobs": []}`} {
		clock = clock.Add(2 * time.Minute) // every poll is due to read the accounting
		if err := src.apply(ctx, []byte(out), clock); err != nil {
			t.Fatalf("listing %d: %v (a failing sacct must not fail the poll)", i, err)
		}
	}
	if got := types(rec.jobEvents("2")); got != "SUBMIT START" {
		t.Errorf("job 2 while the accounting cannot be read: %q; want SUBMIT START (not lost)", got)
	}
	if got := testutil.ToFloat64(src.m.lost); got != 0 {
		t.Errorf("heliostat_slurm_jobs_lost_total = %v; want 0", got)
	}
	// A poll soon after a failed read does not ask slurmdbd again.
	clock = clock.Add(10 * time.Second)
	if err := src.apply(ctx, []byte(`{"jobs": []}`), clock); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(src.m.cmdErrors.WithLabelValues("sacct")); got != 5 {
		t.Errorf("sacct command errors = %v; want 5 (one per listing 2 minutes apart, none 10 s after a failure)", got)
	}
	if err := src.Ready(); err == nil || !strings.Contains(err.Error(), "slurm accounting") {
		t.Errorf("Ready = %v; want the accounting failing", err)
	}
}
