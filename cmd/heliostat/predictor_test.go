package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sharedData returns the path of a file in ../shared/data, failing under CI
// and skipping elsewhere when it is missing (shared/data/README.md).
func sharedData(t *testing.T, rel string) string {
	t.Helper()
	p := "../../../shared/data/" + rel
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("trace %s is missing: %v", rel, err)
		}
		t.Skipf("trace %s is missing; skipped", rel)
	}
	return p
}

// TestBacktestText checks the text output against the JSON of the same run:
// with --baseline at the top level of the JSON, the text still lists
// heliostat's own figures first, then every baseline, then heliostat's per
// segment of history.
func TestBacktestText(t *testing.T) {
	path := sharedData(t, "helios/venus_sept_2vc.csv")
	args := []string{"predictor", "backtest", "--trace", path, "--baseline", "last2"}
	var js, text bytes.Buffer
	if err := run(context.Background(), append(args, "--json"), os.Getenv, &js, os.Stderr); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), args, os.Getenv, &text, os.Stderr); err != nil {
		t.Fatal(err)
	}
	type metrics struct {
		N        int      `json:"n"`
		Within2x float64  `json:"within_2x"`
		Coverage *float64 `json:"interval_coverage"`
	}
	var res struct {
		Model     string             `json:"model"`
		Within2x  float64            `json:"within_2x"`
		Segments  map[string]metrics `json:"segments"`
		Baselines map[string]metrics `json:"baselines"`
	}
	if err := json.Unmarshal(js.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Model != "last2" || res.Within2x != res.Baselines["last2"].Within2x {
		t.Errorf("JSON top level is %s at %.4f; want last2's %.4f", res.Model, res.Within2x, res.Baselines["last2"].Within2x)
	}
	lines := strings.Split(text.String(), "\n")
	if len(lines) < 2 || !strings.HasPrefix(strings.TrimSpace(lines[1]), "heliostat ") {
		t.Fatalf("text output does not list heliostat first:\n%s", text.String())
	}
	for seg, m := range res.Segments {
		if m.Coverage == nil {
			t.Errorf("segment %s has no interval_coverage", seg)
			continue
		}
		want := fmt.Sprintf("    %-6s %7d  %.3f  %.3f", seg, m.N, m.Within2x, *m.Coverage)
		if !strings.Contains(text.String(), want) {
			t.Errorf("text output lacks segment line %q:\n%s", want, text.String())
		}
	}
	if len(res.Segments) == 0 {
		t.Errorf("no segments in %s", js.String())
	}
	// Venus gives no time limits: the reqtime line is the median run time,
	// and the text says so.
	if !strings.Contains(text.String(), "(the trace: none of its jobs has a time limit; reqtime for those") {
		t.Errorf("text output does not say reqtime stands for the median run time:\n%s", text.String())
	}
}

// TestBacktestAccuracyFloors runs the evaluation command on both SWF traces and
// fails when accuracy drops below the figures reached, and when the published
// baselines no longer come out as ANCHORS.md reports them (the protocol would
// have changed).
func TestBacktestAccuracyFloors(t *testing.T) {
	skipInCHDBPass(t)
	if testing.Short() {
		t.Skip("backtests on full traces; skipped with -short")
	}
	// Parallel, like the package's other two longest tests
	// (TestAlertsOnFaults, TestIngestSurvivesSIGKILL, which mostly wait):
	// the three run beside each other once the other tests are done.
	t.Parallel()
	type floor struct{ within2x, r2 float64 }
	for _, tc := range []struct {
		file      string
		heliostat floor
		last2     floor // ANCHORS.md: mean of the user's last two jobs
		reqtime   floor // ANCHORS.md: user-requested time limit
	}{
		// The 80 % intervals covered 0.777 and 0.824 of the test jobs when
		// they were calibrated (0.717 and 0.697 before), 0.799 and 0.804
		// with the online correction. Floors 0.005 below the figures
		// reached with a Huber threshold that follows the residuals'
		// spread, where the trace records requested memory history
		// matched on it, and the point kept near a repeated run time
		// (CTC-SP2 0.5886 / 0.5156, HPC2N 0.5714 / 0.4651;
		// docs/BENCHMARKS.md).
		{"swf/CTC-SP2-1996-3.1-cln.swf.gz", floor{0.583, 0.510}, floor{0.557, 0.292}, floor{0.371, 0.035}},
		{"swf/HPC2N-2002-2.2-cln.swf.gz", floor{0.566, 0.460}, floor{0.465, 0.015}, floor{0.431, -0.345}},
	} {
		path := sharedData(t, tc.file)
		var out bytes.Buffer
		if err := run(context.Background(), []string{"predictor", "backtest", "--trace", path, "--json"}, os.Getenv, &out, os.Stderr); err != nil {
			t.Fatalf("predictor backtest %s: %v", tc.file, err)
		}
		var res struct {
			Within2x  float64  `json:"within_2x"`
			R2Log     float64  `json:"r2_log"`
			NTrain    int      `json:"n_train"`
			NTest     int      `json:"n_test"`
			Coverage  *float64 `json:"interval_coverage"`
			Baselines map[string]struct {
				Within2x float64  `json:"within_2x"`
				R2Log    float64  `json:"r2_log"`
				Coverage *float64 `json:"interval_coverage"`
			} `json:"baselines"`
		}
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("decode %s: %v", out.String(), err)
		}
		if res.Coverage == nil {
			t.Fatalf("%s: no interval_coverage in %s", tc.file, out.String())
		}
		t.Logf("%s: within_2x %.4f r2_log %.4f interval_coverage %.4f (n_train %d, n_test %d)", tc.file, res.Within2x, res.R2Log, *res.Coverage, res.NTrain, res.NTest)
		if res.Within2x < tc.heliostat.within2x || res.R2Log < tc.heliostat.r2 {
			t.Errorf("%s: heliostat within_2x %.4f, r2_log %.4f; the figures reached are %.3f and %.3f",
				tc.file, res.Within2x, res.R2Log, tc.heliostat.within2x, tc.heliostat.r2)
		}
		// An "80 %" interval must cover about that share out of sample:
		// neither the 70 % of the raw training residuals nor an interval
		// so wide that it says nothing.
		if *res.Coverage < 0.78 || *res.Coverage > 0.82 {
			t.Errorf("%s: interval_coverage %.4f; want 0.78..0.82 for an 80%% interval", tc.file, *res.Coverage)
		}
		for name, want := range map[string]floor{"last2": tc.last2, "reqtime": tc.reqtime} {
			got := res.Baselines[name]
			if got.Coverage != nil {
				t.Errorf("%s: baseline %s reports interval_coverage %v; it has no interval", tc.file, name, *got.Coverage)
			}
			if d := got.Within2x - want.within2x; d > 0.005 || d < -0.005 {
				t.Errorf("%s: baseline %s within_2x %.4f; ANCHORS.md says %.3f", tc.file, name, got.Within2x, want.within2x)
			}
			if d := got.R2Log - want.r2; d > 0.03 || d < -0.03 {
				t.Errorf("%s: baseline %s r2_log %.4f; ANCHORS.md says %.3f", tc.file, name, got.R2Log, want.r2)
			}
		}
	}
}

// TestBacktestVenusFloor: on the Venus slice, too small for a fit on all of
// a segment's features, heliostat fits the core features
// (duration.coreFeatures) and must stay at the figures it reached
// (0.433 within 2×, R² log 0.043; the history rule gave 0.394 / −0.141) and
// above every baseline of the same run on both.
func TestBacktestVenusFloor(t *testing.T) {
	path := sharedData(t, "helios/venus_sept_2vc.csv")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"predictor", "backtest", "--trace", path, "--json"}, os.Getenv, &out, os.Stderr); err != nil {
		t.Fatal(err)
	}
	type figures struct {
		Within2x float64 `json:"within_2x"`
		R2Log    float64 `json:"r2_log"`
	}
	var res struct {
		figures
		Baselines map[string]figures `json:"baselines"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("decode %s: %v", out.String(), err)
	}
	if res.Within2x < 0.428 || res.R2Log < 0.038 {
		t.Errorf("heliostat within_2x %.4f, r2_log %.4f; the figures reached are 0.433 and 0.043", res.Within2x, res.R2Log)
	}
	if len(res.Baselines) != 3 {
		t.Errorf("baselines %v; want last1, last2 and reqtime", res.Baselines)
	}
	for name, b := range res.Baselines {
		if b.Within2x >= res.Within2x || b.R2Log >= res.R2Log {
			t.Errorf("baseline %s %.4f / %.4f is not below heliostat's %.4f / %.4f", name, b.Within2x, b.R2Log, res.Within2x, res.R2Log)
		}
	}
}

func TestBacktestDemandCommand(t *testing.T) {
	skipInCHDBPass(t)
	if testing.Short() {
		t.Skip("backtest on the Philly series; skipped with -short")
	}
	path := sharedData(t, "philly/philly_node_sequence.csv")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"predictor", "backtest-demand", "--series", path, "--horizon", "1h", "--json"}, os.Getenv, &out, os.Stderr); err != nil {
		t.Fatalf("predictor backtest-demand: %v", err)
	}
	var res struct {
		RMSENodes float64 `json:"rmse_nodes"`
		SMAPE     float64 `json:"smape"`
		N         int     `json:"n"`
		Baselines map[string]struct {
			RMSENodes float64 `json:"rmse_nodes"`
		} `json:"baselines"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("decode %s: %v", out.String(), err)
	}
	t.Logf("rmse_nodes %.2f smape %.4f over %d forecasts; last %.2f, day_ago %.2f", res.RMSENodes, res.SMAPE, res.N,
		res.Baselines["last"].RMSENodes, res.Baselines["day_ago"].RMSENodes)
	if res.N == 0 || res.RMSENodes <= 0 || res.SMAPE <= 0 {
		t.Fatalf("backtest-demand printed %s; want scored forecasts", out.String())
	}
	if res.RMSENodes >= res.Baselines["day_ago"].RMSENodes {
		t.Errorf("rmse_nodes %.2f does not beat the day-ago baseline %.2f", res.RMSENodes, res.Baselines["day_ago"].RMSENodes)
	}
}

// TestBacktestSomeLimits: where only some jobs give a time limit, the text
// counts those without one.
func TestBacktestSomeLimits(t *testing.T) {
	var b strings.Builder
	b.WriteString("; UnixStartTime: 1000000000\n; MaxProcs: 64\n")
	for i := range 400 {
		limit := 7200
		if i%4 == 0 {
			limit = -1 // no requested time
		}
		fmt.Fprintf(&b, "%d %d 0 %d 1 -1 -1 1 %d -1 1 %d 1 -1 1 1 -1 -1\n", i+1, i*600, 100+50*(i%5), limit, 1+i%3)
	}
	path := t.TempDir() + "/some.swf"
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := run(context.Background(), []string{"predictor", "backtest", "--trace", path}, os.Getenv, &text, os.Stderr); err != nil {
		t.Fatal(err)
	}
	if want := "(the trace: 100 of its 400 jobs have no time limit; reqtime for those"; !strings.Contains(text.String(), want) {
		t.Errorf("text output lacks %q:\n%s", want, text.String())
	}
}

// readCSV returns the records of the CSV file at path.
func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestBacktestJobsOut: --jobs-out writes one row per test job, whose
// within_2x agree with the JSON's figure; a backtest that fails leaves no
// file, not even a partial one.
func TestBacktestJobsOut(t *testing.T) {
	path := sharedData(t, "helios/venus_sept_2vc.csv")
	dir := t.TempDir()
	out := dir + "/jobs.csv"
	var js bytes.Buffer
	if err := run(context.Background(), []string{"predictor", "backtest", "--trace", path, "--json", "--jobs-out", out}, os.Getenv, &js, io.Discard); err != nil {
		t.Fatal(err)
	}
	var res struct {
		NTest    int     `json:"n_test"`
		Within2x float64 `json:"within_2x"`
	}
	if err := json.Unmarshal(js.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, out)
	if len(rows) != res.NTest+1 || !slices.Equal(rows[0], backtestJobsHeader()) {
		t.Fatalf("%d rows, header %v; want %d test jobs under %v", len(rows)-1, rows[0], res.NTest, backtestJobsHeader())
	}
	hits, prev := 0, int64(0)
	for _, r := range rows[1:] {
		submit, err := strconv.ParseInt(r[3], 10, 64)
		if err != nil || submit < prev || r[0] == "" || r[6] == "" {
			t.Fatalf("row %v: want a job id, a segment, submits in order", r)
		}
		prev = submit
		if r[13] == "1" {
			hits++
		}
	}
	if got := float64(hits) / float64(res.NTest); math.Abs(got-res.Within2x) > 1e-12 {
		t.Errorf("within 2× of the rows %.4f; JSON %.4f", got, res.Within2x)
	}

	// A failed backtest: the earlier file stays as it was, no temporary one.
	before, _ := os.ReadFile(out)
	err := run(context.Background(), []string{"predictor", "backtest", "--trace", dir + "/none.swf", "--jobs-out", out}, os.Getenv, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("backtest of a missing trace succeeded")
	}
	if after, _ := os.ReadFile(out); !bytes.Equal(before, after) {
		t.Error("a failed backtest changed the earlier --jobs-out file")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left in the directory: %v; want jobs.csv alone", ents)
	}
}
