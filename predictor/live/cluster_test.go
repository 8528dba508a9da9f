package live

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestHistoryPerCluster: two clusters share the database, and each has a
// user "alice" and a partition "batch". c1's alice runs 10-minute jobs
// (history()), c2's runs 6-hour ones, all ended before c1's. A pending c2
// job of alice's is predicted from c2's alice, in the predictions table
// and ad hoc, not from the other cluster's alice whose jobs ended last.
func TestHistoryPerCluster(t *testing.T) {
	ch, conn := schematest.Database(t)
	db := ch.Database
	ctx := context.Background()
	var c2 []tjob
	for i := range 12 {
		submit := t0.Add(-5*24*time.Hour + time.Duration(i)*7*time.Hour)
		c2 = append(c2, tjob{id: fmt.Sprintf("c2-%d", i), user: "alice", gpus: 2, limit: 12 * 3600, submit: submit,
			start: submit.Add(time.Minute), end: submit.Add(time.Minute + 6*time.Hour)})
	}
	pending := tjob{id: "c2-new", user: "alice", gpus: 2, limit: 12 * 3600, submit: t0.Add(30 * time.Hour)}
	c2 = append(c2, pending)
	var evs []schemas.JobEvent
	for _, j := range c2 {
		evs = append(evs, j.events()...)
	}
	if err := ingest.InsertJobEvents(ctx, conn, db, "c2", schemas.SourceTrace, evs); err != nil {
		t.Fatal(err)
	}
	insertJobs(t, conn, db, history()...) // c1
	c := &clock{t: pending.submit.Add(time.Minute)}
	r, _ := newRunner(t, conn, db, c)
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	const want = 6 * 3600.0
	var got float64
	if err := conn.QueryRow(ctx, "SELECT predicted_s FROM "+db+".predictions FINAL WHERE cluster = 'c2' AND job_id = 'c2-new'").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if !within2x(got, want) {
		t.Errorf("c2's pending job of alice predicted %.0f s; want within 2× of c2's alice's %.0f s (c1's alice runs 600 s)", got, want)
	}
	for _, cluster := range []string{"c2", "c1"} {
		e, err := r.Predict(Spec{Cluster: cluster, User: "alice", Partition: "batch", GPUs: 2, TimeLimit: 12 * time.Hour, Submit: pending.submit})
		if err != nil {
			t.Fatal(err)
		}
		w := want
		if cluster == "c1" {
			w = 600
		}
		if !within2x(e.PredictedS, w) {
			t.Errorf("ad hoc: %s's alice predicted %.0f s; want within 2× of %.0f s", cluster, e.PredictedS, w)
		}
	}
}
