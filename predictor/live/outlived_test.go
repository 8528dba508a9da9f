package live

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
)

// TestOutlivedJobScored: a predicted job still running when its submit
// falls out of --predictor.history is scored when it ends, by its run in
// job_runs, as long as its submit is within --predictor.outcome-wait; one
// that runs on past that is given up, counted and not scored. A restart in
// between (the predictions read back to the wait) changes nothing.
func TestOutlivedJobScored(t *testing.T) {
	withRestarts(t, func(t *testing.T, restart bool) {
		conn, db := historyDB(t)
		ctx := context.Background()
		now := t0.Add(30 * time.Hour)
		long := tjob{id: "long", user: "alice", gpus: 2, limit: 10 * 24 * 3600, submit: now, start: now.Add(time.Minute)}
		stuck := tjob{id: "stuck", user: "bob", gpus: 2, limit: 10 * 24 * 3600, submit: now, start: now.Add(time.Minute)}
		insertJobs(t, conn, db, long, stuck)
		c := &clock{t: now.Add(2 * time.Minute)}
		cfg := Config{Database: db, Interval: time.Second, RetrainInterval: 10 * time.Minute, History: 48 * time.Hour, OutcomeWait: 96 * time.Hour}
		r, reg := newRunnerCfg(t, conn, cfg, c)
		pass := func(at time.Time) {
			t.Helper()
			c.t = at
			if restart {
				r, reg = newRunnerCfg(t, conn, cfg, c)
			}
			if _, err := r.Once(ctx); err != nil {
				t.Fatal(err)
			}
		}
		pass(c.t)
		_, _, p := predictionOf(t, conn, db, "long")

		// Three days on, both have left the 2-day window, still running.
		f1 := now.Add(72 * time.Hour)
		insertJobs(t, conn, db, tjob{id: "f1", user: "carol", gpus: 2, limit: 3600, submit: f1, start: f1.Add(time.Minute), end: f1.Add(2 * time.Minute)})
		pass(f1.Add(3 * time.Minute))
		if o := outcomesOf(t, conn, db, "long"); len(o) != 0 {
			t.Fatalf("outcome of long before it ended: %+v", o)
		}
		if v := gaugeValue(t, reg, "heliostat_predictor_outlived_jobs"); v != 2 {
			t.Errorf("outlived jobs = %v; want 2 (long, stuck)", v)
		}

		// long ends 3 days on. Minutes after the last pass, with nothing
		// new in the window: the one runner's pass is one that only
		// records outcomes (no retrain, no replay), and still scores it.
		long.end = f1.Add(5 * time.Minute)
		evs := long.events()
		if err := ingest.InsertJobEvents(ctx, conn, db, "c1", schemas.SourceTrace, evs[len(evs)-1:]); err != nil {
			t.Fatal(err)
		}
		pass(long.end.Add(time.Minute))
		want := long.end.Sub(long.start).Seconds()
		if o, ok := outcomesOf(t, conn, db, "long")[now]; !ok || o.ran != 1 || o.actual != want || o.pred != p || o.user != "alice" {
			t.Errorf("outcome of long = %+v (found %v); want ran 1, actual %.0f s, its prediction %.0f s, alice", o, ok, want, p)
		}
		if v := gaugeValue(t, reg, "heliostat_predictor_outlived_jobs"); v != 1 {
			t.Errorf("outlived jobs = %v; want 1 (stuck)", v)
		}

		// Five days on, stuck's submit is past the 4-day wait: given up.
		f2 := now.Add(120 * time.Hour)
		insertJobs(t, conn, db, tjob{id: "f2", user: "carol", gpus: 2, limit: 3600, submit: f2, start: f2.Add(time.Minute), end: f2.Add(2 * time.Minute)})
		pass(f2.Add(3 * time.Minute))
		if o := outcomesOf(t, conn, db, "stuck"); len(o) != 0 {
			t.Errorf("outcome of stuck, never ended: %+v; want none", o)
		}
		abandoned := 1.0
		if restart {
			abandoned = 0 // the new runner never read its prediction back
		}
		if v := testutil.ToFloat64(r.m.abandoned); v != abandoned {
			t.Errorf("abandoned outcomes = %v; want %v", v, abandoned)
		}
		if v := gaugeValue(t, reg, "heliostat_predictor_outlived_jobs"); v != 0 {
			t.Errorf("outlived jobs = %v; want 0", v)
		}
		if o := outcomesOf(t, conn, db, "long"); len(o) != 1 {
			t.Errorf("outcomes of long = %+v; want its one", o)
		}
	})
}
