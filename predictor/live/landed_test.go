package live

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestModelInsertLandedThenFailed: the prediction_models insert of the first
// model lands but reports an error. The retrain at the next pass must not
// publish a second, different model under the version of the row that
// landed: every model_version names one model.
func TestModelInsertLandedThenFailed(t *testing.T) {
	conn, db := historyDB(t)
	ctx := context.Background()
	now := t0.Add(30 * time.Hour)
	insertJobs(t, conn, db, tjob{id: "p-alice", user: "alice", gpus: 2, limit: 4 * 3600, submit: now})
	c := &clock{t: now.Add(time.Minute)}
	r, _ := newRunner(t, &flakyConn{Conn: conn, failOnce: ".prediction_models ("}, db, c)
	if _, err := r.Once(ctx); !errors.Is(err, errInjected) {
		t.Fatalf("first pass = %v; want the injected error", err)
	}
	c.t = c.t.Add(time.Minute)
	pass, err := r.Once(ctx)
	if err != nil || !pass.Trained || pass.Predictions != 1 {
		t.Fatalf("second pass = %+v, %v; want a model and p-alice predicted", pass, err)
	}
	rows, err := conn.Query(ctx, "SELECT model_version, count() FROM "+db+".prediction_models FINAL GROUP BY model_version ORDER BY model_version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			v uint64
			n uint64
		)
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("prediction_models holds %d models of version %d; want 1", n, v)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if v := r.Model().Info.Version; v < 2 {
		t.Errorf("served model version %d; want above 1, the version of the row that landed", v)
	}
	if p, v := predictions(t, conn, db)["p-alice"], r.Model().Info.Version; p.version != v {
		t.Errorf("p-alice predicted by model %d; want the served model %d", p.version, v)
	}
}

// TestPredictionInsertLandedThenFailed: the predictions insert of p-alice
// lands but reports an error, and the next pass (a retrain) predicts it
// again. FINAL keeps the first prediction, the one that landed; the outcome
// of p-alice must score that prediction, not the retry the table dropped.
func TestPredictionInsertLandedThenFailed(t *testing.T) {
	conn, db := historyDB(t)
	ctx := context.Background()
	now := t0.Add(30 * time.Hour)
	alice := tjob{id: "p-alice", user: "alice", gpus: 2, limit: 4 * 3600, submit: now}
	insertJobs(t, conn, db, alice)
	c := &clock{t: now.Add(time.Minute)}
	r, _ := newRunner(t, &flakyConn{Conn: conn, failOnce: ".predictions ("}, db, c)
	if _, err := r.Once(ctx); !errors.Is(err, errInjected) {
		t.Fatalf("first pass = %v; want the injected error", err)
	}
	c.t = c.t.Add(11 * time.Minute)
	if pass, err := r.Once(ctx); err != nil || !pass.Trained {
		t.Fatalf("second pass = %+v, %v; want a retrain", pass, err)
	}
	alice.start, alice.end = now.Add(time.Minute), now.Add(11*time.Minute)
	insertJobs(t, conn, db, alice)
	c.t = c.t.Add(time.Minute)
	if pass, err := r.Once(ctx); err != nil || pass.Outcomes != 1 {
		t.Fatalf("pass after p-alice's end = %+v, %v; want its outcome", pass, err)
	}
	var (
		pVersion, oVersion uint64
		pAt, oAt           time.Time
		pLower, oLower     float64
		pUpper, oUpper     float64
	)
	if err := conn.QueryRow(ctx, "SELECT model_version, predicted_at, lower_s, upper_s FROM "+db+".predictions FINAL WHERE job_id = 'p-alice'").
		Scan(&pVersion, &pAt, &pLower, &pUpper); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT model_version, predicted_at, lower_s, upper_s FROM "+db+".prediction_outcomes FINAL WHERE job_id = 'p-alice'").
		Scan(&oVersion, &oAt, &oLower, &oUpper); err != nil {
		t.Fatal(err)
	}
	if oVersion != pVersion || !oAt.Equal(pAt) || oLower != pLower || oUpper != pUpper {
		t.Errorf("outcome of p-alice scores the prediction of model %d at %v [%.0f, %.0f] s; want the one predictions holds, model %d at %v [%.0f, %.0f] s",
			oVersion, oAt, oLower, oUpper, pVersion, pAt, pLower, pUpper)
	}
}
