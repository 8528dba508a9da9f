package main

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/analytics"
)

// TestPrintRunNoData: a window with no ended job and no GPU time prints "–"
// for its shares and median, not NaN% or 0%.
func TestPrintRunNoData(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		h    analytics.Headline
		want []string
		not  []string
	}{
		{
			name: "no ended job",
			h: analytics.Headline{Cluster: "c", Jobs: 1, GPUJobs: 1, Users: 1,
				StateShare:               map[string]float64{"completed": nan, "cancelled": nan, "failed": nan},
				DurationMedianS:          nan,
				Top5PctUsersGPUTimeShare: nan},
			want: []string{"completed –, cancelled –, failed –", "median run time – over 0 jobs", "hold – of GPU time"},
			not:  []string{"NaN", "0.0%"},
		},
		{
			name: "ended jobs",
			h: analytics.Headline{Cluster: "c", Jobs: 4, GPUJobs: 4, Users: 2, EndedJobs: 4, DurationJobs: 4,
				StateShare:               map[string]float64{"completed": 0.5, "cancelled": 0.25, "failed": 0.25, "unknown": 0},
				DurationMedianS:          120,
				Top5PctUsersGPUTimeShare: 0.75},
			want: []string{"completed 50.0%, cancelled 25.0%, failed 25.0%, unknown 0.0%", "median run time 120s over 4 jobs", "hold 75.0% of GPU time"},
			not:  []string{"NaN", "–"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printRun(&b, &analyticsRunOutput{RunResult: &analytics.RunResult{}, Headlines: []analytics.Headline{tc.h}})
			out := b.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
		})
	}
}
