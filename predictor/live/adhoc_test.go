package live

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestAdhocMatchesPrediction: the ad-hoc prediction of a pending job the
// runner has recorded (the control loop names it by id, with its submit
// time) equals the runner's own row for it in predictions when no job ended
// since: both take the user's previous submit and jobs in flight as they
// were at its submit, although the pass's History counts the job itself and
// the user's later jobs as submitted. The workload's run times depend on the
// time since the user's previous submit, so the fitted model reads it.
func TestAdhocMatchesPrediction(t *testing.T) {
	ch, conn := schematest.Database(t)
	db := ch.Database
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	const users = 3
	var hist []tjob
	at := t0
	for i := range 3000 {
		u := fmt.Sprint("u", i%users)
		gap := time.Duration(rng.ExpFloat64()*3600) * time.Second
		at = at.Add((gap / users).Truncate(time.Second))
		run := 600.0 * float64(1+i%users)
		if gap > 20*time.Minute {
			run *= 2
		}
		start := at.Add(time.Minute)
		hist = append(hist, tjob{id: fmt.Sprint("h", i), user: u, gpus: 1, limit: 86400, submit: at, start: start,
			end: start.Add(time.Duration(run*(0.8+0.4*rng.Float64())) * time.Second)})
	}
	insertJobs(t, conn, db, hist...)
	// Every job of the history has ended before the first pending submit;
	// each user then submits three jobs, 20 and 30 minutes apart.
	now := at.Add(6 * time.Hour)
	var pending []tjob
	for i := range users {
		for k, off := range []time.Duration{0, 20 * time.Minute, 50 * time.Minute} {
			pending = append(pending, tjob{id: fmt.Sprintf("p%d-%d", i, k), user: fmt.Sprint("u", i), gpus: 1, limit: 86400, submit: now.Add(off + time.Duration(i)*time.Minute)})
		}
	}
	insertJobs(t, conn, db, pending...)
	r, _ := newRunner(t, conn, db, &clock{t: now.Add(2 * time.Hour)})
	if _, err := r.Once(ctx); err != nil {
		t.Fatal(err)
	}
	preds := predictions(t, conn, db)
	differs := 0
	for _, j := range pending {
		p, ok := preds[j.id]
		if !ok {
			t.Fatalf("no prediction row for %s", j.id)
		}
		spec := Spec{Cluster: "c1", JobID: j.id, User: j.user, Name: "train-" + j.user, Partition: "batch", GPUs: 1, TimeLimit: 86400 * time.Second, Submit: j.submit}
		for _, s := range []Spec{spec, func() Spec { s := spec; s.Submit = time.Time{}; return s }()} {
			e, err := r.Predict(s)
			if err != nil {
				t.Fatal(err)
			}
			if e.PredictedS != p.predicted || e.LowerS != p.lower || e.UpperS != p.upper || e.Segment != p.segment || e.ModelVersion != p.version {
				t.Errorf("Predict(%s, submit %v) = %.1f s [%.1f, %.1f] %s model %d; want its row %.1f s [%.1f, %.1f] %s model %d",
					j.id, s.Submit, e.PredictedS, e.LowerS, e.UpperS, e.Segment, e.ModelVersion, p.predicted, p.lower, p.upper, p.segment, p.version)
			}
		}
		// The control: the same job not named, its features as the pass's
		// History stands (itself and later jobs counted as submitted).
		anon := spec
		anon.Cluster, anon.JobID = "", ""
		if e, err := r.Predict(anon); err != nil {
			t.Fatal(err)
		} else if e.PredictedS != p.predicted {
			differs++
		}
	}
	if differs == 0 {
		t.Error("no unnamed job's prediction differs from its row: the test does not test the features at submit")
	}
}
