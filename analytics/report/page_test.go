package report

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// hostile is a user name that would run script, break out of an attribute or
// open a tag if it reached the page unescaped.
const hostile = `<script>alert("x")</script>'"&<svg onload=alert(1)>`

// sample is a small fixed report with every section filled, hostile names
// in every place a name from data appears.
func sample() *Report {
	r := &Report{
		Title:    "Characterization of <cluster> & co",
		RunP50S:  391.5,
		RunP90S:  104000,
		Capacity: 176, CapacitySource: "config",
		Notes:     []string{"The trace gives a run time but no start time for " + hostile + " jobs."},
		Source:    "trace sample.csv",
		Clusters:  []string{"venus", hostile},
		From:      time.Date(2020, 9, 1, 0, 0, 0, 0, time.UTC),
		To:        time.Date(2020, 10, 1, 0, 0, 0, 0, time.UTC),
		Generated: time.Date(2020, 10, 2, 3, 4, 5, 0, time.UTC),
		Headline: Headline{
			Jobs: 1867, GPUJobs: 1867, Users: 62,
			StateShare:        map[string]float64{"completed": 0.6, "cancelled": 0.25, "failed": 0.15},
			GPUTimeStateShare: map[string]float64{"completed": 0.5, "cancelled": 0.35, "failed": 0.15},
			DurationMedianS:   391.5,
			Top5pctGPUTime:    0.4321,
		},
		DurationCDF: []CDF{
			{Name: "all GPU jobs", Points: []Point{{1, 0.05}, {10, 0.2}, {100, 0.4}, {1000, 0.6}, {10000, 0.85}, {100000, 0.97}, {1000000, 1}}},
			{Name: hostile, Points: []Point{{1, 0.1}, {10, 0.3}, {100, 0.5}, {1000, 0.7}, {10000, 0.9}, {100000, 1}}},
		},
		States: []StateCount{
			{"completed", 1120, 4e7}, {"cancelled", 467, 2.8e7}, {"failed", 280, 1.2e7},
		},
		Concentration: []Concentration{{0.01, 1, 0.2}, {0.05, 4, 0.4321}, {0.1, 7, 0.6}, {0.25, 16, 0.85}},
		UserCurve:     []Point{{0.25, 0.6}, {0.5, 0.85}, {0.75, 0.95}, {1, 1}},
		Users: []User{
			{Name: hostile, Jobs: 300, GPUTime: 2e7, GPUTimeShare: 0.25, QueueShare: 0.4, CompletionRate: 0.7},
			{Name: "alice", Jobs: 200, GPUTime: 1e7, GPUTimeShare: 0.125, QueueShare: 0.3, CompletionRate: 0.5},
			{Name: "bob", Jobs: 100, GPUTime: 5e6, GPUTimeShare: 0.0625, QueueShare: 0.1, CompletionRate: 0.9},
		},
		Telemetry: &Telemetry{
			Jobs: 120, GPUHours: 5000, UtilMean: 52.5, IdleGPUHours: 800, EnergyKWh: 1500,
			Flags: map[string]int64{"zero_util_gpus": 12, "low_util": 30, hostile: 1},
			Users: []TelemetryUser{
				{Name: hostile, Jobs: 60, GPUHours: 3000, UtilMean: 40, IdleGPUHours: 600, EnergyKWh: 900},
				{Name: "carol", Jobs: 60, GPUHours: 2000, UtilMean: 70, IdleGPUHours: 200, EnergyKWh: 600},
			},
		},
		Summary: []Summary{{
			ID: hostile, GPUs: 176, Jobs: 1867, GPUJobs: 1867, AvgRunGPU: 13040.598, AvgQueueGPU: nan, AvgGPUs: 6.7,
			MedRunGPU: 391.5, MedGPUs: 1, CompleteRate: 0.6, CancelRate: 0.25, FailRate: 0.15,
			CompleteRateGPU: 0.6, CancelRateGPU: 0.25, FailRateGPU: 0.15, CompleteGPUTime: 4e7, CancelGPUTime: 2.8e7, FailGPUTime: 1.2e7,
			AvgRunCPU: nan, AvgQueueCPU: nan, MedRunCPU: nan, MedQueueCPU: nan, MedQueueGPU: nan,
		}},
	}
	for h := range 24 {
		u := 0.5 + 0.4*math.Sin(float64(h)/24*2*math.Pi)
		r.Hours = append(r.Hours, Period{Label: hourLabels()[h], Utilization: u, Submissions: float64(3 + h%7)})
		for d := range 7 {
			r.HourWeekday[d][h] = u * (1 - float64(d)/14)
		}
	}
	r.HourWeekday[6][23] = math.NaN()
	for d := range 7 {
		r.Weekdays = append(r.Weekdays, Period{Label: weekdayNames[d], Utilization: 0.7 - float64(d)/20, Submissions: float64(80 - 5*d)})
	}
	r.Months = []Month{
		{"2020-08", 300, 100, 1e6, 9e6},
		{"2020-09", 900, 567, 3e6, 6e7},
	}
	r.VCs = []VC{
		{Name: "vcvGl", Capacity: 160, Jobs: 1500, GPUJobs: 1500, MeanGPUs: 7.2, MedianRunS: 400, MeanRunS: 14000, MeanQueueS: 1200, GPUTime: 7e7, UtilMean: 0.62, UtilP50: 0.65, UtilP90: 0.9},
		{Name: hostile, Capacity: 16, Jobs: 367, GPUJobs: 367, MeanGPUs: 2.1, MedianRunS: 300, MeanRunS: 9000, MeanQueueS: nan, GPUTime: 1e7, UtilMean: 0.4, UtilP50: 0.35, UtilP90: 0.8},
	}
	r.GPUTypes = []GPUType{
		{Name: "a100", Jobs: 1200, Users: 40, MeanGPUs: 6.5, MedianRunS: 420, MeanRunS: 13000, MedianQueueS: 60, MeanQueueS: 1100, CompletedShare: 0.61, FailedShare: 0.2, GPUTime: 6e7},
		{Name: hostile, Jobs: 3, Users: 1, MeanGPUs: 2, MedianRunS: nan, MeanRunS: nan, MedianQueueS: nan, MeanQueueS: nan, CompletedShare: nan, FailedShare: nan, GPUTime: 0},
	}
	r.GPUCounts = []GPUCount{{1, 900, 5e6}, {2, 200, 4e6}, {4, 150, 6e6}, {8, 400, 3e7}, {16, 150, 2.5e7}, {64, 67, 1e7}}
	r.StateByGPUs = []GPUStates{
		{Bucket: "1", Jobs: map[string]int64{"completed": 600, "cancelled": 200, "failed": 100}},
		{Bucket: "2-8", Jobs: map[string]int64{"completed": 400, "cancelled": 200, "failed": 150}},
		{Bucket: ">8", Jobs: map[string]int64{"completed": 120, "cancelled": 67, "failed": 30}},
	}
	return r
}

func TestRenderGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := Render(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "sample.html")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("Render(sample) differs from %s; run go test ./analytics/report -run TestRenderGolden -update and review the diff", golden)
	}
}

func TestRenderEscapesData(t *testing.T) {
	var buf bytes.Buffer
	if err := Render(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, bad := range []string{"<script", `alert("x")`, "<svg onload", `'"&<`} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q: a name from data reached it unescaped", bad)
		}
	}
	if !strings.Contains(page, "&lt;script&gt;") {
		t.Errorf("page lacks the escaped hostile name")
	}
}

func TestRenderSelfContained(t *testing.T) {
	var buf bytes.Buffer
	if err := Render(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	// Nothing may be fetched: no src/href attributes, no url() in CSS, no
	// @import; the only URL allowed is the SVG namespace.
	for _, re := range []string{`(?i)\ssrc\s*=`, `(?i)\shref\s*=`, `(?i)url\(`, `(?i)@import`, `(?i)<script`, `(?i)<link`} {
		if m := regexp.MustCompile(re).FindString(page); m != "" {
			t.Errorf("page contains %q: it must load nothing", m)
		}
	}
	if n := strings.Count(page, "http://") + strings.Count(page, "https://"); n != strings.Count(page, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("page names %d URLs other than the SVG namespace", n-strings.Count(page, `xmlns="http://www.w3.org/2000/svg"`))
	}
}

func TestRenderFigures(t *testing.T) {
	r := sample()
	var buf bytes.Buffer
	if err := Render(&buf, r); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, id := range r.Figures() {
		svg := figureSVG(t, page, id)
		if n := strings.Count(svg, `class="mark"`); n == 0 {
			t.Errorf("figure %s has no data marks", id)
		}
		if strings.Contains(svg, "no data") {
			t.Errorf("figure %s says no data", id)
		}
	}
	if got, want := strings.Count(page, "data-figure="), len(r.Figures()); got != want {
		t.Errorf("page has %d figures; want %d", got, want)
	}
	// Without telemetry the section says why and draws no figure.
	r.Telemetry = nil
	buf.Reset()
	if err := Render(&buf, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), `data-figure="`+FigTelemetryUser) || !strings.Contains(buf.String(), "No GPU samples") {
		t.Errorf("report without telemetry: want no telemetry figure and the note why")
	}
}

// figureSVG returns the <svg> element of figure id in page.
func figureSVG(t *testing.T, page, id string) string {
	t.Helper()
	start := strings.Index(page, `<svg xmlns="http://www.w3.org/2000/svg" data-figure="`+id+`"`)
	if start < 0 {
		t.Fatalf("figure %s missing", id)
	}
	end := strings.Index(page[start:], "</svg>")
	if end < 0 {
		t.Fatalf("figure %s not closed", id)
	}
	return page[start : start+end+len("</svg>")]
}

func TestRenderEmpty(t *testing.T) {
	// A window without jobs renders: no figure, each one's place saying why.
	r := &Report{Title: "empty", Headline: Headline{StateShare: map[string]float64{}, GPUTimeStateShare: map[string]float64{}, DurationMedianS: math.NaN()},
		RunP50S: math.NaN(), RunP90S: math.NaN()}
	for d := range 7 {
		for h := range 24 {
			r.HourWeekday[d][h] = math.NaN()
		}
	}
	var buf bytes.Buffer
	if err := Render(&buf, r); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if ids := r.Figures(); len(ids) != 0 {
		t.Errorf("empty report: Figures() = %v; want none", ids)
	}
	if n := strings.Count(page, "<svg"); n != 0 {
		t.Errorf("empty report draws %d figures; want none", n)
	}
	for _, id := range figureOrder[:len(figureOrder)-1] { // no telemetry section without telemetry
		if !strings.Contains(page, `<p class="note" id="fig-`+id+`">`) {
			t.Errorf("empty report: no note in place of figure %s", id)
		}
	}
	if strings.Contains(page, "NaN") {
		t.Errorf("empty report prints NaN")
	}
	// Shares of nothing are no data, not 0.
	r.Headline.Top5pctGPUTime = math.NaN()
	buf.Reset()
	if err := Render(&buf, r); err != nil {
		t.Fatal(err)
	}
	for _, tile := range []string{"of jobs completed", "of jobs failed", "of GPU time used by the top 5% of users"} {
		if !strings.Contains(buf.String(), "<b>–</b><span>"+tile+"</span>") {
			t.Errorf("empty report: the tile %q does not show –", tile)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		f    func(float64) string
		in   float64
		want string
	}{
		{fmtNum, 0, "0"}, {fmtNum, 950, "950"}, {fmtNum, 1234, "1.2k"}, {fmtNum, 12345, "12k"}, {fmtNum, 3.4e6, "3.4M"}, {fmtNum, 0.25, "0.25"},
		{fmtPct, 0.4321, "43.2%"}, {fmtPct, 1, "100%"}, {fmtPct, 0.0004, "<0.1%"}, {fmtPct, 0, "0%"}, {fmtPct, math.NaN(), "–"},
		{fmtDur, 45, "45 s"}, {fmtDur, 391.5, "6.5 min"}, {fmtDur, 5400, "1.5 h"}, {fmtDur, 2 * 86400, "2 d"}, {fmtDur, math.NaN(), "–"},
	} {
		if got := c.f(c.in); got != c.want {
			t.Errorf("format(%v) = %q; want %q", c.in, got, c.want)
		}
	}
	if got := groupDigits(1234567); got != "1,234,567" {
		t.Errorf("groupDigits(1234567) = %q", got)
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0, 87, []float64{0, 20, 40, 60, 80}},
		{0, 0, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
	} {
		got := niceTicks(c.lo, c.hi, 5)
		if len(got) != len(c.want) {
			t.Errorf("niceTicks(%v, %v) = %v; want %v", c.lo, c.hi, got, c.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-9 {
				t.Errorf("niceTicks(%v, %v) = %v; want %v", c.lo, c.hi, got, c.want)
				break
			}
		}
	}
}
