package ingest

import (
	"testing"
	"time"
)

// TestSummarizeEnergy: a GPU's energy is its counter's rise between its
// first and last sample in the run plus the rest of the run at its mean
// power, or, without a counter, its mean power over the whole run. Before,
// both left out the time outside the samples' span: a run shorter than one
// sample interval (a single sample per GPU) had 0 J. A counter that reset
// in the run (its first sample not its lowest, or its last not its highest)
// counts as none; before, its max − min was taken as the run's energy.
func TestSummarizeEnergy(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	u64 := func(v uint64) *uint64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name    string
		elapsed time.Duration
		stats   []gpuStats
		want    *float64
	}{
		{"one sample, counter", 9 * time.Second, []gpuStats{
			{samples: 1, powerMeanMW: f64(480_000), energyMin: u64(5_000_000), energyMax: u64(5_000_000),
				energyFirst: u64(5_000_000), energyLast: u64(5_000_000), firstSec: 100, lastSec: 100},
		}, f64(480 * 9)},
		{"one sample, no counter", 9 * time.Second, []gpuStats{
			{samples: 1, powerMeanMW: f64(480_000), firstSec: 100, lastSec: 100},
		}, f64(480 * 9)},
		{"samples every 10 s, 5 s uncovered at each end", 60 * time.Second, []gpuStats{
			{samples: 6, powerMeanMW: f64(200_000), energyMin: u64(0), energyMax: u64(11_000_000),
				energyFirst: u64(0), energyLast: u64(11_000_000), firstSec: 105, lastSec: 155},
		}, f64(11_000 + 200*10)},
		{"samples spanning the run", 60 * time.Second, []gpuStats{
			{samples: 7, powerMeanMW: f64(200_000), energyMin: u64(0), energyMax: u64(13_000_000),
				energyFirst: u64(0), energyLast: u64(13_000_000), firstSec: 100, lastSec: 160},
		}, f64(13_000)},
		{"two GPUs, one without power or counter", 60 * time.Second, []gpuStats{
			{samples: 7, powerMeanMW: f64(100_000), energyMin: u64(0), energyMax: u64(7_000_000),
				energyFirst: u64(0), energyLast: u64(7_000_000), firstSec: 100, lastSec: 160},
			{samples: 7, index: 1, firstSec: 100, lastSec: 160},
		}, f64(7_000)},
		{"counter reset in the run, below its first: mean power over the run", 60 * time.Second, []gpuStats{
			{samples: 7, powerMeanMW: f64(100_000), energyMin: u64(0), energyMax: u64(5_003_000_000),
				energyFirst: u64(5_000_000_000), energyLast: u64(3_000_000), firstSec: 100, lastSec: 160},
		}, f64(6_000)},
		{"counter reset in the run, its last not its highest: mean power over the run", 60 * time.Second, []gpuStats{
			{samples: 7, powerMeanMW: f64(100_000), energyMin: u64(0), energyMax: u64(4_000_000),
				energyFirst: u64(0), energyLast: u64(3_000_000), firstSec: 100, lastSec: 160},
		}, f64(6_000)},
		{"counter reset, no power: none", 60 * time.Second, []gpuStats{
			{samples: 7, energyMin: u64(0), energyMax: u64(5_003_000_000),
				energyFirst: u64(5_000_000_000), energyLast: u64(3_000_000), firstSec: 100, lastSec: 160},
		}, nil},
		{"no power, no counter", 60 * time.Second, []gpuStats{{samples: 7, firstSec: 100, lastSec: 160}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := summaryJob{cluster: "c", jobID: "1", start: start, end: start.Add(tc.elapsed)}
			r := summarize(j, len(tc.stats), tc.stats)
			switch {
			case tc.want == nil && r.energyJ != nil:
				t.Errorf("energy_j = %v; want none", *r.energyJ)
			case tc.want != nil && r.energyJ == nil:
				t.Errorf("energy_j = none; want %v", *tc.want)
			case tc.want != nil && *r.energyJ != *tc.want:
				t.Errorf("energy_j = %v; want %v", *r.energyJ, *tc.want)
			}
		})
	}
}
