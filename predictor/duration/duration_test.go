package duration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// synthJobs makes n jobs of a few users whose run times depend on the user and
// the request, submitted over time, each ending after a random wait.
func synthJobs(n int, seed uint64) []Job {
	rng := rand.New(rand.NewPCG(seed, 1))
	t0 := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	jobs := make([]Job, n)
	at := t0
	for i := range jobs {
		at = at.Add(time.Duration(rng.IntN(600)) * time.Second)
		u := rng.IntN(20)
		req := time.Duration(600*(1+u%5)) * time.Second
		run := time.Duration(float64(req) * (0.2 + 0.6*rng.Float64()))
		wait := time.Duration(rng.IntN(3600)) * time.Second
		jobs[i] = Job{User: string(rune('a' + u)), Executable: string(rune('A' + u%3)), Queue: "q", Submit: at,
			ReqTime: req, Procs: 1 + u%4, Run: run, End: at.Add(wait + run)}
	}
	return jobs
}

// TestFeaturesUseOnlyEndedJobs proves the protocol: changing the outcome of
// every job that had not ended strictly before a job's submit time leaves that
// job's features unchanged.
func TestFeaturesUseOnlyEndedJobs(t *testing.T) {
	jobs := synthJobs(3000, 7)
	features := func(jobs []Job) map[time.Time]Features {
		out := map[time.Time]Features{}
		_, err := Backtest(t.Context(), jobs, BacktestConfig{onFeatures: func(j *Job, f Features) {
			out[j.Submit] = Features{Segment: f.Segment, X: append([]float64(nil), f.X...), Fallback: f.Fallback}
		}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := features(jobs)
	checked := 0
	for _, k := range []int{100, 1500, 2500, 2999} {
		target := jobs[k]
		corrupt := append([]Job(nil), jobs...)
		changed := 0
		for i := range corrupt {
			// Jobs that had not ended before the target's submit: a
			// different outcome, the same end (so the replay order is
			// unchanged).
			if !corrupt[i].End.Before(target.Submit) {
				corrupt[i].Run = corrupt[i].Run*7 + time.Second
				if i != k { // the target's own executable is its submit-time input
					corrupt[i].Executable += "x"
				}
				changed++
			}
		}
		got := features(corrupt)
		if !reflect.DeepEqual(got[target.Submit], want[target.Submit]) {
			t.Errorf("job %d: features changed when %d jobs that had not ended by its submit changed:\n got %v\nwant %v",
				k, changed, got[target.Submit], want[target.Submit])
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("nothing checked")
	}
}

// TestFeaturesSeeEndedJobs is the other half: a job that ended before the
// submit does change the features.
func TestFeaturesSeeEndedJobs(t *testing.T) {
	jobs := synthJobs(3000, 7)
	target := jobs[2500]
	var before, after Features
	cfg := func(dst *Features) BacktestConfig {
		return BacktestConfig{onFeatures: func(j *Job, f Features) {
			if j.Submit.Equal(target.Submit) {
				*dst = Features{Segment: f.Segment, X: append([]float64(nil), f.X...)}
			}
		}}
	}
	if _, err := Backtest(t.Context(), jobs, cfg(&before)); err != nil {
		t.Fatal(err)
	}
	corrupt := append([]Job(nil), jobs...)
	for i := range corrupt {
		if corrupt[i].End.Before(target.Submit) && corrupt[i].User == target.User {
			corrupt[i].Run *= 3
		}
	}
	if _, err := Backtest(t.Context(), corrupt, cfg(&after)); err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(before, after) {
		t.Error("features ignore the user's ended jobs")
	}
}

// TestFeaturesAt: the SubmitState taken before a job is Submitted gives,
// after it and later jobs are, the features it had at its submit (what a
// training row of it holds), where Features would count it as its own
// latest submit and in flight.
func TestFeaturesAt(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	h := NewHistory()
	for i := range 3 {
		j := Job{User: "u", Executable: "e", Queue: "q", Submit: t0.Add(time.Duration(i) * time.Hour), ReqTime: time.Hour, Procs: 1}
		h.Submitted(&j)
		j.Run, j.End = time.Duration(10+i)*time.Minute, j.Submit.Add(time.Duration(10+i)*time.Minute)
		h.Add(&j)
	}
	lastEnd := t0.Add(2*time.Hour + 12*time.Minute)
	pending := []Job{
		{User: "u", Executable: "e", Queue: "q", Submit: t0.Add(5 * time.Hour), ReqTime: time.Hour, Procs: 1},
		{User: "u", Executable: "e", Queue: "q", Submit: t0.Add(6 * time.Hour), ReqTime: time.Hour, Procs: 1},
		{User: "u", Executable: "e", Queue: "q", Submit: t0.Add(8 * time.Hour), ReqTime: time.Hour, Procs: 1},
	}
	var (
		states   []SubmitState
		atSubmit []Features
	)
	for i := range pending {
		states = append(states, h.SubmitState("u"))
		atSubmit = append(atSubmit, h.Features(&pending[i]))
		h.Submitted(&pending[i])
	}
	for i, tc := range []struct {
		state SubmitState
	}{
		{SubmitState{LastSubmit: t0.Add(2 * time.Hour), InFlight: 0, LastEnd: lastEnd}},
		{SubmitState{LastSubmit: t0.Add(5 * time.Hour), InFlight: 1, LastEnd: lastEnd}},
		{SubmitState{LastSubmit: t0.Add(6 * time.Hour), InFlight: 2, LastEnd: lastEnd}},
	} {
		if states[i] != tc.state {
			t.Errorf("SubmitState before pending job %d = %+v; want %+v", i, states[i], tc.state)
		}
		if got := h.FeaturesAt(&pending[i], states[i]); !reflect.DeepEqual(got, atSubmit[i]) {
			t.Errorf("FeaturesAt(pending job %d) = %v; want its features at submit %v", i, got, atSubmit[i])
		}
		if got := h.Features(&pending[i]); reflect.DeepEqual(got, atSubmit[i]) {
			t.Errorf("Features(pending job %d) after later submits = its features at submit: the test does not test FeaturesAt", i)
		}
	}
	if got := h.SubmitState("nobody"); got != (SubmitState{}) {
		t.Errorf("SubmitState(nobody) = %+v; want zero", got)
	}
	// The first pending job ends after the second's submit: re-predicted,
	// the second learns its run time but keeps the gap it was submitted
	// after (to the end at 2:12), where Features would find no gap at all.
	pending[0].Run, pending[0].End = 90*time.Minute, t0.Add(6*time.Hour+30*time.Minute)
	h.Add(&pending[0])
	names := featureNames(SegExact)
	sinceEnd, last1 := slices.Index(names, "since_end"), slices.Index(names, "last1")
	got := h.FeaturesAt(&pending[1], states[1])
	if want := atSubmit[1].X[sinceEnd]; got.X[sinceEnd] != want || want != math.Log1p((3*time.Hour+48*time.Minute).Seconds()) {
		t.Errorf("since_end re-predicted after a later end = %v; want %v, the gap at submit (3h48m)", got.X[sinceEnd], want)
	}
	if got.X[last1] == atSubmit[1].X[last1] {
		t.Errorf("last1 re-predicted = %v, as at submit: the later end was not learned", got.X[last1])
	}
}

// fitConstant fits a model on n synthetic jobs (synthJobs(n, seed)) that
// all "took" e^5 s, so that it predicts about e^5 whatever the features,
// and returns it with the history of those jobs and the jobs.
func fitConstant(t *testing.T, n int, seed uint64) (*Model, *History, []Job) {
	t.Helper()
	h := NewHistory()
	jobs := synthJobs(n, seed)
	var rows []Row
	for i := range jobs {
		rows = append(rows, Row{F: h.Features(&jobs[i]), Y: 5})
		h.Add(&jobs[i])
	}
	m, err := Fit(rows, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return m, h, jobs
}

func TestModelChecksInput(t *testing.T) {
	var m *Model
	if _, err := m.Predict(Features{}, 0); err != ErrNotTrained {
		t.Errorf("Predict on a nil model = %v; want ErrNotTrained", err)
	}
	m, _, _ = fitConstant(t, 500, 3)
	for _, f := range []Features{
		{Segment: SegCold, X: []float64{1}},
		{Segment: numSegments, X: nil},
		{Segment: SegCold, X: []float64{1, 1, 1, 1, 1, 1, 1, nan()}},
	} {
		if _, err := m.Predict(f, 0); err == nil {
			t.Errorf("Predict(%v) accepted bad input", f)
		}
	}
	if _, err := Fit([]Row{{F: Features{Segment: SegCold, X: []float64{1}}}}, time.Now()); err == nil {
		t.Error("Fit accepted a row with the wrong feature count")
	}
}

func nan() float64 { var z float64; return z / z }

func TestBacktestLearns(t *testing.T) {
	res, err := Backtest(t.Context(), synthJobs(20000, 11), BacktestConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// Run times are 20–80% of a per-user limit: the model must beat the
	// limit itself, and put most jobs within 2x.
	if res.Within2x < 0.8 || res.Within2x <= res.Baselines["reqtime"].Within2x {
		t.Errorf("within_2x = %.3f (reqtime baseline %.3f); want >= 0.8 and above the baseline", res.Within2x, res.Baselines["reqtime"].Within2x)
	}
	if res.NTrain+res.NTest != 20000 {
		t.Errorf("n_train + n_test = %d; want 20000", res.NTrain+res.NTest)
	}
	// Every test job is in exactly one segment, and the cold segment is the
	// cold-start figure reported apart.
	n := 0
	for name, m := range res.Segments {
		if m.N == 0 || m.IntervalCoverage == nil {
			t.Errorf("segment %s: n %d, interval_coverage %v; want jobs and an interval", name, m.N, m.IntervalCoverage)
		}
		n += m.N
	}
	if n != res.NTest {
		t.Errorf("segments hold %d test jobs; want n_test %d", n, res.NTest)
	}
	// So is every test job in exactly one run-time range.
	n = 0
	for _, b := range res.ByRunTime {
		n += b.N
	}
	if n != res.NTest || len(res.ByRunTime) != 5 {
		t.Errorf("%d run-time ranges hold %d test jobs; want 5 holding n_test %d", len(res.ByRunTime), n, res.NTest)
	}
	if cold, ok := res.Segments["cold"]; ok && (cold.N != res.Cold.N || cold.Within2x != res.Cold.Within2x) {
		t.Errorf("segment cold %+v differs from cold_start %+v", cold, res.Cold)
	}
}

func TestSegmentString(t *testing.T) {
	for s, want := range map[Segment]string{SegExact: "exact", SegUser2: "user2", SegUser1: "user1", SegCold: "cold", numSegments: "segment4"} {
		if got := s.String(); got != want {
			t.Errorf("Segment(%d).String() = %q; want %q", int(s), got, want)
		}
	}
}

func TestSpearman(t *testing.T) {
	for _, tc := range []struct {
		a, b []float64
		want float64
	}{
		{[]float64{1, 2, 3}, []float64{10, 20, 30}, 1},
		{[]float64{1, 2, 3}, []float64{3, 2, 1}, -1},
		{[]float64{1, 1, 1}, []float64{1, 2, 3}, 0},
	} {
		if got := spearman(tc.a, tc.b); got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("spearman(%v, %v) = %v; want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestBacktestProgressAndCancel checks that a backtest reports how far it
// has gone (every ProgressEvery jobs and after each refit, never backwards)
// and stops, with the context's cause, soon after its context is cancelled.
func TestBacktestProgressAndCancel(t *testing.T) {
	jobs := synthJobs(12000, 5)
	var seen []BacktestProgress
	res, err := Backtest(t.Context(), jobs, BacktestConfig{RefitEvery: 1000, Progress: func(p BacktestProgress) {
		seen = append(seen, p)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (len(jobs) - 1) / ProgressEvery; len(seen) != want+res.Refits {
		t.Errorf("%d progress calls; want %d (every %d of %d jobs) + %d refits", len(seen), want, ProgressEvery, len(jobs), res.Refits)
	}
	for i, p := range seen {
		if p.Total != len(jobs) || p.Done <= 0 || p.Done > p.Total || (i > 0 && (p.Done < seen[i-1].Done || p.Refits < seen[i-1].Refits)) {
			t.Fatalf("progress %d: %+v after %+v; want 0 < done <= total %d, never going back", i, p, seen[max(i-1, 0)], len(jobs))
		}
	}
	if last := seen[len(seen)-1]; last.Refits != res.Refits || res.Refits == 0 {
		t.Errorf("last progress %+v, result %d refits; want the refits counted, at least one", last, res.Refits)
	}

	stop := errors.New("operator pressed Ctrl-C")
	ctx, cancel := context.WithCancelCause(t.Context())
	var calls int
	_, err = Backtest(ctx, jobs, BacktestConfig{Progress: func(p BacktestProgress) {
		calls++
		if p.Done >= 3*ProgressEvery {
			cancel(stop)
		}
	}})
	if !errors.Is(err, stop) || !strings.Contains(err.Error(), fmt.Sprintf("stopped after %d of %d jobs", 3*ProgressEvery, len(jobs))) {
		t.Fatalf("cancelled backtest: %v; want it stopped after %d jobs, with the cause", err, 3*ProgressEvery)
	}
	if calls != 3 {
		t.Errorf("%d progress calls before stopping; want 3", calls)
	}
}

// TestFitWeighsRecentRows: a workload whose run times moved from e⁵ to e⁷ s
// halfway through the training rows. Weighted by age (the newest row
// weighs four times the oldest), the fit's level lies where the weights put
// it (6.333 in log seconds), nearer the newer runs; with equal weights it
// would lie halfway, at 6.0.
func TestFitWeighsRecentRows(t *testing.T) {
	for _, tc := range []struct {
		name         string
		first, later float64
		want         float64
	}{
		{"runs grew", 5, 7, 19.0 / 3},
		{"runs shrank", 7, 5, 17.0 / 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 2 * RecencyHalfLife
			rows := make([]Row, n)
			for i := range rows {
				rows[i] = Row{F: Features{Segment: SegCold, X: make([]float64, numColdFeatures)}, Y: tc.first}
				if i >= n/2 {
					rows[i].Y = tc.later
				}
			}
			m, err := Fit(rows, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			y, _, _, fitted := m.raw(rows[0].F)
			if !fitted {
				t.Fatal("the cold segment was not fitted")
			}
			// Each half's weight sum: ∫ 2^(−a/H) over its ages, in the
			// ratio 1 : 2 (old : new), so the weighted mean is
			// (1·first + 2·later) / 3. Both halves lie within the Huber
			// threshold (huberThreshold: 0.7 robust standard deviations
			// of residuals of 2/3 and 4/3, 1.38), so the fit is that mean.
			if math.Abs(y-tc.want) > 0.02 {
				t.Errorf("fitted level %.3f; want %.2f", y, tc.want)
			}
		})
	}
}

// TestFitCore: a user2 segment with rows for its core features but not for
// all 53 fits on the core alone (a feature outside it gets a coefficient of
// exactly 0 even where the run times depend on it); with rows for all it
// fits all; with too few even for the core it keeps its history rule.
func TestFitCore(t *testing.T) {
	names := featureNames(SegUser2)
	last1, hour := slices.Index(names, "last1"), slices.Index(names, "hour_sin")
	full := rowsPerFeature * numUser2Features
	for _, tc := range []struct {
		name       string
		n          int
		fitted     bool
		hourWeight float64 // want hour_sin's coefficient within 0.05
	}{
		{"too few for the core", rowsPerFeature*len(coreFeatures(SegUser2)) - 1, false, 0},
		{"core only", full / 2, true, 0},
		{"just short of all", full - 1, true, 0},
		{"all features", full, true, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			rows := make([]Row, tc.n)
			for i := range rows {
				x := make([]float64, numUser2Features)
				for k := range x {
					x[k] = rng.NormFloat64()
				}
				y := 2 + 0.8*x[last1] + 0.5*x[hour] + 0.1*rng.NormFloat64()
				rows[i] = Row{F: Features{Segment: SegUser2, X: x, Fallback: 3}, Y: y}
			}
			m, err := Fit(rows, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			sm := m.segs[SegUser2]
			if (sm != nil) != tc.fitted {
				t.Fatalf("fitted %v; want %v", sm != nil, tc.fitted)
			}
			if sm == nil {
				return
			}
			core := coreColumns(SegUser2)
			for c := range numUser2Features {
				inCore := slices.Contains(core, c)
				if tc.hourWeight == 0 && !inCore && sm.coef[c+1] != 0 {
					t.Errorf("core fit: %s's coefficient %v; want 0", names[c], sm.coef[c+1])
				}
			}
			if got := sm.coef[last1+1]; math.Abs(got-0.8) > 0.05 {
				t.Errorf("last1's coefficient %.3f; want 0.8", got)
			}
			if got := sm.coef[hour+1]; math.Abs(got-tc.hourWeight) > 0.05 {
				t.Errorf("hour_sin's coefficient %.3f; want %.1f", got, tc.hourWeight)
			}
			// Through Predict: a job that differs only outside the core
			// gets the same point from a core fit.
			x := slices.Clone(rows[0].F.X)
			a, err := m.Predict(Features{Segment: SegUser2, X: x}, 0)
			if err != nil {
				t.Fatal(err)
			}
			x[hour] += 2
			b, err := m.Predict(Features{Segment: SegUser2, X: x}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !a.Fitted || (a.Point == b.Point) != (tc.hourWeight == 0) {
				t.Errorf("points %v and %v (hour_sin +2), fitted %v; want equal only for a core fit", a.Point, b.Point, a.Fitted)
			}
		})
	}
}

// TestHuberThreshold: the threshold is huberSigmas robust standard
// deviations of the residuals, never below huberK, also when it reads a
// strided sample of many residuals.
func TestHuberThreshold(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		sd   float64
		want float64
	}{
		{"no residuals", 0, 1, huberK},
		{"tight: huberK", 5000, 0.3, huberK},
		{"wide", 5000, 3, huberSigmas * 3},
		{"wide, sampled", 100_000, 3, huberSigmas * 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			res := make([]float64, tc.n)
			for i := range res {
				res[i] = tc.sd * rng.NormFloat64()
			}
			scratch := make([]float64, 0, min(tc.n, scaleSample))
			if got := huberThreshold(res, scratch); math.Abs(got-tc.want) > 0.05*tc.want {
				t.Errorf("threshold %.3f; want %.3f", got, tc.want)
			}
		})
	}
}

// TestFitScalesHuber: a segment whose run times scatter widely and lean to
// one side (70 % around e⁸ s with a spread of 2, 30 % dying near e² s).
// The fitted level is the Huber estimate whose threshold follows the
// residuals' spread at every pass (huberThreshold), computed here by the
// same reweighting on a constant; a fixed threshold of huberK would put it
// elsewhere.
func TestFitScalesHuber(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	n := 6000
	rows := make([]Row, n)
	ys := make([]float64, n)
	for i := range rows {
		ys[i] = 8 + 2*rng.NormFloat64()
		if rng.Float64() < 0.3 {
			ys[i] = 2 + 0.5*rng.NormFloat64()
		}
		rows[i] = Row{F: Features{Segment: SegCold, X: make([]float64, numColdFeatures)}, Y: ys[i]}
	}
	m, err := Fit(rows, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got, _, _, fitted := m.raw(rows[0].F)
	if !fitted {
		t.Fatal("the cold segment was not fitted")
	}
	// level reweights a constant fit huberIterations times, as fitSegment
	// does, with threshold k(residuals).
	level := func(k func(res []float64) float64) float64 {
		w := make([]float64, n)
		for i := range w {
			w[i] = recencyWeight(n - 1 - i)
		}
		res := make([]float64, n)
		var mu float64
		for range huberIterations {
			var sw, swy float64
			for i, y := range ys {
				sw += w[i]
				swy += w[i] * y
			}
			mu = swy / sw
			for i, y := range ys {
				res[i] = y - mu
			}
			kk := k(res)
			for i, r := range res {
				w[i] = recencyWeight(n - 1 - i)
				if math.Abs(r) > kk {
					w[i] *= kk / math.Abs(r)
				}
			}
		}
		return mu
	}
	scaled := level(func(res []float64) float64 {
		abs := make([]float64, len(res))
		for i, r := range res {
			abs[i] = math.Abs(r)
		}
		slices.Sort(abs)
		return max(huberK, huberSigmas*abs[len(abs)/2]/0.6745)
	})
	fixed := level(func([]float64) float64 { return huberK })
	if math.Abs(scaled-fixed) < 0.1 {
		t.Fatalf("premise: levels %.3f (scaled) and %.3f (fixed) too close to tell apart", scaled, fixed)
	}
	if math.Abs(got-scaled) > 0.01 {
		t.Errorf("fitted level %.3f; want %.3f (a fixed threshold would give %.3f)", got, scaled, fixed)
	}
}

// TestPredictKeepsRepeatBand checks that a repeated run time holds the
// point within RepeatBand of it and the interval around the point, and
// that nothing moves without one.
func TestPredictKeepsRepeatBand(t *testing.T) {
	m, h, jobs := fitConstant(t, 2000, 5)
	f := h.Features(&jobs[len(jobs)-1])
	if f.Segment != SegExact {
		t.Fatalf("segment %s; want exact", f.Segment)
	}
	for _, tt := range []struct {
		name    string
		repeats bool
		repeat  float64
		want    float64 // log seconds
	}{
		{"no repeat", false, 9, 5},
		{"repeat far above", true, 9, 9 - RepeatBand},
		{"repeat far below", true, 2, 2 + RepeatBand},
		{"repeat within the band", true, 5.2, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := f
			g.Repeats, g.Repeat = tt.repeats, tt.repeat
			p, err := m.Predict(g, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := math.Log(p.Point.Seconds()); math.Abs(got-tt.want) > 1e-3 {
				t.Errorf("point e^%.4f s; want e^%.4f", got, tt.want)
			}
			if !p.Covers(p.Point) {
				t.Errorf("interval %v..%v leaves out its point %v", p.Low, p.High, p.Point)
			}
		})
	}
	g := f
	g.Repeats, g.Repeat = true, nan()
	if _, err := m.Predict(g, 0); err == nil {
		t.Error("Predict accepted a repeated run time that is not finite")
	}
}
