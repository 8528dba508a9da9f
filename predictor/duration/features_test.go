package duration

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestFeatureNames: numFeatures, checked on every prediction, is the length
// of each segment's feature list and of the vector FeaturesAt builds for it.
func TestFeatureNames(t *testing.T) {
	h := NewHistory()
	base := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	job := func(i int) *Job {
		return &Job{User: "u", Executable: "e", Queue: "q", Submit: base.Add(time.Duration(i) * time.Hour), ReqTime: time.Hour, Procs: 2,
			Run: 10 * time.Minute, End: base.Add(time.Duration(i)*time.Hour + 10*time.Minute)}
	}
	feats := map[Segment]Features{SegCold: h.Features(job(0))}
	h.Add(job(0))
	other := job(1)
	other.ReqTime = 2 * time.Hour // another request shape: no exact history
	feats[SegUser1] = h.Features(other)
	h.Add(job(1))
	feats[SegUser2] = h.Features(other)
	feats[SegExact] = h.Features(job(2))
	for _, s := range []Segment{SegExact, SegUser2, SegUser1, SegCold} {
		f := feats[s]
		if f.Segment != s {
			t.Fatalf("setup: features of segment %s; want %s", f.Segment, s)
		}
		if n, names := numFeatures(s), featureNames(s); n != len(names) || n != len(f.X) {
			t.Errorf("numFeatures(%s) = %d; want len(featureNames) %d = len(X) %d", s, n, len(names), len(f.X))
		}
	}
	if n := numFeatures(numSegments); n != 0 || featureNames(numSegments) != nil {
		t.Errorf("numFeatures(%s) = %d; want 0 and no names", numSegments, n)
	}
}

// TestInFlight: every ended job leaves its user's in-flight count, whether
// or not it ran; in flight never goes below zero.
func TestInFlight(t *testing.T) {
	base := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		submitted int
		ended     []time.Duration // run times of the jobs Added
		want      int
	}{
		{"none ended", 3, nil, 3},
		{"ran", 3, []time.Duration{time.Minute}, 2},
		{"never ran", 3, []time.Duration{0, 0}, 1},
		{"more ended than submitted", 1, []time.Duration{0, time.Minute, 0}, 0},
		{"ended, never submitted", 0, []time.Duration{0}, 0},
	} {
		h := NewHistory()
		for i := range tt.submitted {
			h.Submitted(&Job{User: "u", Submit: base.Add(time.Duration(i) * time.Second)})
		}
		for _, run := range tt.ended {
			h.Add(&Job{User: "u", Submit: base, Run: run, End: base.Add(time.Hour)})
		}
		if got := h.SubmitState("u").InFlight; got != tt.want {
			t.Errorf("%s: SubmitState(u).InFlight = %d; want %d", tt.name, got, tt.want)
		}
	}
}

// TestFeaturesPreferSameMemory: a job's same-shape features (exact_last,
// exact_median, exact_n) come from the user's runs of the same time limit,
// width and memory when there are any, else from those of the same time
// limit and width whatever their memory; a job without a known memory sees
// all of the shape's runs.
func TestFeaturesPreferSameMemory(t *testing.T) {
	base := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	h := NewHistory()
	// The user's history: two 8 GiB runs of 10 minutes, then one 64 GiB
	// run of 5 hours, all of one shape (1 h limit, 4 GPUs); and a job of
	// another shape.
	for i, r := range []struct {
		mem int64
		run time.Duration
		req time.Duration
	}{{8 << 30, 10 * time.Minute, time.Hour}, {8 << 30, 10 * time.Minute, time.Hour}, {64 << 30, 5 * time.Hour, time.Hour}, {8 << 30, time.Minute, 2 * time.Hour}} {
		sub := base.Add(time.Duration(i) * 10 * time.Hour)
		h.Add(&Job{User: "u", Submit: sub, ReqTime: r.req, Procs: 4, Mem: r.mem, Run: r.run, End: sub.Add(r.run)})
	}
	names := featureNames(SegExact)
	col := func(n string) int {
		for i, v := range names {
			if v == n {
				return i
			}
		}
		t.Fatalf("no feature %q", n)
		return -1
	}
	last, med, n := col("exact_last"), col("exact_median"), col("exact_n")
	ln := func(d time.Duration) float64 { return math.Log(d.Seconds()) }
	for _, tt := range []struct {
		name     string
		mem      int64
		wantLast float64
		wantMed  float64
		wantN    int
	}{
		{"same memory as the 10-minute runs", 8 << 30, ln(10 * time.Minute), ln(10 * time.Minute), 2},
		{"same memory as the 5-hour run", 64 << 30, ln(5 * time.Hour), ln(5 * time.Hour), 1},
		{"memory the shape never asked for: all of the shape", 16 << 30, ln(5 * time.Hour), ln(10 * time.Minute), 3},
		{"memory unknown: all of the shape", 0, ln(5 * time.Hour), ln(10 * time.Minute), 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := h.Features(&Job{User: "u", Submit: base.Add(100 * time.Hour), ReqTime: time.Hour, Procs: 4, Mem: tt.mem})
			if f.Segment != SegExact {
				t.Fatalf("segment %s; want exact", f.Segment)
			}
			if got := f.X[last]; math.Abs(got-tt.wantLast) > 1e-9 {
				t.Errorf("exact_last = %.4f; want %.4f", got, tt.wantLast)
			}
			if got := f.X[med]; math.Abs(got-tt.wantMed) > 1e-9 {
				t.Errorf("exact_median = %.4f; want %.4f", got, tt.wantMed)
			}
			if got, want := f.X[n], math.Log1p(float64(tt.wantN)); math.Abs(got-want) > 1e-9 {
				t.Errorf("exact_n = %.4f; want log1p(%d)", got, tt.wantN)
			}
		})
	}
}

// TestFeaturesPreferSameGPUType: on a cluster of several GPU types a job's
// same-shape features come from the user's runs of the same shape on the
// GPU type it asks for, and of the same memory too where there are such
// runs; a job that names no type, or a type the shape never ran on, sees
// the shape's runs as before (the same memory first).
func TestFeaturesPreferSameGPUType(t *testing.T) {
	base := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	h := NewHistory()
	// One shape (1 h limit, 4 GPUs): on v100 two 40-minute runs with 8
	// GiB; on h100 a 10-minute run with 8 GiB and a 20-minute run with 64
	// GiB; one untyped 8 GiB run of 30 minutes.
	for i, r := range []struct {
		typ string
		mem int64
		run time.Duration
	}{{"v100", 8 << 30, 40 * time.Minute}, {"v100", 8 << 30, 40 * time.Minute}, {"h100", 8 << 30, 10 * time.Minute}, {"h100", 64 << 30, 20 * time.Minute}, {"", 8 << 30, 30 * time.Minute}} {
		sub := base.Add(time.Duration(i) * 10 * time.Hour)
		h.Add(&Job{User: "u", Submit: sub, ReqTime: time.Hour, Procs: 4, Mem: r.mem, GPUType: r.typ, Run: r.run, End: sub.Add(r.run)})
	}
	names := featureNames(SegExact)
	last, med, n := slices.Index(names, "exact_last"), slices.Index(names, "exact_median"), slices.Index(names, "exact_n")
	ln := func(d time.Duration) float64 { return math.Log(d.Seconds()) }
	geo := func(a, b float64) time.Duration { return time.Duration(math.Sqrt(a*b) * float64(time.Minute)) }
	for _, tt := range []struct {
		name     string
		typ      string
		mem      int64
		wantLast time.Duration
		wantMed  time.Duration // the median of the logs: of two runs, their geometric mean
		wantN    int
	}{
		{"v100: its runs", "v100", 0, 40 * time.Minute, 40 * time.Minute, 2},
		{"h100: its runs of any memory", "h100", 0, 20 * time.Minute, geo(10, 20), 2},
		{"h100, 8 GiB: the one run of both", "h100", 8 << 30, 10 * time.Minute, 10 * time.Minute, 1},
		{"h100, memory it never asked for: its runs", "h100", 16 << 30, 20 * time.Minute, geo(10, 20), 2},
		{"v100, 64 GiB (never on v100): the v100 runs", "v100", 64 << 30, 40 * time.Minute, 40 * time.Minute, 2},
		{"a type the shape never ran on, 64 GiB: the shape's 64 GiB run", "a100", 64 << 30, 20 * time.Minute, 20 * time.Minute, 1},
		{"a type the shape never ran on: all of the shape", "a100", 0, 30 * time.Minute, 30 * time.Minute, 5},
		{"no type, 8 GiB: the shape's 8 GiB runs", "", 8 << 30, 30 * time.Minute, geo(30, 40), 4},
		{"no type: all of the shape", "", 0, 30 * time.Minute, 30 * time.Minute, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := h.Features(&Job{User: "u", Submit: base.Add(100 * time.Hour), ReqTime: time.Hour, Procs: 4, Mem: tt.mem, GPUType: tt.typ})
			if f.Segment != SegExact {
				t.Fatalf("segment %s; want exact", f.Segment)
			}
			if got := f.X[last]; math.Abs(got-ln(tt.wantLast)) > 1e-9 {
				t.Errorf("exact_last = %v; want %v", time.Duration(math.Exp(got)*float64(time.Second)).Round(time.Second), tt.wantLast)
			}
			if got := f.X[med]; math.Abs(got-ln(tt.wantMed)) > 1e-6 {
				t.Errorf("exact_median = %v; want %v", time.Duration(math.Exp(got)*float64(time.Second)).Round(time.Second), tt.wantMed)
			}
			if got, want := f.X[n], math.Log1p(float64(tt.wantN)); math.Abs(got-want) > 1e-9 {
				t.Errorf("exact_n = %.4f; want log1p(%d)", got, tt.wantN)
			}
		})
	}
}

func TestFeaturesRepeats(t *testing.T) {
	base := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		runs  []time.Duration // the user's earlier runs of the shape
		other bool            // an earlier run of another shape as well
		want  bool
	}{
		{"two runs of the same length", []time.Duration{10 * time.Minute, 10 * time.Minute}, false, true},
		{"within 1 %", []time.Duration{10 * time.Minute, 10*time.Minute + 3*time.Second}, false, true},
		{"10 % apart", []time.Duration{10 * time.Minute, 11 * time.Minute}, false, false},
		{"one run only", []time.Duration{10 * time.Minute}, true, false},
		{"a different length among the recent runs", []time.Duration{5 * time.Hour, 10 * time.Minute, 10 * time.Minute, 10 * time.Minute}, false, false},
		{"the different length no longer recent", []time.Duration{5 * time.Hour, time.Minute, time.Minute, time.Minute, time.Minute, time.Minute}, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHistory()
			add := func(i int, run, req time.Duration) {
				sub := base.Add(time.Duration(i) * 10 * time.Hour)
				h.Add(&Job{User: "u", Submit: sub, ReqTime: req, Procs: 4, Run: run, End: sub.Add(run)})
			}
			for i, r := range tt.runs {
				add(i, r, 6*time.Hour)
			}
			if tt.other {
				add(len(tt.runs), time.Minute, time.Hour)
			}
			f := h.Features(&Job{User: "u", Submit: base.Add(100 * time.Hour), ReqTime: 6 * time.Hour, Procs: 4})
			if f.Segment != SegExact {
				t.Fatalf("segment %s; want exact", f.Segment)
			}
			if f.Repeats != tt.want {
				t.Fatalf("Repeats = %v; want %v", f.Repeats, tt.want)
			}
			if want := math.Log(tt.runs[len(tt.runs)-1].Seconds()); f.Repeats && math.Abs(f.Repeat-want) > 0.01 {
				t.Errorf("Repeat = %.4f; want about %.4f", f.Repeat, want)
			}
		})
	}
}

// TestFeaturesIgnoreLocation: one instant gives one feature vector, in
// whatever location its time carries (jobs read from ClickHouse carry the
// server's time zone; API requests their own).
func TestFeaturesIgnoreLocation(t *testing.T) {
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	h := NewHistory()
	base := time.Date(2026, 3, 6, 20, 30, 0, 0, time.UTC) // Friday evening in UTC, Saturday morning in Shanghai
	for i := range 3 {
		s := base.Add(time.Duration(i-3) * time.Hour)
		h.Add(&Job{User: "u", Submit: s, ReqTime: time.Hour, Procs: 2, Run: 10 * time.Minute, End: s.Add(10 * time.Minute)})
	}
	job := Job{User: "u", Submit: base, ReqTime: time.Hour, Procs: 2}
	utc := h.Features(&job)
	job.Submit = base.In(shanghai)
	if local := h.Features(&job); !slices.Equal(local.X, utc.X) {
		t.Errorf("features of the same submit in Asia/Shanghai %v; in UTC %v", local.X, utc.X)
	}
}
