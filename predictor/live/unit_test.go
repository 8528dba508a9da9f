package live

import (
	"flag"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/predictor/duration"
)

func TestConfigValidate(t *testing.T) {
	var def Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	def.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if def.Interval != 15*time.Second || def.RetrainInterval != 10*time.Minute || def.History != 30*24*time.Hour || def.Holdout != 0.2 {
		t.Errorf("flag defaults = %+v", def)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"defaults", func(*Config) {}, true},
		{"zero means default", func(c *Config) { *c = Config{} }, true},
		{"negative interval", func(c *Config) { c.Interval = -time.Second }, false},
		{"negative history", func(c *Config) { c.History = -time.Hour }, false},
		{"retrain faster than passes", func(c *Config) { c.RetrainInterval = time.Second }, false},
		{"holdout 1", func(c *Config) { c.Holdout = 1 }, false},
		{"negative holdout", func(c *Config) { c.Holdout = -0.1 }, false},
		{"negative batch", func(c *Config) { c.Batch = -1 }, false},
		{"negative accuracy window", func(c *Config) { c.AccuracyWindow = -1 }, false},
		{"largest accuracy window", func(c *Config) { c.AccuracyWindow = MaxAccuracyWindow }, true},
		{"accuracy window above the cap", func(c *Config) { c.AccuracyWindow = MaxAccuracyWindow + 1 }, false},
	} {
		c := def
		tc.mod(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v; want ok %v", tc.name, err, tc.ok)
		}
	}
	if _, err := New(def, nil, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), time.Now); err == nil {
		t.Error("New without a database: no error")
	}
}

func TestNewRegistryErrors(t *testing.T) {
	cfg := Config{Database: "heliostat"}
	logger := slog.New(slog.DiscardHandler)
	if _, err := New(cfg, nil, logger, nil, time.Now); err == nil {
		t.Error("New with a nil registerer: no error")
	}
	reg := prometheus.NewRegistry()
	if _, err := New(cfg, nil, logger, reg, time.Now); err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, nil, logger, reg, time.Now); err == nil {
		t.Error("a second runner on the same registry: no error (its metrics would collide)")
	}
}

func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(Config{Database: "heliostat"}, nil, slog.New(slog.DiscardHandler), reg, time.Now); err != nil {
		t.Fatal(err)
	}
	lint(t, reg)
}

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		p      predRow
		actual float64
		want   outcome
	}{
		{predRow{point: 100, lower: 50, upper: 200}, 100, outcome{ran: true, actual: 100, within2x: true, inside: true}},
		{predRow{point: 100, lower: 50, upper: 150}, 199, outcome{ran: true, actual: 199, absError: 99, logRatio: math.Log(100.0 / 199), absLog: math.Log(1.99), within2x: true}},
		{predRow{point: 100, lower: 50, upper: 200}, 200, outcome{ran: true, actual: 200, absError: 100, logRatio: math.Log(0.5), absLog: math.Log(2), inside: true}},
		{predRow{point: 400, lower: 300, upper: 500}, 100, outcome{ran: true, actual: 100, absError: 300, logRatio: math.Log(4), absLog: math.Log(4)}},
		// A point under a second counts as a second, as in the backtest.
		{predRow{point: 0.2, lower: 0.1, upper: 0.5}, 1, outcome{ran: true, actual: 1, within2x: true}},
		{predRow{point: 100}, 0, outcome{}},
		{predRow{point: 100}, math.NaN(), outcome{}},
	} {
		got := outcomeOf(tc.p, tc.actual)
		if got.ran != tc.want.ran || got.within2x != tc.want.within2x || got.inside != tc.want.inside ||
			math.Abs(got.absError-tc.want.absError) > 1e-9 || math.Abs(got.logRatio-tc.want.logRatio) > 1e-9 || math.Abs(got.absLog-tc.want.absLog) > 1e-9 {
			t.Errorf("outcomeOf(%+v, %v) = %+v; want %+v", tc.p, tc.actual, got, tc.want)
		}
	}
}

func TestRolling(t *testing.T) {
	r := newRolling(3)
	if w, _, _ := r.stats(); !math.IsNaN(w) {
		t.Errorf("empty stats within2x = %v; want NaN", w)
	}
	for _, s := range []outcomeScore{{absLog: 9}, {absLog: 1, within2x: true}, {absLog: 2, inside: true}, {absLog: 3, within2x: true, inside: true}} {
		r.add(s)
	}
	w, a, c := r.stats()
	if r.len() != 3 || w != 2.0/3 || a != 2 || c != 2.0/3 {
		t.Errorf("stats of the last 3 = %v, %v, %v over %d; want 2/3, 2, 2/3 over 3 (the first dropped)", w, a, c, r.len())
	}
}

// trainedOn fits a model and builds the History from a synthetic workload,
// without ClickHouse, for the ad-hoc prediction tests.
func trainedOn(t testing.TB, n int) (*Trained, *historySnap) {
	t.Helper()
	base := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	var recs []*rec
	for i := range n {
		u := fmt.Sprint("u", i%4)
		start := base.Add(time.Duration(i) * 10 * time.Minute)
		run := time.Duration(60*(1+i%4)*(1+i%3)) * time.Second
		r := &rec{key: key{"c1", fmt.Sprint(i)}, user: u, ended: true, start: &start}
		r.job = duration.Job{User: scoped("c1", u), Queue: scoped("c1", "q"), Submit: start, ReqTime: 4 * time.Hour, Procs: 1 + i%4, Run: run, End: start.Add(run)}
		recs = append(recs, r)
	}
	return fitRecs(t, recs, base.Add(time.Duration(n)*10*time.Minute))
}

// fitRecs fits model version 7 on the ended jobs recs and builds the
// History of them as of asOf, the way a pass does.
func fitRecs(t testing.TB, recs []*rec, asOf time.Time) (*Trained, *historySnap) {
	t.Helper()
	var rows []duration.Row
	h := replay(recs, func(*rec) bool { return true }, func(r *rec, f duration.Features) {
		rows = append(rows, duration.Row{F: f, Y: math.Log(r.job.Run.Seconds())})
	})
	m, err := duration.Fit(rows, recs[0].job.Submit)
	if err != nil {
		t.Fatal(err)
	}
	return &Trained{Model: m, Info: ModelInfo{Version: 7}}, &historySnap{h: h, asOf: asOf}
}

// estimator returns estimate on tr and hs as a function of the spec alone,
// failing the test on an error.
func estimator(t *testing.T, tr *Trained, hs *historySnap) func(Spec) Estimate {
	return func(s Spec) Estimate {
		t.Helper()
		e, err := estimate(tr, hs, s, 1)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
}

func TestEstimate(t *testing.T) {
	tr, hs := trainedOn(t, 200)
	for _, tc := range []struct {
		spec Spec
		ok   bool
	}{
		{Spec{Cluster: "c1", User: "u1", GPUs: 2, TimeLimit: time.Hour}, true},
		{Spec{Cluster: "c1", User: "nobody"}, true},
		{Spec{Cluster: "c1", User: "u2", Submit: time.Date(2030, 1, 1, 3, 0, 0, 0, time.UTC)}, true},
		{Spec{Cluster: "c1", User: "u1", GPUs: -1}, false},
		{Spec{Cluster: "c1", User: "u1", TimeLimit: -time.Second}, false},
	} {
		e, err := estimate(tr, hs, tc.spec, 1)
		if (err == nil) != tc.ok {
			t.Errorf("estimate(%+v) error %v; want ok %v", tc.spec, err, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		if e.ModelVersion != 7 || !(e.LowerS <= e.PredictedS && e.PredictedS <= e.UpperS) || e.GPUServiceS != e.PredictedS*math.Max(float64(tc.spec.GPUs), 1) {
			t.Errorf("estimate(%+v) = %+v", tc.spec, e)
		}
		if tc.spec.TimeLimit > 0 && e.UpperS > tc.spec.TimeLimit.Seconds() {
			t.Errorf("estimate(%+v) = %+v; want capped at the limit", tc.spec, e)
		}
	}
}

// TestEstimateOpenJob: a spec naming an open recorded job takes its command
// and, when the spec has no GPUs, its processors from the record; the
// scheduler's fields are kept, GPU service counts the spec's GPUs.
func TestEstimateOpenJob(t *testing.T) {
	// Each user alternates two commands: "quick" runs a minute, "slow" an
	// hour, the same request otherwise; the fitted model tells them apart.
	// Submits are jittered by up to an hour, so that the time since the
	// user's last end does not tell them apart too.
	base := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []*rec
	for i := range 6000 {
		u, exe, run := fmt.Sprint("u", i%4), "quick", time.Minute
		if i/4%2 == 1 {
			exe, run = "slow", time.Hour
		}
		start := base.Add(time.Duration(i)*2*time.Minute + time.Duration(rng.Int64N(int64(time.Hour))))
		r := &rec{key: key{"c1", fmt.Sprint(i)}, user: u, ended: true, start: &start}
		r.job = duration.Job{User: scoped("c1", u), Executable: exe, Queue: scoped("c1", "q"), Submit: start, ReqTime: 4 * time.Hour, Procs: 2, Run: run, End: start.Add(run)}
		recs = append(recs, r)
	}
	tr, hs := fitRecs(t, recs, base.Add(6000*2*time.Minute))
	// The records' submit-time state is the user's now, as for a job
	// submitted now that no later job followed.
	u1 := hs.h.SubmitState(scoped("c1", "u1"))
	hs.open = map[key]openJob{{"c1", "slow"}: {Executable: "slow", Procs: 2, AtSubmit: u1}, {"c1", "cpu"}: {Executable: "slow", Procs: 2, AtSubmit: u1},
		{"c1", "nameless"}: {AtSubmit: u1}}
	est := estimator(t, tr, hs)
	slow := est(Spec{Cluster: "c1", User: "u1", Name: "slow", GPUs: 2, TimeLimit: 4 * time.Hour})
	quick := est(Spec{Cluster: "c1", User: "u1", Name: "quick", GPUs: 2, TimeLimit: 4 * time.Hour})
	if !slow.Fitted || slow.PredictedS < 4*quick.PredictedS {
		t.Fatalf("premise: slow %+v, quick %+v; want a fitted model that tells the commands apart", slow, quick)
	}
	for _, tc := range []struct {
		name string
		spec Spec
		want Estimate
	}{
		{"the record's command", Spec{Cluster: "c1", JobID: "slow", User: "u1", Name: "quick", GPUs: 2, TimeLimit: 4 * time.Hour}, slow},
		{"a record without a command keeps the name", Spec{Cluster: "c1", JobID: "nameless", User: "u1", Name: "quick", GPUs: 2, TimeLimit: 4 * time.Hour}, quick},
		{"another cluster's job, and its user", Spec{Cluster: "c2", JobID: "slow", User: "u1", Name: "quick", GPUs: 2, TimeLimit: 4 * time.Hour},
			est(Spec{Cluster: "c2", User: "u1", Name: "quick", GPUs: 2, TimeLimit: 4 * time.Hour})},
		{"the record's processors for a job without GPUs", Spec{Cluster: "c1", JobID: "cpu", User: "u1", Name: "quick", TimeLimit: 4 * time.Hour},
			est(Spec{Cluster: "c1", User: "u1", Name: "slow", GPUs: 2, TimeLimit: 4 * time.Hour})},
	} {
		got := est(tc.spec)
		if tc.spec.GPUs == 0 {
			tc.want.GPUServiceS = tc.want.PredictedS // service counts the spec's GPUs, at least 1
		}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if e := est(Spec{Cluster: "c1", JobID: "slow", User: "u1", GPUs: 2, TimeLimit: time.Minute}); e.PredictedS > 60 || e.UpperS > 60+duration.LimitGrace.Seconds() {
		t.Errorf("recorded job: %+v; want the spec's limit of 60 s to cap it (the interval at %v past it)", e, duration.LimitGrace)
	}
}

// twoProgramFit fits on 6,000 ended jobs of four users, each of whom
// alternates two programs of one request shape (a 4-hour limit) every four
// jobs, submitted 2 minutes apart with up to an hour's jitter (seeded by
// seed); set gives each job its width, run time and what tells the two
// programs apart (second: the second program).
func twoProgramFit(t *testing.T, seed uint64, set func(j *duration.Job, second bool)) (*Trained, *historySnap) {
	t.Helper()
	base := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	var recs []*rec
	for i := range 6000 {
		u := fmt.Sprint("u", i%4)
		start := base.Add(time.Duration(i)*2*time.Minute + time.Duration(rng.Int64N(int64(time.Hour))))
		r := &rec{key: key{"c1", fmt.Sprint(i)}, user: u, ended: true, start: &start}
		r.job = duration.Job{User: scoped("c1", u), Queue: scoped("c1", "q"), Submit: start, ReqTime: 4 * time.Hour}
		set(&r.job, i/4%2 == 1)
		r.job.End = start.Add(r.job.Run)
		recs = append(recs, r)
	}
	return fitRecs(t, recs, base.Add(6000*2*time.Minute))
}

// TestEstimateMemory: the requested memory tells apart a user's jobs of one
// request shape and no name: a spec's memory, else an open record's, picks
// the runs of that memory as the job's closest history.
func TestEstimateMemory(t *testing.T) {
	// Each user alternates two programs with the same time limit and GPUs:
	// with 8 GiB one runs a minute, with 64 GiB an hour.
	tr, hs := twoProgramFit(t, 3, func(j *duration.Job, second bool) {
		j.Procs, j.Mem, j.Run = 2, 8<<30, time.Minute
		if second {
			j.Mem, j.Run = 64<<30, time.Hour
		}
	})
	u1 := hs.h.SubmitState(scoped("c1", "u1"))
	hs.open = map[key]openJob{{"c1", "big"}: {Procs: 2, Mem: 64 << 30, AtSubmit: u1}}
	est := estimator(t, tr, hs)
	spec := Spec{Cluster: "c1", User: "u1", GPUs: 2, TimeLimit: 4 * time.Hour}
	small, big := spec, spec
	small.MemBytes, big.MemBytes = 8<<30, 64<<30
	s, b, none := est(small), est(big), est(spec)
	if !b.Fitted || b.PredictedS < 10*s.PredictedS {
		t.Errorf("64 GiB %+v, 8 GiB %+v; want a fitted model that tells the memory requests apart", b, s)
	}
	if none.PredictedS >= b.PredictedS || none.PredictedS <= s.PredictedS {
		t.Errorf("no memory %+v; want between 8 GiB's %v s and 64 GiB's %v s (all of the shape's runs)", none, s.PredictedS, b.PredictedS)
	}
	recorded := spec
	recorded.JobID = "big"
	if got := est(recorded); got != b {
		t.Errorf("recorded 64 GiB job, spec without memory: %+v; want the record's memory, %+v", got, b)
	}
	if _, err := estimate(tr, hs, Spec{Cluster: "c1", User: "u1", MemBytes: -1}, 1); err == nil {
		t.Error("negative memory: no error")
	}
}

// TestEstimateGPUType: on a cluster of two GPU types the type a job asks
// for tells apart a user's runs of one request shape: a spec's type, else
// an open record's, picks the runs on that type as the job's closest
// history.
func TestEstimateGPUType(t *testing.T) {
	// Each user runs one script alike on both types: on v100 it takes
	// 3 hours, on h100 40 minutes.
	tr, hs := twoProgramFit(t, 5, func(j *duration.Job, second bool) {
		j.Procs, j.GPUType, j.Run = 8, "v100", 3*time.Hour
		if second {
			j.GPUType, j.Run = "h100", 40*time.Minute
		}
	})
	u1 := hs.h.SubmitState(scoped("c1", "u1"))
	hs.open = map[key]openJob{{"c1", "slow"}: {Procs: 8, GPUType: "v100", AtSubmit: u1}}
	est := estimator(t, tr, hs)
	spec := Spec{Cluster: "c1", User: "u1", GPUs: 8, TimeLimit: 4 * time.Hour}
	v, h := spec, spec
	v.GPUType, h.GPUType = "v100", "h100"
	ev, eh, none := est(v), est(h), est(spec)
	if !ev.Fitted || ev.PredictedS < 3*eh.PredictedS {
		t.Errorf("v100 %+v, h100 %+v; want a fitted model that tells the GPU types apart", ev, eh)
	}
	if lo, hi := 0.9*(40*time.Minute).Seconds(), 1.1*(3*time.Hour).Seconds(); !none.Fitted || none.PredictedS < lo || none.PredictedS > hi {
		t.Errorf("no type %+v; want a fitted prediction within the shape's runs of either type, %.0f..%.0f s", none, lo, hi)
	}
	recorded := spec
	recorded.JobID = "slow"
	if got := est(recorded); got != ev {
		t.Errorf("recorded v100 job, spec without a type: %+v; want the record's type, %+v", got, ev)
	}
}

// FuzzEstimate feeds the ad-hoc prediction (the advisory API's input)
// arbitrary specs: it must answer or return an error, never panic, and an
// answer is finite, non-negative and within the limit.
func FuzzEstimate(f *testing.F) {
	tr, hs := trainedOn(f, 120)
	f.Add("u1", "exe", "q", 2, int64(3600), int64(1767225600))
	f.Add("", "", "", 0, int64(0), int64(0))
	f.Add("u\x00", "\xff", "q", -3, int64(-1), int64(-1<<40))
	f.Fuzz(func(t *testing.T, user, name, part string, gpus int, limitS, submit int64) {
		s := Spec{Cluster: "c1", User: user, Name: name, Partition: part, GPUs: gpus, TimeLimit: time.Duration(limitS) * time.Second}
		if submit != 0 {
			s.Submit = time.Unix(submit, 0)
		}
		e, err := estimate(tr, hs, s, 1)
		if err != nil {
			return
		}
		for _, v := range []float64{e.PredictedS, e.LowerS, e.UpperS, e.GPUServiceS} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("estimate(%+v) = %+v: not finite and non-negative", s, e)
			}
		}
		if s.TimeLimit > 0 && e.PredictedS > s.TimeLimit.Seconds() {
			t.Fatalf("estimate(%+v) = %+v: above the limit", s, e)
		}
	})
}

// TestOpenRecordsArray: a pending array named by its id takes the record of
// its task replayed first, whose submit-time state counts none of the
// other tasks, whatever order the window lists them in; an ended job has no
// open record.
func TestOpenRecordsArray(t *testing.T) {
	submit := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	task := func(id string) *rec {
		r := &rec{key: key{"c1", id}, user: "u", arrayJobID: "5"}
		r.job = duration.Job{User: "u", Executable: "e", Submit: submit, Procs: 2}
		return r
	}
	done := &rec{key: key{"c1", "4"}, user: "u", ended: true}
	done.job = duration.Job{User: "u", Executable: "e", Submit: submit.Add(-time.Hour), Run: time.Minute, End: submit.Add(-59 * time.Minute)}
	for _, order := range [][]string{{"5_1", "5_2", "5_3"}, {"5_3", "5_2", "5_1"}, {"5_2", "5_3", "5_1"}} {
		recs := []*rec{done}
		for _, id := range order {
			recs = append(recs, task(id))
		}
		replay(recs, func(*rec) bool { return false }, nil)
		open := openRecords(recs)
		want := openJob{Executable: "e", Procs: 2, Submit: submit, AtSubmit: duration.SubmitState{LastSubmit: done.job.Submit, LastEnd: done.job.End}}
		if got := open[key{"c1", "5"}]; got != want {
			t.Errorf("openRecords(%v)[array 5] = %+v; want %+v", order, got, want)
		}
		if got := open[key{"c1", "5_3"}].AtSubmit.InFlight; got != 2 {
			t.Errorf("openRecords(%v)[5_3] in flight at submit = %d; want 2 (5_1 and 5_2)", order, got)
		}
		if _, ok := open[done.key]; ok || len(open) != 4 {
			t.Errorf("openRecords(%v) = %v; want the three tasks and the array", order, open)
		}
	}
}
