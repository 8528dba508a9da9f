package duration

import (
	"math"
	"testing"
)

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
