package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestSimCommand replays Venus through `heliostat sim --json` and checks the
// evaluation interface: one JSON object, every policy's figures, gap closed.
func TestSimCommand(t *testing.T) {
	trace := sharedData(t, "helios/venus_sept_2vc.csv")
	vcs := sharedData(t, "helios/venus_sept_2vc_vcs.csv")
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"sim", "--trace", trace, "--vcs", vcs, "--policy", "fifo,sjf,qssf", "--json"},
		func(string) string { return "" }, &out, &errs); err != nil {
		t.Fatalf("sim: %v\n%s", err, errs.String())
	}
	var res struct {
		NJobs    int `json:"n_jobs"`
		Policies map[string]struct {
			NJobs    int      `json:"n_jobs"`
			AvgJCT   *float64 `json:"avg_jct_s"`
			AvgQueue *float64 `json:"avg_queue_s"`
			P99Queue *float64 `json:"p99_queue_s"`
			AvgBSD   *float64 `json:"avg_bounded_slowdown"`
		} `json:"policies"`
		GapClosed *float64 `json:"gap_closed"`
	}
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value on stdout")
	}
	if res.NJobs != 1867 || len(res.Policies) != 3 || res.GapClosed == nil {
		t.Fatalf("n_jobs %d, %d policies, gap %v; want 1867, 3, a gap", res.NJobs, len(res.Policies), res.GapClosed)
	}
	for name, p := range res.Policies {
		if p.NJobs != 1867 || p.AvgJCT == nil || p.AvgQueue == nil || p.P99Queue == nil || p.AvgBSD == nil || *p.AvgJCT <= *p.AvgQueue {
			t.Errorf("%s: %+v", name, p)
		}
	}
	if f := *res.Policies["fifo"].AvgJCT; f < 16533 || f > 16535 {
		t.Errorf("fifo avg JCT %v; want 16,534 (ANCHORS)", f)
	}
	if !strings.Contains(errs.String(), "replaying qssf") {
		t.Errorf("no progress on stderr: %q", errs.String())
	}

	// Without --json: a table.
	out.Reset()
	if err := run(context.Background(), []string{"sim", "--trace", trace, "--vcs", vcs, "--policy", "sjf"},
		func(string) string { return "" }, &out, &errs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "avg JCT s") || !strings.Contains(out.String(), "sjf") {
		t.Errorf("table: %q", out.String())
	}
}

func TestSimCommandErrors(t *testing.T) {
	dir := t.TempDir()
	badVCs := filepath.Join(dir, "vcs.csv")
	if err := os.WriteFile(badVCs, []byte("vc,nodes\na,many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := heliosTrace(t, dir, "t.csv", "1,u,zz,1,2020-09-01 00:00:00,10")
	headerOnly := heliosTrace(t, dir, "empty.csv")
	goodVCs := filepath.Join(dir, "good.csv")
	if err := os.WriteFile(goodVCs, []byte("vc,nodes\na,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim"}, "--trace is required"},
		{[]string{"sim", "--trace", tr, "--policy", "lifo"}, "unknown policy"},
		{[]string{"sim", "--trace", tr, "--policy", "fifo,fifo"}, "twice"},
		{[]string{"sim", "--trace", tr, "--vcs", goodVCs, "--nodes", "2"}, "not both"},
		{[]string{"sim", "--trace", tr, "--gpus-per-node", "4"}, "needs --nodes"},
		{[]string{"sim", "--trace", tr, "--vcs", badVCs}, "line 2: nodes"},
		{[]string{"sim", "--trace", tr}, "no cluster"},
		{[]string{"sim", "--trace", tr, "--vcs", goodVCs}, "no job of the trace can run"},
		// The wrong --format: every row rejected says so, asks about it,
		// and comes before the SWF header's missing machine size.
		{[]string{"sim", "--trace", tr, "--format", "swf"}, "every row of the trace was rejected (2 rows: bad_field_count 2); is --format swf right?"},
		{[]string{"sim", "--trace", tr, "--format", "swf", "--nodes", "1"}, "every row of the trace was rejected"},
		{[]string{"sim", "--trace", headerOnly, "--nodes", "1"}, "holds no job"},
		{[]string{"sim", "--trace", tr, "--nodes", "1", "--qssf.aging-rate", "-3"}, "aging-rate"},
		{[]string{"sim", "--trace", tr, "--nodes", "1", "--qssf.jitter", "-0.01"}, "--qssf.jitter -0.01: want 0..1"},
		{[]string{"sim", "--trace", tr, "--nodes", "1", "--qssf.jitter", "NaN"}, "--qssf.jitter NaN: want 0..1"},
		{[]string{"sim", "--trace", tr, "--nodes", "1", "--qssf.jitter", "1.5"}, "--qssf.jitter 1.5: want 0..1"},
		{[]string{"sim", "--trace", tr, "--nodes", "1", "--qssf.jitter-seed", "7"}, "needs --qssf.jitter > 0"},
		{[]string{"sim", "--trace", filepath.Join(dir, "missing.csv"), "--nodes", "1"}, "no such file"},
		{[]string{"sim", "--trace", tr, "extra"}, "unexpected argument"},
		{[]string{"sim", "ces"}, "series"}, // dispatched to `sim ces`
		{[]string{"sim", "--trace", tr, "--nodes", "1", "--jobs-out", filepath.Join(dir, "no", "such", "dir.csv")}, "--jobs-out"},
		{[]string{"sim", "--trace", tr, "--nodes", "1", "--jobs-out", filepath.Join(dir, "j.csv"), "--capacity-sweep", "1,2"}, "not with a capacity sweep"},
	} {
		var out, errs bytes.Buffer
		err := run(context.Background(), tc.args, func(string) string { return "" }, &out, &errs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("heliostat %v = %v; want an error about %q", tc.args, err, tc.want)
		}
	}
}

// TestSimWarnsSkipped: a cluster too small for most of the trace still
// replays the rest, but says so on stderr and in the summary, with the
// reasons in words (not Go map syntax).
func TestSimWarnsSkipped(t *testing.T) {
	var rows []string
	for i := range 10 {
		gpus := 16
		if i < 2 {
			gpus = 1
		}
		rows = append(rows, fmt.Sprintf("%d,u,a,%d,2020-09-01 00:%02d:00,60", i, gpus, i))
	}
	tr := heliosTrace(t, t.TempDir(), "t.csv", rows...)
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"sim", "--trace", tr, "--nodes", "1", "--gpus-per-node", "1", "--policy", "fifo"},
		func(string) string { return "" }, &out, &errs); err != nil {
		t.Fatalf("sim: %v\n%s", err, errs.String())
	}
	if want := "warning: 8 of the trace's 10 jobs (80%) are left out (larger_than_cluster 8); the figures describe the other 2 only"; !strings.Contains(errs.String(), want) {
		t.Errorf("stderr %q; want %q", errs.String(), want)
	}
	if want := "2 jobs replayed on all 1×1, blocking queue\n  8 of the trace's 10 jobs left out (larger_than_cluster 8)\n"; !strings.Contains(out.String(), want) {
		t.Errorf("stdout %q; want %q", out.String(), want)
	}
	if strings.Contains(out.String()+errs.String(), "map[") {
		t.Errorf("Go map syntax in the output: %q %q", out.String(), errs.String())
	}

	// One job in ten left out is no warning.
	out.Reset()
	errs.Reset()
	if err := run(context.Background(), []string{"sim", "--trace", tr, "--nodes", "2", "--gpus-per-node", "8", "--policy", "fifo"},
		func(string) string { return "" }, &out, &errs); err != nil {
		t.Fatalf("sim: %v\n%s", err, errs.String())
	}
	if strings.Contains(errs.String(), "warning") || strings.Contains(out.String(), "left out") {
		t.Errorf("nothing left out, yet: %q %q", out.String(), errs.String())
	}
}

// TestSimUnknownVCs: jobs of VCs the --vcs file lacks are named by VC, with
// counts, the most first: in the warning, the summary, the error when none is
// left, and the JSON.
func TestSimUnknownVCs(t *testing.T) {
	dir := t.TempDir()
	vcs := filepath.Join(dir, "vcs.csv")
	if err := os.WriteFile(vcs, []byte("vc,nodes\na,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name string, vcs ...string) string {
		rows := make([]string, len(vcs))
		for i, vc := range vcs {
			rows[i] = fmt.Sprintf("%d,u,%s,1,2020-09-01 00:%02d:00,60", i, vc, i)
		}
		return heliosTrace(t, dir, name, rows...)
	}
	some := write("some.csv", "a", "zz", "zz", "zz", "yy", "a", "v1", "v2", "v3", "v4", "v5")
	none := write("none.csv", "zz", "yy", "zz")
	for _, tc := range []struct {
		name string
		args []string
		err  string   // in the error; "": none
		want []string // in stdout + stderr
		json map[string]int
	}{
		{name: "warning and summary", args: []string{"--trace", some},
			want: []string{"(unknown_vc 9; VCs not in --vcs: zz 3, v1 1, v2 1, v3 1, v4 1, and 2 more)"}},
		{name: "json", args: []string{"--trace", some, "--json"},
			json: map[string]int{"zz": 3, "yy": 1, "v1": 1, "v2": 1, "v3": 1, "v4": 1, "v5": 1}},
		{name: "sweep json", args: []string{"--trace", some, "--json", "--capacity-sweep", "1"},
			json: map[string]int{"zz": 3, "yy": 1, "v1": 1, "v2": 1, "v3": 1, "v4": 1, "v5": 1}},
		{name: "none left", args: []string{"--trace", none}, err: "(skipped: unknown_vc 3; VCs not in --vcs: zz 2, yy 1)"},
		{name: "none left, sweep", args: []string{"--trace", none, "--capacity-sweep", "1"}, err: "VCs not in --vcs: zz 2, yy 1"},
	} {
		var out, errs bytes.Buffer
		args := append([]string{"sim", "--vcs", vcs, "--policy", "fifo"}, tc.args...)
		err := run(context.Background(), args, func(string) string { return "" }, &out, &errs)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: heliostat %q = %v; want an error containing %q", tc.name, args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: heliostat %q: %v\n%s", tc.name, args, err, errs.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(errs.String(), "warning") || strings.Count(out.String()+errs.String(), w) < 2 {
				t.Errorf("%s: stdout %q stderr %q; want %q in the warning and the summary", tc.name, out.String(), errs.String(), w)
			}
		}
		if tc.json != nil {
			var res struct {
				UnknownVCs map[string]int `json:"unknown_vcs"`
			}
			if err := json.Unmarshal(out.Bytes(), &res); err != nil || !reflect.DeepEqual(res.UnknownVCs, tc.json) {
				t.Errorf("%s: unknown_vcs %v (%v); want %v", tc.name, res.UnknownVCs, err, tc.json)
			}
		}
	}
}

// TestSimJobsOut: --jobs-out writes each job under each policy, with QSSF's
// prediction at submit, and says so on stderr.
func TestSimJobsOut(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 6 {
		lines = append(lines, fmt.Sprintf("%d,u%d,a,%d,2020-09-01 00:%02d:00,%d", i, i%2, 1+i%3, i, 600+60*i))
	}
	tr := heliosTrace(t, dir, "t.csv", lines...)
	jobs := filepath.Join(dir, "jobs.csv")
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"sim", "--trace", tr, "--nodes", "1", "--gpus-per-node", "4", "--policy", "fifo,qssf", "--json", "--jobs-out", jobs},
		func(string) string { return "" }, &out, &errs); err != nil {
		t.Fatalf("sim: %v\n%s", err, errs.String())
	}
	rows := readCSV(t, jobs)
	if len(rows) != 1+2*6 || rows[0][0] != "policy" {
		t.Fatalf("%d rows, header %v; want 13 rows under a header", len(rows), rows[0])
	}
	for _, r := range rows[1:] {
		if (r[0] == "qssf") == (r[10] == "") {
			t.Errorf("row %v: a prediction only for qssf", r)
		}
	}
	if want := "wrote 12 rows (6 jobs × 2 policies) to " + jobs; !strings.Contains(errs.String(), want) {
		t.Errorf("stderr %q; want %q", errs.String(), want)
	}

	// A run that fails after the file was begun leaves none behind, and
	// an earlier file of the name as it was.
	gone := filepath.Join(dir, "gone.csv")
	err := run(context.Background(), []string{"sim", "--trace", filepath.Join(dir, "missing.csv"), "--nodes", "1", "--jobs-out", gone},
		func(string) string { return "" }, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing trace: %v; want an error", err)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("--jobs-out %s after a failed run: %v; want no file", gone, err)
	}
	before, err := os.ReadFile(jobs)
	if err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"sim", "--trace", filepath.Join(dir, "missing.csv"), "--nodes", "1", "--jobs-out", jobs},
		func(string) string { return "" }, &out, &errs)
	if after, _ := os.ReadFile(jobs); err == nil || !bytes.Equal(after, before) {
		t.Errorf("a failed run over an earlier --jobs-out: %v, the file %d bytes then %d; want an error and the file as it was", err, len(before), len(after))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// heliosTrace writes a trace in the Helios format (sim's --trace, format
// helios) named name in dir, its header and then rows, and returns its path.
func heliosTrace(t *testing.T, dir, name string, rows ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("job_id,user,vc,gpu_num,submit_time,duration\n")
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
