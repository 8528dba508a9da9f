package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	tr := filepath.Join(dir, "t.csv")
	if err := os.WriteFile(tr, []byte("job_id,user,vc,gpu_num,submit_time,duration\n1,u,zz,1,2020-09-01 00:00:00,10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
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
		{[]string{"sim", "--trace", tr, "--nodes", "1", "--qssf.aging-rate", "-3"}, "aging-rate"},
		{[]string{"sim", "--trace", filepath.Join(dir, "missing.csv"), "--nodes", "1"}, "no such file"},
		{[]string{"sim", "--trace", tr, "extra"}, "unexpected argument"},
		{[]string{"sim", "ces"}, "series"}, // dispatched to `sim ces`
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
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.csv")
	var b strings.Builder
	b.WriteString("job_id,user,vc,gpu_num,submit_time,duration\n")
	for i := range 10 {
		gpus := 16
		if i < 2 {
			gpus = 1
		}
		fmt.Fprintf(&b, "%d,u,a,%d,2020-09-01 00:%02d:00,60\n", i, gpus, i)
	}
	if err := os.WriteFile(tr, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
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
