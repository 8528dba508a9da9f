package live

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestLostSlurmJobHasNoRunTime checks that a live job's run the system
// cut short (a Slurm job the collector lost track of, ended as UNKNOWN; a
// run ended by a node failure or a preemption; a simulated job a killed
// `up` left open) loads as ended with no run time, while a trace's job in
// those states and live jobs that ended on their own keep theirs.
func TestLostSlurmJobHasNoRunTime(t *testing.T) {
	ch, conn := schematest.Database(t)
	db := ch.Database
	submit := t0
	start, end := submit.Add(time.Minute), submit.Add(2*time.Hour)
	cases := []struct {
		id    string
		src   schemas.JobSource
		state schemas.JobState
		run   bool // keeps its run time
	}{
		{"lost", schemas.SourceSlurm, schemas.StateUnknown, false},
		{"slurm-node-fail", schemas.SourceSlurm, schemas.StateNodeFail, false},
		{"slurm-preempted", schemas.SourceSlurm, schemas.StatePreempted, false},
		{"sim-lost", schemas.SourceSim, schemas.StateUnknown, false},
		{"sim-node-fail", schemas.SourceSim, schemas.StateNodeFail, false},
		{"slurm-done", schemas.SourceSlurm, schemas.StateCompleted, true},
		{"slurm-failed", schemas.SourceSlurm, schemas.StateFailed, true},
		{"slurm-cancelled", schemas.SourceSlurm, schemas.StateCancelled, true},
		{"slurm-timeout", schemas.SourceSlurm, schemas.StateTimeout, true},
		{"sim-done", schemas.SourceSim, schemas.StateCompleted, true},
		{"trace-unknown", schemas.SourceTrace, schemas.StateUnknown, true},
		{"trace-node-fail", schemas.SourceTrace, schemas.StateNodeFail, true},
		{"trace-preempted", schemas.SourceTrace, schemas.StatePreempted, true},
	}
	want := map[string]time.Duration{}
	kept := 0
	for _, tc := range cases {
		want[tc.id] = 0
		if tc.run {
			want[tc.id] = end.Sub(start)
			kept++
		}
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
	checkEndedRuns(t, recs, want)
	// The runs cut short neither train nor join the history.
	h := replay(recs, func(*rec) bool { return false }, nil)
	if n := h.Len(); n != kept {
		t.Errorf("history holds %d jobs; want %d", n, kept)
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

// TestLostJobFoundAgainScored: the Slurm source ends a job it lost track
// of as UNKNOWN and the predictor records its outcome unscored (ran = 0).
// Slurm lists the job again (an UPDATE puts it back to RUNNING) and it then
// completes: its outcome is rewritten with the real run time (replacing the
// first even though the predictor's clock was stepped back in between), and
// counted once in the rolling gauges and the interval correction, also by a
// restarted runner.
func TestLostJobFoundAgainScored(t *testing.T) {
	conn, db := historyDB(t)
	ctx := context.Background()
	now := t0.Add(30 * time.Hour)
	j := tjob{id: "lost", user: "alice", gpus: 2, limit: 4 * 3600, submit: now, start: now.Add(time.Minute)}
	insertFrom(t, conn, db, schemas.SourceSlurm, j)
	c := &clock{t: now.Add(2 * time.Minute)}
	r, _ := newRunner(t, conn, db, c)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	running := j.events()[1]
	send := func(evs ...schemas.JobEvent) {
		t.Helper()
		if err := ingest.InsertJobEvents(ctx, conn, db, "c1", schemas.SourceSlurm, evs); err != nil {
			t.Fatal(err)
		}
	}
	pass := func() Pass {
		t.Helper()
		p, err := r.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	lostAt := now.Add(5 * time.Minute)
	lost := running
	lost.Type, lost.State, lost.EndMillis, lost.EventMillis = schemas.JobEnd, schemas.StateUnknown, lostAt.UnixMilli(), lostAt.UnixMilli()
	send(lost)
	c.t = lostAt.Add(time.Minute)
	if p := pass(); p.Outcomes != 1 {
		t.Fatalf("pass after the loss = %+v; want 1 outcome", p)
	}
	if o := outcomesOf(t, conn, db, "lost")[now]; o.ran != 0 || o.state != schemas.StateUnknown.String() {
		t.Fatalf("premise: outcome of the lost job = %+v; want ran 0, UNKNOWN", o)
	}
	back := running
	back.Type, back.EventMillis = schemas.JobUpdate, lostAt.Add(2*time.Minute).UnixMilli()
	send(back)
	c.t = c.t.Add(time.Minute)
	if p := pass(); p.Outcomes != 0 {
		t.Errorf("pass after the job is listed again = %+v; want no outcome", p)
	}
	end := now.Add(time.Minute + 12*time.Minute)
	done := running
	done.Type, done.State, done.ExitCode, done.EndMillis, done.EventMillis = schemas.JobEnd, schemas.StateCompleted, 0, end.UnixMilli(), end.UnixMilli()
	send(done)
	// The predictor's clock has been stepped back an hour since it wrote
	// the lost outcome: the outcome of the later end must still win.
	c.t = lostAt.Add(-time.Hour)
	if p := pass(); p.Outcomes != 1 {
		t.Errorf("pass after the real end = %+v; want 1 outcome, rewritten", p)
	}
	if o := outcomesOf(t, conn, db, "lost")[now]; o.ran != 1 || o.actual != 12*60 || o.state != schemas.StateCompleted.String() {
		t.Errorf("outcome of the job found again = %+v; want ran 1, actual 720 s, COMPLETED", o)
	}
	want := r.adapt.State()
	if want.Observed != 1 || testutil.ToFloat64(r.m.rollingN) != 1 {
		t.Errorf("interval correction %+v, rolling outcomes %v; want the rewritten outcome counted once", want, testutil.ToFloat64(r.m.rollingN))
	}
	// A late copy of the end changes nothing; nor does a restart.
	done.EventMillis++
	send(done)
	c.t = c.t.Add(time.Minute)
	for _, restart := range []bool{false, true} {
		if restart {
			r, _ = newRunner(t, conn, db, c)
		}
		if p := pass(); p.Outcomes != 0 || p.Predictions != 0 {
			t.Errorf("pass (restart %v) after a late copy of the end = %+v; want nothing written", restart, p)
		}
		if got := r.adapt.State(); got != want || testutil.ToFloat64(r.m.rollingN) != 1 {
			t.Errorf("restart %v: interval correction %+v, rolling outcomes %v; want %+v, 1", restart, got, testutil.ToFloat64(r.m.rollingN), want)
		}
	}
}
