package live

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/predictor/duration"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// asKnownAt returns copies of recs as they stood at time at: a job that had
// not ended strictly before at is not ended (no run time, no end), and jobs
// submitted after at do not exist yet.
func asKnownAt(recs []*rec, at time.Time) []*rec {
	var out []*rec
	for _, r := range recs {
		if r.job.Submit.After(at) {
			continue
		}
		c := *r
		if !r.ended || !r.job.End.Before(at) {
			c.ended, c.job.Run, c.job.End = false, 0, time.Time{}
		}
		out = append(out, &c)
	}
	return out
}

func featuresOf(recs []*rec, id string) (duration.Features, bool) {
	var (
		f  duration.Features
		ok bool
	)
	replay(recs, func(r *rec) bool { return r.jobID == id }, func(_ *rec, g duration.Features) { f, ok = g, true })
	return f, ok
}

// TestReplayIsCausal checks, for every job of a random workload with
// overlapping jobs, that the features replay gives it equal those computed
// from only what was known at its submit time: no job that ended at or after
// it, nor any later submission, changes them.
func TestReplayIsCausal(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var recs []*rec
	base := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for i := range 160 {
		r := &rec{key: key{"c1", fmt.Sprint(i)}, user: fmt.Sprint("u", rng.IntN(5)), version: 1}
		r.job = duration.Job{User: r.user, Executable: fmt.Sprint("exe", rng.IntN(3)), Queue: "q",
			Submit: base.Add(time.Duration(rng.IntN(48*60)) * time.Minute), ReqTime: time.Duration(1+rng.IntN(8)) * time.Hour, Procs: 1 + rng.IntN(8)}
		switch rng.IntN(10) {
		case 0: // still pending
		case 1: // cancelled while pending
			r.ended, r.job.End = true, r.job.Submit.Add(time.Minute)
		default:
			start := r.job.Submit.Add(time.Duration(rng.IntN(120)) * time.Minute)
			r.start = &start
			r.job.Run = time.Duration(30+rng.IntN(6*3600)) * time.Second
			r.ended, r.job.End = true, start.Add(r.job.Run)
		}
		recs = append(recs, r)
	}
	all := map[string]duration.Features{}
	replay(recs, func(*rec) bool { return true }, func(r *rec, f duration.Features) { all[r.jobID] = f })
	leaks := 0
	for _, r := range recs {
		known, ok := featuresOf(asKnownAt(recs, r.job.Submit), r.jobID)
		if !ok {
			t.Fatalf("job %s missing from its own replay", r.jobID)
		}
		if !reflect.DeepEqual(all[r.jobID], known) {
			t.Errorf("job %s (submit %v): replay features %+v; from what was known at submit %+v", r.jobID, r.job.Submit, all[r.jobID], known)
		}
		// The control: a History that also held the jobs ending after this
		// submit (a leak) would have given other features for some jobs.
		leaky := duration.NewHistory()
		for _, o := range recs {
			if o.ended && o.job.Run > 0 && o != r && o.job.Submit.Before(r.job.Submit) {
				leaky.Add(&o.job)
			}
		}
		if f := leaky.Features(&r.job); !reflect.DeepEqual(f.X, known.X) {
			leaks++
		}
	}
	if leaks == 0 {
		t.Fatal("no job's features would change with a leak: the workload does not test causality")
	}
}

// TestPredictionIsCausal writes a job's prediction through ClickHouse while
// another job of the same user, submitted earlier, ran far longer and ended
// only after the job's submit: the prediction must equal the one made from
// what was known at submit time, and differ from one that saw the long run.
func TestPredictionIsCausal(t *testing.T) {
	ch, conn := schematest.Database(t)
	db := ch.Database
	s := t0.Add(10 * time.Hour)
	var jobs []tjob
	for i := range 6 {
		submit := t0.Add(time.Duration(i) * time.Hour)
		jobs = append(jobs, tjob{id: fmt.Sprint("u-", i), user: "u", gpus: 1, limit: 8 * 3600, submit: submit,
			start: submit.Add(time.Minute), end: submit.Add(time.Minute + time.Duration(90+5*i)*time.Second)})
	}
	late := tjob{id: "late", user: "u", gpus: 1, limit: 8 * 3600, submit: s.Add(-10 * time.Minute), start: s.Add(-9 * time.Minute), end: s.Add(3 * time.Hour)}
	j := tjob{id: "J", user: "u", gpus: 1, limit: 8 * 3600, submit: s}
	insertJobs(t, conn, db, append(jobs, late, j)...)
	c := &clock{t: s.Add(4 * time.Hour)}
	r, _ := newRunner(t, conn, db, c)
	pass, err := r.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if pass.Predictions != 1 {
		t.Fatalf("pass = %+v; want 1 prediction (J)", pass)
	}
	got := predictions(t, conn, db)["J"]

	recs, _, err := loadJobs(context.Background(), conn, db, time.Unix(0, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	predict := func(recs []*rec) float64 {
		t.Helper()
		f, ok := featuresOf(recs, "J")
		if !ok {
			t.Fatal("J not in the window")
		}
		p, err := r.Model().Model.Predict(f, 8*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return p.Point.Seconds()
	}
	if want := predict(asKnownAt(recs, s)); got.predicted != want {
		t.Errorf("J predicted %v s; from what was known at its submit %v s", got.predicted, want)
	}
	// Had "late" ended before J's submit, J's prediction would differ.
	for _, rc := range recs {
		if rc.jobID == "late" {
			rc.job.End = s.Add(-time.Second)
		}
	}
	if leak := predict(recs); leak == got.predicted {
		t.Errorf("J's prediction %v s is the same with the 3-hour job in its history: the test does not test causality", leak)
	}
}
