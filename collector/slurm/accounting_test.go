package slurm

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
	"github.com/heliostat-dev/heliostat/schemas"
)

// TestAccountingRecoversEnds runs a real Slurm with accounting (slurmdbd on
// MariaDB) and no job-completion log. The source sees job A start; then,
// while it is down, A ends, job B runs and fails, and slurmctld forgets both
// (a cold start with an empty state directory, as when the source is down
// longer than MinJobAge). Back up, the source reads their ends from sacct:
// A ends COMPLETED at its real end with its GPUs' intervals closed then, B
// gets its SUBMIT, START and FAILED END with exit code 3 and its GPUs, and no
// job is ended as lost.
func TestAccountingRecoversEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Slurm cluster with slurmdbd and MariaDB")
	}
	c := slurmtest.StartWith(t, slurmtest.Options{Accounting: true, Conf: map[string]string{"JobCompType": "jobcomp/none"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Read the accounting at every poll, so that it is read while the job
	// that reuses A's id below runs.
	src, rec := accountingSource(t, c)
	poll := func() {
		t.Helper()
		if err := src.Poll(ctx); err != nil {
			t.Fatalf("poll: %v", err)
		}
	}

	a, err := c.Submit(ctx, "--gres=gpu:2", "-J", "a", "--wrap", "sleep 4")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); types(rec.jobEvents(a)) != "SUBMIT START"; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s: events %q after 30 s; want SUBMIT START", a, types(rec.jobEvents(a)))
		}
		poll()
	}
	if err := src.Ready(); err != nil {
		t.Fatalf("Ready after reading the accounting: %v", err)
	}

	// The source is down: B runs and fails, A ends, and slurmctld forgets
	// them.
	b, err := c.Submit(ctx, "--gres=gpu:1", "-J", "b", "--wrap", "sleep 1; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJob(ctx, a, b); err != nil {
		t.Fatal(err)
	}
	_, aStart, aEnd, _ := slurmTimes(ctx, t, c, a)
	bSubmit, bStart, bEnd, _ := slurmTimes(ctx, t, c, b)
	if err := c.RestartController(ctx, true); err != nil {
		t.Fatal(err)
	}

	for deadline := time.Now().Add(30 * time.Second); len(rec.jobEvents(b)) < 3 || len(rec.jobEvents(a)) < 3; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: job %s events %q, job %s events %q; want their ends from the accounting",
				a, types(rec.jobEvents(a)), b, types(rec.jobEvents(b)))
		}
		poll()
	}
	poll()
	poll()

	evA := rec.jobEvents(a)
	if got := types(evA); got != "SUBMIT START END" {
		t.Fatalf("job %s: events %q; want SUBMIT START END", a, got)
	}
	if e := evA[2]; e.State != schemas.StateCompleted || e.ExitCode != 0 || e.EndMillis != aEnd || e.StartMillis != aStart || e.GPUs != 2 {
		t.Errorf("job %s END: %v exit %d start %d end %d GPUs %d; want COMPLETED exit 0 start %d end %d GPUs 2",
			a, e.State, e.ExitCode, e.StartMillis, e.EndMillis, e.GPUs, aStart, aEnd)
	}
	allocs := rec.jobAllocs(a)
	if len(allocs) != 4 {
		t.Fatalf("job %s: %d allocation records; want 2 opened and 2 closed", a, len(allocs))
	}
	for _, al := range allocs[2:] {
		if al.EndMillis != aEnd {
			t.Errorf("job %s GPU %s/%d closed at %d; want its real end %d", a, al.Host, al.GPUIndex, al.EndMillis, aEnd)
		}
	}

	evB := rec.jobEvents(b)
	if got := types(evB); got != "SUBMIT START END" {
		t.Fatalf("job %s: events %q; want SUBMIT START END from the accounting", b, got)
	}
	if e := evB[2]; e.State != schemas.StateFailed || e.ExitCode != 3 || e.SubmitMillis != bSubmit || e.StartMillis != bStart ||
		e.EndMillis != bEnd || e.GPUs != 1 || e.Name != "b" || e.User != "root" || len(e.Nodes) != 1 {
		t.Errorf("job %s END: %+v; want FAILED exit 3, submit %d start %d end %d, 1 GPU, name b, user root, one node", b, e, bSubmit, bStart, bEnd)
	}
	for name, c := range map[string]struct {
		got, want float64
	}{
		"heliostat_slurm_jobs_lost_total":            {testutil.ToFloat64(src.m.lost), 0},
		"heliostat_slurm_accounting_recovered_total": {testutil.ToFloat64(src.m.acctRecovered), 2},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v", name, c.got, c.want)
		}
	}
	if got := testutil.ToFloat64(src.m.parseErrors.WithLabelValues(inputSacct)); got != 0 {
		t.Errorf("sacct records that could not be parsed: %v; want 0", got)
	}
	if err := src.Ready(); err != nil {
		t.Errorf("Ready: %v", err)
	}

	// slurmctld started with an empty state numbers jobs from 1 again: C
	// takes A's id while the accounting still holds A, whose end is inside
	// the window the source reads. A's record in the accounting must not
	// end C, nor C's events change A's.
	cID, err := c.Submit(ctx, "--gres=gpu:1", "-J", "c", "--wrap", "sleep 3")
	if err != nil {
		t.Fatal(err)
	}
	if cID != a {
		t.Logf("job ids were not reused (C is %s, A was %s); the id-reuse half is not exercised", cID, a)
		return
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		poll()
		evs := rec.jobEvents(a)
		if len(evs) >= 5 && evs[len(evs)-1].Type == schemas.JobEnd {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s reused: events %q after 30 s; want A's SUBMIT START END, then C's SUBMIT START END", a, types(evs))
		}
	}
	evs := rec.jobEvents(a)
	if got := types(evs); got != "SUBMIT START END SUBMIT START END" {
		t.Fatalf("job id %s: events %q; want A's SUBMIT START END, then C's", a, got)
	}
	for i, e := range evs[3:] {
		if e.Name != "c" {
			t.Fatalf("C's event %d (%v) is named %q, submitted at %d; want c's (A's record in the accounting ended C)", i, e.Type, e.Name, e.SubmitMillis)
		}
	}
	cSubmit, cStart, cEnd, _ := slurmTimes(ctx, t, c, cID)
	for i, e := range evs[3:] {
		if e.SubmitMillis != cSubmit {
			t.Errorf("C's event %d (%v): submit %d; want %d", i, e.Type, e.SubmitMillis, cSubmit)
		}
	}
	if e := evs[5]; e.State != schemas.StateCompleted || e.StartMillis != cStart || e.EndMillis != cEnd {
		t.Errorf("C's END: %v start %d end %d; want COMPLETED start %d end %d (A ended at %d)", e.State, e.StartMillis, e.EndMillis, cStart, cEnd, aEnd)
	}
	// A was read again at every poll while in the window: counted once.
	if got := testutil.ToFloat64(src.m.idReused.WithLabelValues(reuseOlderSkipped)); got != 1 {
		t.Errorf("older jobs of a reused id skipped: %v; want 1 (A, read while C ran)", got)
	}
	if got := testutil.ToFloat64(src.m.idReused.WithLabelValues(reuseSuperseded)); got != 1 {
		t.Errorf("tracked jobs superseded by a newer one under their id: %v; want 1 (A by C)", got)
	}
}

// accountingSource returns a source on c that reads ended jobs from the
// accounting (no job-completion log) at every poll, and what it publishes.
func accountingSource(t *testing.T, c *slurmtest.Cluster) (*Source, *recorder) {
	t.Helper()
	cfg := testConfig(t, c, filepath.Join(t.TempDir(), "state.json"))
	cfg.JobCompLog, cfg.Accounting = "", true
	cfg.AccountingInterval = 100 * time.Millisecond
	rec := newRecorder(t, testCluster)
	src, err := New(cfg, rec, testLogger(t), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return src, rec
}

// freshSource returns a source on c with a state file of its own and no
// accounting, and what it publishes.
func freshSource(t *testing.T, c *slurmtest.Cluster) (*Source, *recorder) {
	t.Helper()
	rec := newRecorder(t, testCluster)
	src, err := New(testConfig(t, c, filepath.Join(t.TempDir(), "state.json")), rec, testLogger(t), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return src, rec
}
