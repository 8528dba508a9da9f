package live

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
)

// withRestarts runs f as two subtests: with one runner throughout, and
// with a new runner (a restart) wherever f makes one when restart is set.
func withRestarts(t *testing.T, f func(t *testing.T, restart bool)) {
	t.Run("one runner", func(t *testing.T) { f(t, false) })
	t.Run("restarted", func(t *testing.T) { f(t, true) })
}

// runOutcome is a prediction_outcomes row, as FINAL has it.
type runOutcome struct {
	user         string
	ran          uint8
	state        string
	pred, actual float64
	submit       time.Time
}

// outcomesOf returns job id's outcomes, one per run (FINAL keeps one per
// month of submit), by submit time in UTC (a map key compares locations too:
// a server whose time zone is "Etc/UTC" gives times of another location
// than time.UTC).
func outcomesOf(t *testing.T, conn driver.Conn, db, id string) map[time.Time]runOutcome {
	t.Helper()
	rows, err := conn.Query(context.Background(), "SELECT user, ran, state, predicted_s, actual_s, submit_time FROM "+db+".prediction_outcomes FINAL WHERE job_id = ?", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[time.Time]runOutcome{}
	for rows.Next() {
		var o runOutcome
		if err := rows.Scan(&o.user, &o.ran, &o.state, &o.pred, &o.actual, &o.submit); err != nil {
			t.Fatal(err)
		}
		out[o.submit.UTC()] = o
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// predictionOf returns the prediction FINAL holds for job id: its user,
// submit time and point.
func predictionOf(t *testing.T, conn driver.Conn, db, id string) (string, time.Time, float64) {
	t.Helper()
	var (
		user   string
		submit time.Time
		p      float64
	)
	if err := conn.QueryRow(context.Background(), "SELECT user, submit_time, predicted_s FROM "+db+".predictions FINAL WHERE job_id = ?", id).
		Scan(&user, &submit, &p); err != nil {
		t.Fatalf("prediction of %s: %v", id, err)
	}
	return user, submit.UTC(), p // UTC: see outcomesOf
}

// TestRequeuedJobPredictedPerRun: Slurm requeues job rq (same id, new
// submit time); the END of run 1 and the SUBMIT of run 2 reach ClickHouse
// together (one squeue poll), so the next pass sees only run 2 in jobs
// FINAL. Run 1's prediction is recorded unscored (ran = 0, run 1's submit
// and state), not scored against run 2's run time; run 2 gets a
// prediction of its own, scored when it ends. A restart between the two
// keeps it so.
func TestRequeuedJobPredictedPerRun(t *testing.T) {
	withRestarts(t, func(t *testing.T, restart bool) {
		conn, db := historyDB(t)
		ctx := context.Background()
		now := t0.Add(30 * time.Hour)
		run1 := tjob{id: "rq", user: "alice", gpus: 2, limit: 8 * 3600, submit: now, start: now.Add(time.Minute)}
		insertFrom(t, conn, db, schemas.SourceSlurm, run1)
		c := &clock{t: now.Add(2 * time.Minute)}
		r, _ := newRunner(t, conn, db, c)
		if _, err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
		_, sub1, p1 := predictionOf(t, conn, db, "rq")

		// Run 1 is preempted after 9 minutes and requeued.
		end1 := now.Add(10 * time.Minute)
		e1 := run1.events()[1] // START
		e1.Type, e1.State, e1.EndMillis, e1.EventMillis, e1.ExitCode = schemas.JobEnd, schemas.StatePreempted, end1.UnixMilli(), end1.UnixMilli(), 0
		sub2 := end1.Add(time.Second)
		run2 := tjob{id: "rq", user: "alice", gpus: 2, limit: 8 * 3600, submit: sub2, start: sub2.Add(2 * time.Minute), end: sub2.Add(2*time.Minute + 3*time.Hour)}
		evs2 := run2.events()
		if err := ingest.InsertJobEvents(ctx, conn, db, "c1", schemas.SourceSlurm, []schemas.JobEvent{e1, evs2[0]}); err != nil {
			t.Fatal(err)
		}
		c.t = end1.Add(time.Minute)
		if restart {
			r, _ = newRunner(t, conn, db, c)
		}
		if _, err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
		if _, sub, _ := predictionOf(t, conn, db, "rq"); !sub.Equal(sub2) {
			t.Errorf("prediction of rq after the requeue is of the run submitted %s; want run 2's, %s", sub, sub2)
		}
		if o, ok := outcomesOf(t, conn, db, "rq")[sub1]; !ok || o.ran != 0 || o.pred != p1 || o.state != schemas.StatePreempted.String() {
			t.Errorf("outcome of run 1 = %+v (found %v); want ran 0, its prediction %.0f s, PREEMPTED", o, ok, p1)
		}
		if err := ingest.InsertJobEvents(ctx, conn, db, "c1", schemas.SourceSlurm, evs2[1:]); err != nil {
			t.Fatal(err)
		}
		c.t = run2.end.Add(time.Minute)
		if restart {
			r, _ = newRunner(t, conn, db, c)
		}
		if _, err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
		_, _, p2 := predictionOf(t, conn, db, "rq")
		if o := outcomesOf(t, conn, db, "rq")[sub2]; o.ran != 1 || o.actual != 3*3600 || o.pred != p2 {
			t.Errorf("outcome of run 2 = %+v; want ran 1, actual 10800 s, run 2's prediction %.0f s", o, p2)
		}
	})
}

// TestReusedJobIDPredicted: slurmctld, restarted with a clean state,
// reuses id r5 for another user's job after the first r5 was predicted and
// scored. The new job is predicted and scored; the old job's outcome stays.
func TestReusedJobIDPredicted(t *testing.T) {
	conn, db := historyDB(t)
	ctx := context.Background()
	now := t0.Add(30 * time.Hour)
	old := tjob{id: "r5", user: "alice", gpus: 2, limit: 4 * 3600, submit: now}
	insertFrom(t, conn, db, schemas.SourceSlurm, old)
	c := &clock{t: now.Add(time.Minute)}
	r, _ := newRunner(t, conn, db, c)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	old.start, old.end = now.Add(time.Minute), now.Add(11*time.Minute)
	insertFrom(t, conn, db, schemas.SourceSlurm, old)
	c.t = old.end.Add(time.Minute)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	nw := tjob{id: "r5", user: "bob", gpus: 4, limit: 4 * 3600, submit: now.Add(2 * time.Hour)}
	insertFrom(t, conn, db, schemas.SourceSlurm, nw)
	c.t = nw.submit.Add(time.Minute)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if user, sub, _ := predictionOf(t, conn, db, "r5"); user != "bob" || !sub.Equal(nw.submit) {
		t.Errorf("prediction of r5 = %s's, submitted %s; want bob's new job, submitted %s", user, sub, nw.submit)
	}
	nw.start, nw.end = nw.submit.Add(time.Minute), nw.submit.Add(time.Hour+time.Minute)
	insertFrom(t, conn, db, schemas.SourceSlurm, nw)
	c.t = nw.end.Add(time.Minute)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	// Both runs are submitted in one month: FINAL keeps the latest outcome.
	if o := outcomesOf(t, conn, db, "r5")[nw.submit]; o.user != "bob" || o.ran != 1 || o.actual != 3600 {
		t.Errorf("outcome of the new r5 = %+v; want bob's, ran 1, actual 3600 s", o)
	}
}

// TestPredictionVersion: of two predictions of one run the first wins, of
// two runs the later run's, and every version is above those written before
// runs were told apart (2^63 - predicted_at in ms).
func TestPredictionVersion(t *testing.T) {
	sub := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	legacy := uint64(1<<63 - 1 - sub.UnixMilli())
	for _, tt := range []struct {
		name          string
		higher, lower uint64
	}{
		{"first prediction of a run", predictionVersion(sub, sub.Add(time.Second)), predictionVersion(sub, sub.Add(time.Minute))},
		{"prediction at the submit", predictionVersion(sub, sub), predictionVersion(sub, sub.Add(time.Second))},
		{"later run", predictionVersion(sub.Add(time.Second), sub.Add(time.Hour)), predictionVersion(sub, sub)},
		{"later run over an earlier run predicted at its submit", predictionVersion(sub.Add(time.Second), sub.Add(time.Second)), predictionVersion(sub, sub.Add(-time.Hour))},
		{"over the old scheme", predictionVersion(time.Unix(0, 0), time.Unix(1<<40, 0)), legacy},
	} {
		if tt.higher <= tt.lower {
			t.Errorf("%s: version %d; want above %d", tt.name, tt.higher, tt.lower)
		}
	}
}
