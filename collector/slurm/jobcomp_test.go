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

// TestSourceReadsJobCompLog runs jobs while no source runs, then restarts
// slurmctld with a clean state so that squeue forgets them: only the
// job-completion log still has them, and the source must report them from
// there, once. A job running across the restart vanishes: it is counted lost
// and ended as UNKNOWN at the last listing that showed it.
func TestSourceReadsJobCompLog(t *testing.T) {
	c := slurmtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stateFile := filepath.Join(t.TempDir(), "state.json")
	rec := newRecorder(t, testCluster)
	newSource := func(rec *recorder) *Source {
		s, err := New(testConfig(t, c, stateFile), rec, testLogger(t), prometheus.NewRegistry(), time.Now)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	src := newSource(rec)
	poll := func(s *Source) {
		t.Helper()
		if err := s.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	poll(src) // remembers where the log ends (it does not exist yet)

	long, err := c.Submit(ctx, "--gres=gpu:1", "--wrap", "sleep 30")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, long); err != nil {
		t.Fatal(err)
	}
	seenFrom := time.Now().UnixMilli()
	poll(src)
	seenTo := time.Now().UnixMilli()
	if got := types(rec.jobEvents(long)); got != "SUBMIT START" {
		t.Fatalf("job %s: events %q; want SUBMIT START", long, got)
	}

	// While the source is down: a job with GPUs and a failing one.
	type job struct {
		id                 string
		state              schemas.JobState
		exit               int64
		submit, start, end int64
		user               string
	}
	jobs := []*job{{state: schemas.StateCompleted}, {state: schemas.StateFailed, exit: 3}}
	for i, args := range [][]string{{"--gres=gpu:2", "-N1", "--wrap", "sleep 1"}, {"--wrap", "exit 3"}} {
		if jobs[i].id, err = c.Submit(ctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range jobs {
		if _, err := c.WaitJob(ctx, j.id); err != nil {
			t.Fatal(err)
		}
		j.submit, j.start, j.end, j.user = slurmTimes(ctx, t, c, j.id)
	}
	if err := c.RestartController(ctx, true); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Run(ctx, "squeue", "-h", "--states=all"); err != nil || out != "" {
		t.Fatalf("squeue after a clean restart: %q, %v; want no jobs", out, err)
	}

	src = newSource(rec)
	poll(src)
	poll(src)
	for _, j := range jobs {
		evs := rec.jobEvents(j.id)
		if got := types(evs); got != "SUBMIT START END" {
			t.Errorf("job %s: events %q; want SUBMIT START END", j.id, got)
			continue
		}
		for _, e := range evs {
			at := map[schemas.JobEventType]int64{schemas.JobSubmit: j.submit, schemas.JobStart: j.start, schemas.JobEnd: j.end}[e.Type]
			if e.EventMillis != at || e.SubmitMillis != j.submit || e.User != j.user || e.UID != 0 || len(e.Nodes) == 0 && e.Type != schemas.JobSubmit {
				t.Errorf("job %s %v: at %d submit %d user %q uid %d nodes %v; want at %d, submit %d, %s", j.id, e.Type, e.EventMillis, e.SubmitMillis, e.User, e.UID, e.Nodes, at, j.submit, j.user)
			}
			// The log does not say how many GPUs a job had.
			if e.GPUs != schemas.Unknown {
				t.Errorf("job %s %v: gpus %d; want unknown", j.id, e.Type, e.GPUs)
			}
		}
		if end := evs[2]; end.State != j.state || end.ExitCode != j.exit || end.StartMillis != j.start || end.EndMillis != j.end {
			t.Errorf("job %s END: state %v exit %d start %d end %d; want %v %d %d %d", j.id, end.State, end.ExitCode, end.StartMillis, end.EndMillis, j.state, j.exit, j.start, j.end)
		}
	}
	if evs := rec.jobEvents(long); types(evs) != "SUBMIT START END" {
		t.Errorf("job %s that vanished: events %q; want SUBMIT START END", long, types(evs))
	} else if end := evs[2]; end.State != schemas.StateUnknown || end.ExitCode != schemas.Unknown ||
		end.EndMillis < seenFrom || end.EndMillis > seenTo || end.EventMillis != end.EndMillis || end.StartMillis != evs[1].StartMillis {
		t.Errorf("job %s that vanished: END %v exit %d at %d end %d start %d; want UNKNOWN, exit -1, ending in [%d, %d] (the poll that last listed it), start %d",
			long, end.State, end.ExitCode, end.EventMillis, end.EndMillis, end.StartMillis, seenFrom, seenTo, evs[1].StartMillis)
	}
	for _, a := range rec.jobAllocs(long) {
		if a.EndMillis != 0 && (a.EndMillis < seenFrom || a.EndMillis > seenTo) {
			t.Errorf("job %s GPU %s/%d closed at %d; want in [%d, %d]", long, a.Host, a.GPUIndex, a.EndMillis, seenFrom, seenTo)
		}
	}
	if a := rec.jobAllocs(long); len(a) != 2 || a[1].EndMillis == 0 {
		t.Errorf("job %s (1 GPU): allocation records %+v; want its interval opened and closed", long, a)
	}
	if got := testutil.ToFloat64(src.m.lost); got != 1 {
		t.Errorf("heliostat_slurm_jobs_lost_total = %v; want 1 (job %s)", got, long)
	}

	// Nothing is emitted twice, by this source or a new one.
	n := rec.eventCount()
	poll(src)
	poll(newSource(rec))
	if got := rec.eventCount(); got != n {
		t.Errorf("events grew from %d to %d on polls with nothing new", n, got)
	}
}
