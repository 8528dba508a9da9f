package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimCapacitySweep runs `heliostat sim --capacity-sweep` on Venus: one
// JSON object with every size, the size 1 equal to the plain FIFO replay
// (ANCHORS' 16,534 s), progress on stderr, and a table without --json.
func TestSimCapacitySweep(t *testing.T) {
	trace := sharedData(t, "helios/venus_sept_2vc.csv")
	vcs := sharedData(t, "helios/venus_sept_2vc_vcs.csv")
	var out, errs bytes.Buffer
	args := []string{"sim", "--trace", trace, "--vcs", vcs, "--capacity-sweep", "0.5,1,1.5", "--json"}
	if err := run(context.Background(), args, func(string) string { return "" }, &out, &errs); err != nil {
		t.Fatalf("sim: %v\n%s", err, errs.String())
	}
	var res struct {
		NJobs      int    `json:"n_jobs"`
		Policy     string `json:"policy"`
		FitLargest bool   `json:"fit_largest"`
		Sizes      []struct {
			Size        string   `json:"size"`
			GPUs        int      `json:"gpus"`
			NJobs       int      `json:"n_jobs"`
			NeverRun    *int     `json:"never_run"`
			AvgQueue    *float64 `json:"avg_queue_s"`
			MedianQueue *float64 `json:"median_queue_s"`
			P95Queue    *float64 `json:"p95_queue_s"`
			P99Queue    *float64 `json:"p99_queue_s"`
			AvgJCT      float64  `json:"avg_jct_s"`
			Utilization float64  `json:"utilization"`
		} `json:"sizes"`
	}
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if dec.More() {
		t.Fatal("more than one JSON value on stdout")
	}
	if res.NJobs != 1867 || res.Policy != "fifo" || !res.FitLargest || len(res.Sizes) != 3 {
		t.Fatalf("%+v; want 1867 jobs, fifo, fit_largest, 3 sizes", res)
	}
	wantGPUs := []int{160, 176, 264} // half stops at the widest job (18 + 2 nodes)
	for i, s := range res.Sizes {
		if s.GPUs != wantGPUs[i] || s.NJobs != 1867 || s.NeverRun == nil || *s.NeverRun != 0 || s.AvgQueue == nil || s.MedianQueue == nil ||
			s.P95Queue == nil || s.P99Queue == nil || s.Utilization <= 0 || s.Utilization > 1 {
			t.Errorf("size %d: %+v", i, s)
		}
		if i > 0 && *s.AvgQueue >= *res.Sizes[i-1].AvgQueue {
			t.Errorf("%s: avg queue %v not below %s's %v", s.Size, *s.AvgQueue, res.Sizes[i-1].Size, *res.Sizes[i-1].AvgQueue)
		}
	}
	if j := res.Sizes[1].AvgJCT; math.Abs(j-16534) > 1 {
		t.Errorf("×1: avg JCT %v; want 16,534 (the plain FIFO replay)", j)
	}
	if !strings.Contains(errs.String(), "size 3/3 ×1.5") {
		t.Errorf("no progress on stderr: %q", errs.String())
	}

	out.Reset()
	args = []string{"sim", "--trace", trace, "--vcs", vcs, "--capacity-sweep", "0.5", "--capacity-sweep.exact", "--backfill"}
	if err := run(context.Background(), args, func(string) string { return "" }, &out, &errs); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "never run") || !strings.Contains(s, "scaled exactly") || !strings.Contains(s, "backfill") || !strings.Contains(s, "×0.5") {
		t.Errorf("table: %q", s)
	}
}

func TestSimCapacitySweepErrors(t *testing.T) {
	dir := t.TempDir()
	tr := heliosTrace(t, dir, "t.csv", "1,u,a,1,2020-09-01 00:00:00,10")
	vcs := filepath.Join(dir, "vcs.csv")
	if err := os.WriteFile(vcs, []byte("vc,nodes\na,2\nb,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--capacity-sweep", "1", "--capacity-sweep.nodes", "2"}, "not both"},
		{[]string{"--capacity-sweep", "1,x"}, "entry 2"},
		{[]string{"--capacity-sweep", "0"}, "above 0"},
		{[]string{"--capacity-sweep.nodes", "1.5"}, "node count"},
		{[]string{"--capacity-sweep.exact"}, "needs --capacity-sweep"},
		{[]string{"--capacity-sweep", "1", "--policy", "fifo,sjf"}, "one policy"},
		{[]string{"--capacity-sweep.nodes", "2,3"}, "one pool"},
		{[]string{"--capacity-sweep", "1", "--format", "swf"}, "every row of the trace was rejected (2 rows: bad_field_count 2); is --format swf right?"},
	} {
		var out, errs bytes.Buffer
		args := append([]string{"sim", "--trace", tr, "--vcs", vcs}, tc.args...)
		err := run(context.Background(), args, func(string) string { return "" }, &out, &errs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("heliostat %v = %v; want an error about %q", tc.args, err, tc.want)
		}
	}
	// One pool: explicit node counts work.
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"sim", "--trace", tr, "--nodes", "2", "--capacity-sweep.nodes", "1,3", "--json"},
		func(string) string { return "" }, &out, &errs); err != nil || !strings.Contains(out.String(), `"size":"3 nodes"`) {
		t.Errorf("node counts on one pool: %v, %s", err, out.String())
	}
}
