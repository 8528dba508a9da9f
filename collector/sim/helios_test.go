package sim

import (
	"encoding/csv"
	"math"
	"os"
	"strconv"
	"testing"
	"time"
)

// sharedData returns the path of a file in ../shared/data, failing under CI
// and skipping elsewhere when it is missing (shared/data/README.md).
func sharedData(t *testing.T, rel string) string {
	t.Helper()
	p := "../../../shared/data/" + rel
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("data file %s is missing: %v", rel, err)
		}
		t.Skipf("data file %s is missing; skipped", rel)
	}
	return p
}

func readCSV(t *testing.T, path string) (header map[string]int, rows [][]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if len(all) < 2 {
		t.Fatalf("%s: %d lines", path, len(all))
	}
	header = map[string]int{}
	for i, h := range all[0] {
		header[h] = i
	}
	return header, all[1:]
}

// TestHeliosConstants checks the constants of helios.go against the published
// data they were copied from.
func TestHeliosConstants(t *testing.T) {
	h, rows := readCSV(t, sharedData(t, "helios/helios_cluster_summary.csv"))
	var total []string
	for _, r := range rows {
		if r[h["id"]] == "total" {
			total = r
		}
	}
	if total == nil {
		t.Fatal("helios_cluster_summary.csv: no row total")
	}
	for _, c := range []struct {
		column string
		got    float64
	}{
		{"med_run_time_gpu", heliosMedianRunS},
		{"avg_run_time_gpu", heliosMeanRunS},
		{"avg_gpu_num", heliosMeanGPUs},
		{"med_gpu_num", heliosMedianGPUs},
		{"complete_rate_gpu", heliosCompletedShare},
		{"cancel_rate_gpu", heliosCancelledShare},
		{"fail_rate_gpu", heliosFailedShare},
		{"complete_gpu_time", heliosCompletedGPUTime},
		{"cancel_gpu_time", heliosCancelledGPUTime},
		{"fail_gpu_time", heliosFailedGPUTime},
	} {
		i, ok := h[c.column]
		if !ok {
			t.Errorf("helios_cluster_summary.csv: no column %s", c.column)
			continue
		}
		want, err := strconv.ParseFloat(total[i], 64)
		if err != nil {
			t.Fatalf("%s: %v", c.column, err)
		}
		if math.Abs(c.got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("constant for %s = %v; the data says %v", c.column, c.got, want)
		}
	}
	// A median of one GPU needs at least half the jobs to use one GPU.
	if heliosMedianGPUs == 1 && singleGPUShare < 0.5 {
		t.Errorf("singleGPUShare %v contradicts a median of one GPU", singleGPUShare)
	}

	h, rows = readCSV(t, sharedData(t, "helios/venus_cluster_throughput.csv"))
	var hour [24]float64
	var day [7]float64
	for _, r := range rows {
		ts, err := time.Parse(time.DateTime, r[h["time"]])
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseFloat(r[h["submit_gpu_job"]], 64)
		if err != nil {
			t.Fatal(err)
		}
		hour[ts.Hour()] += v
		day[ts.Weekday()] += v
	}
	check := func(what string, sums, got []float64) {
		var mean float64
		for _, v := range sums {
			mean += v / float64(len(sums))
		}
		for i := range sums {
			if want := sums[i] / mean; math.Abs(got[i]-want) > 0.0006 {
				t.Errorf("%s[%d] = %.3f; the data says %.4f", what, i, got[i], want)
			}
		}
	}
	check("venusHourOfDay", hour[:], venusHourOfDay[:])
	check("venusDayOfWeek", day[:], venusDayOfWeek[:])
}

// TestDurationModel checks that the fitted run-time distribution has the
// published median and mean and the published GPU-time shares by state.
func TestDurationModel(t *testing.T) {
	d, err := fitDurations()
	if err != nil {
		t.Fatal(err)
	}
	if got := d.cdf(heliosMedianRunS); math.Abs(got-0.5) > 1e-6 {
		t.Errorf("cdf(median) = %v; want 0.5", got)
	}
	if got := d.mean(); math.Abs(got/heliosMeanRunS-1) > 1e-6 {
		t.Errorf("mean = %v; want %v", got, heliosMeanRunS)
	}
	if d.sigma < 2 || d.sigma > 3.5 {
		t.Errorf("sigma = %v; a heavy tail (2..3.5) expected", d.sigma)
	}
	if got := sizeMean(sizeRatio(), maxSizeExp); math.Abs(got-heliosMeanGPUs) > 1e-6 {
		t.Errorf("mean job size = %v; want %v", got, heliosMeanGPUs)
	}
}
