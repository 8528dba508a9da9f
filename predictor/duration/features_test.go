package duration

import (
	"math"
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

func TestErrorByRunTime(t *testing.T) {
	for _, c := range []struct {
		name string
		s    []scored
		// want by range name: n, within 2x, share of the squared error,
		// the over-prediction part of it
		want map[string][4]float64
	}{
		{"none", nil, map[string][4]float64{}},
		{
			// A 10 s job predicted 40 s (2 ln 2 over), a 100 s one
			// predicted 50 s (ln 2 under, not within 2x: the ratio is 2),
			// a 5 h one exact, a 0.5 s one predicted 0.5 s (floored at
			// 1 s: ln 2 over).
			"split",
			[]scored{{pred: 40, true: 10}, {pred: 50, true: 100}, {pred: 5 * 3600, true: 5 * 3600}, {pred: 0.5, true: 0.5}},
			map[string][4]float64{
				"<1m":    {2, 0, 5.0 / 6, 5.0 / 6},
				"1m-10m": {1, 0, 1.0 / 6, 0},
				">=4h":   {1, 1, 0, 0},
			},
		},
		{
			// Exactly 60 s and 4 h open their ranges.
			"edges",
			[]scored{{pred: 60, true: 60}, {pred: 4 * 3600, true: 4 * 3600}},
			map[string][4]float64{"1m-10m": {1, 1, 0, 0}, ">=4h": {1, 1, 0, 0}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := errorByRunTime(c.s)
			names := []string{"<1m", "1m-10m", "10m-1h", "1h-4h", ">=4h"}
			if len(got) != len(names) {
				t.Fatalf("%d ranges; want %d", len(got), len(names))
			}
			var n int
			var share float64
			for i, b := range got {
				if b.Bucket != names[i] {
					t.Errorf("range %d is %q; want %q", i, b.Bucket, names[i])
				}
				if i > 0 && b.MinS != got[i-1].MaxS {
					t.Errorf("range %s starts at %v; the one before ends at %v", b.Bucket, b.MinS, got[i-1].MaxS)
				}
				w := c.want[b.Bucket]
				if b.N != int(w[0]) || math.Abs(b.Within2x-w[1]) > 1e-12 || math.Abs(b.SSEShare-w[2]) > 1e-12 || math.Abs(b.OverSSEShare-w[3]) > 1e-12 {
					t.Errorf("range %s: n %d, within 2x %v, sse share %v, over %v; want %v", b.Bucket, b.N, b.Within2x, b.SSEShare, b.OverSSEShare, w)
				}
				if len(c.s) > 0 && math.Abs(b.Share-float64(b.N)/float64(len(c.s))) > 1e-12 {
					t.Errorf("range %s: share %v of %d jobs with n %d", b.Bucket, b.Share, len(c.s), b.N)
				}
				n += b.N
				share += b.SSEShare
			}
			if n != len(c.s) {
				t.Errorf("ranges hold %d jobs; want %d", n, len(c.s))
			}
			if len(c.s) > 0 && c.want["<1m"][2] > 0 && math.Abs(share-1) > 1e-12 {
				t.Errorf("squared-error shares sum to %v; want 1", share)
			}
		})
	}
}
