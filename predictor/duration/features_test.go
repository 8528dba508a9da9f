package duration

import (
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
