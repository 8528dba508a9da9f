package live

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestReusedIDOfBacklogPredicted: the first pass after a (re)start leaves
// the jobs already ended unpredicted (backlog, history rather than work), and
// a later version of such a job stays so; but a new job under the id of one
// of them (slurmctld restarted with a clean state, a finished job requeued)
// is work: it is predicted, whether the next pass reads it incrementally or
// at a retrain.
func TestReusedIDOfBacklogPredicted(t *testing.T) {
	for _, full := range []bool{false, true} {
		t.Run(map[bool]string{false: "incremental", true: "retrain"}[full], func(t *testing.T) {
			conn, db := historyDB(t)
			ctx := context.Background()
			at := t0.Add(30 * time.Hour)
			old := tjob{id: "r7", user: "alice", gpus: 2, limit: 4 * 3600, submit: at, start: at.Add(time.Minute), end: at.Add(11 * time.Minute)}
			insertFrom(t, conn, db, schemas.SourceSlurm, old)
			c := &clock{t: old.end.Add(time.Minute)}
			r, _ := newRunner(t, conn, db, c) // started after r7 ended
			if _, err := r.Once(ctx); err != nil {
				t.Fatal(err)
			}
			nw := tjob{id: "r7", user: "bob", gpus: 4, limit: 4 * 3600, submit: old.end.Add(time.Minute)}
			insertFrom(t, conn, db, schemas.SourceSlurm, nw)
			c.t = nw.submit.Add(time.Minute) // before the next retrain: an incremental read
			if full {
				c.t = nw.submit.Add(20 * time.Minute) // a retrain: the whole window read again
			}
			for range 2 {
				if _, err := r.Once(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var users []string
			rows, err := conn.Query(ctx, "SELECT user FROM "+db+".predictions FINAL WHERE job_id = 'r7'")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var u string
				if err := rows.Scan(&u); err != nil {
					t.Fatal(err)
				}
				users = append(users, u)
			}
			if got := strings.Join(users, ","); got != "bob" {
				t.Errorf("predictions of job r7 for users %q; want one, the new job's (bob): the ended alice's is backlog", got)
			}
		})
	}
}

// TestCalibrationNeedsHeldOutRows: a new cluster's first model, on 5 ended
// jobs, has 1 held-out row. Its intervals are not calibrated on that row, as
// duration.FitCalibrated calibrates only on MinCalibrationRows: with one row
// the 80 % split-conformal quantile does not exist, and that row's own error
// (ln(606/600) ≈ 0.01 of the interval's offsets) as the scale would shrink
// the "80 %" interval to ±1 %. The history rule's interval is ×e^±1.
func TestCalibrationNeedsHeldOutRows(t *testing.T) {
	ch, conn := schematest.Database(t)
	db := ch.Database
	ctx := context.Background()
	var jobs []tjob
	for i, run := range []time.Duration{600, 600, 600, 600, 606} {
		sub := t0.Add(time.Duration(i) * time.Hour)
		jobs = append(jobs, tjob{id: string(rune('a' + i)), user: "alice", gpus: 2, limit: 4 * 3600, submit: sub, start: sub, end: sub.Add(run * time.Second)})
	}
	next := tjob{id: "z", user: "alice", gpus: 2, limit: 4 * 3600, submit: t0.Add(6 * time.Hour)}
	insertJobs(t, conn, db, append(jobs, next)...)
	r, _ := newRunner(t, conn, db, &clock{t: next.submit.Add(time.Minute)})
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	p := predictions(t, conn, db)["z"]
	if p.upper/p.lower < 7 {
		t.Errorf("job z: 80%% interval [%.0f, %.0f] s (×%.3f wide); want the uncalibrated history rule's, ×e^2 ≈ 7.4 wide", p.lower, p.upper, p.upper/p.lower)
	}
}
