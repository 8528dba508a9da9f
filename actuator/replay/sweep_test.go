package replay

import (
	"context"
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/ingest/trace"
)

// TestSweepHandChecked sweeps a tiny workload whose schedules were worked
// out by hand: one VC of four 1-GPU nodes; a–d (1 GPU, 100 s) at 0, e (2
// GPUs, so two whole nodes, 50 s) at 10; FIFO, blocking queue.
func TestSweepHandChecked(t *testing.T) {
	base := []VC{{Name: "vc", Nodes: 4, GPUsPerNode: 1}}
	w := workload(base, []hj{
		{id: "a", gpus: 1, run: 100}, {id: "b", gpus: 1, run: 100},
		{id: "c", gpus: 1, run: 100}, {id: "d", gpus: 1, run: 100},
		{id: "e", submit: 10, gpus: 2, run: 50},
	})
	type fig struct {
		nodes, nJobs, never                       int
		neverShare                                float64
		avgQ, medQ, p95Q, p99Q, maxQ, queued, jct float64
		makespan, util                            float64
	}
	cases := []struct {
		name  string
		sizes []Size
		fit   bool
		want  []fig
	}{
		{
			name:  "factors",
			sizes: []Size{{Factor: 0.25}, {Factor: 0.5}, {Factor: 0.625}, {Factor: 1}, {Factor: 1.5}},
			want: []fig{
				// 1 node: e never runs; a–d one after another, waits 0, 100, 200, 300.
				{nodes: 1, nJobs: 4, never: 1, neverShare: 0.2, avgQ: 150, medQ: 150, p95Q: 300, p99Q: 300, maxQ: 300, queued: 0.75, jct: 250, makespan: 400, util: 1},
				// 2 nodes: a, b at 0; c, d at 100; e (both nodes) at 200: waits 0, 0, 100, 100, 190.
				{nodes: 2, nJobs: 5, avgQ: 78, medQ: 100, p95Q: 190, p99Q: 190, maxQ: 190, queued: 0.6, jct: 168, makespan: 250, util: 1},
				// 2.5 rounds to 3 nodes: a–c at 0; d at 100, then e on the other two: waits 0, 0, 0, 100, 90.
				{nodes: 3, nJobs: 5, avgQ: 38, medQ: 0, p95Q: 100, p99Q: 100, maxQ: 100, queued: 0.4, jct: 128, makespan: 200, util: 500.0 / 600},
				// 4 nodes: only e waits, for a–d to end: 90.
				{nodes: 4, nJobs: 5, avgQ: 18, medQ: 0, p95Q: 90, p99Q: 90, maxQ: 90, queued: 0.2, jct: 108, makespan: 150, util: 500.0 / 600},
				// 6 nodes: nobody waits.
				{nodes: 6, nJobs: 5, jct: 90, makespan: 100, util: 500.0 / 600},
			},
		},
		{
			name:  "fit the largest job",
			sizes: []Size{{Factor: 0.25}},
			fit:   true,
			want:  []fig{{nodes: 2, nJobs: 5, avgQ: 78, medQ: 100, p95Q: 190, p99Q: 190, maxQ: 190, queued: 0.6, jct: 168, makespan: 250, util: 1}},
		},
		{
			name:  "node counts",
			sizes: []Size{{Nodes: 3}, {Nodes: 1}},
			want: []fig{
				{nodes: 3, nJobs: 5, avgQ: 38, medQ: 0, p95Q: 100, p99Q: 100, maxQ: 100, queued: 0.4, jct: 128, makespan: 200, util: 500.0 / 600},
				{nodes: 1, nJobs: 4, never: 1, neverShare: 0.2, avgQ: 150, medQ: 150, p95Q: 300, p99Q: 300, maxQ: 300, queued: 0.75, jct: 250, makespan: 400, util: 1},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var progress []int
			pts, err := Sweep(context.Background(), w, base, SweepConfig{Sizes: tc.sizes, FitLargest: tc.fit,
				Progress: func(i int, _ SweepPoint) { progress = append(progress, i) }})
			if err != nil {
				t.Fatal(err)
			}
			if len(pts) != len(tc.want) || len(progress) != len(tc.want) {
				t.Fatalf("%d points, %d progress calls; want %d", len(pts), len(progress), len(tc.want))
			}
			for i, p := range pts {
				got := fig{p.Nodes, p.NJobs, p.NeverRun, p.NeverRunGPUTimeShare, p.AvgQueue, p.MedianQueue, p.P95Queue, p.P99Queue,
					p.MaxQueue, p.QueuedShare, p.AvgJCT, p.Makespan, p.Utilization}
				if !closeFig(got, tc.want[i]) {
					t.Errorf("%s: got %+v\nwant %+v", p.Size, got, tc.want[i])
				}
				if p.GPUs != p.Nodes {
					t.Errorf("%s: %d GPUs on %d 1-GPU nodes", p.Size, p.GPUs, p.Nodes)
				}
			}
		})
	}
	if len(w.Jobs) != 5 || w.VCs[0].Nodes != 4 {
		t.Fatalf("the sweep changed its workload: %d jobs, %d nodes", len(w.Jobs), w.VCs[0].Nodes)
	}

	// Cancelled after the first size: the points done are returned, and
	// the error says which size was not.
	ctx, cancel := context.WithCancel(t.Context())
	pts, err := Sweep(ctx, w, base, SweepConfig{Sizes: []Size{{Factor: 1}, {Factor: 0.5}},
		Progress: func(int, SweepPoint) { cancel() }})
	if len(pts) != 1 || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "capacity sweep stopped before size ×0.5") {
		t.Errorf("sweep cancelled after its first size: %d points, error %v; want 1 and the size it stopped before", len(pts), err)
	}
}

func closeFig(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		x, y := va.Field(i), vb.Field(i)
		if x.Kind() == reflect.Float64 {
			if math.Abs(x.Float()-y.Float()) > 1e-9 {
				return false
			}
		} else if x.Int() != y.Int() {
			return false
		}
	}
	return true
}

func TestScale(t *testing.T) {
	vcs := []VC{{Name: "a", Nodes: 20, GPUsPerNode: 8}, {Name: "b", Nodes: 2, GPUsPerNode: 8}}
	pool := []VC{{Name: "all", Nodes: 1, GPUsPerNode: 338}}
	cases := []struct {
		base    []VC
		size    Size
		largest []int
		fit     bool
		want    []VC
		wantErr bool
	}{
		{base: vcs, size: Size{Factor: 0.5}, want: []VC{{"a", 10, 8}, {"b", 1, 8}}},
		{base: vcs, size: Size{Factor: 0.75}, want: []VC{{"a", 15, 8}, {"b", 2, 8}}}, // 1.5 rounds up
		{base: vcs, size: Size{Factor: 0.1}, want: []VC{{"a", 2, 8}, {"b", 1, 8}}},   // at least one node
		{base: vcs, size: Size{Factor: 0.1}, largest: []int{144, 9}, fit: true, want: []VC{{"a", 18, 8}, {"b", 2, 8}}},
		{base: vcs, size: Size{Factor: 0.1}, largest: []int{144, 9}, want: []VC{{"a", 2, 8}, {"b", 1, 8}}}, // no fit: the bound is ignored
		{base: vcs, size: Size{Factor: 1.25}, want: []VC{{"a", 25, 8}, {"b", 3, 8}}},
		{base: pool, size: Size{Factor: 0.5}, want: []VC{{"all", 1, 169}}}, // one node: its processors scale
		{base: pool, size: Size{Factor: 0.5}, largest: []int{256}, fit: true, want: []VC{{"all", 1, 256}}},
		{base: pool, size: Size{Nodes: 2}, want: []VC{{"all", 2, 338}}},
		{base: vcs, size: Size{Nodes: 2}, wantErr: true}, // node counts need one pool
		{base: vcs, size: Size{Factor: 0}, wantErr: true},
		{base: vcs, size: Size{Factor: math.Inf(1)}, wantErr: true},
		// Sizes beyond the bounds of a cluster are refused, not clamped to
		// them (or overflowed): the row would not be the size it says.
		{base: []VC{{"all", 1, maxGPUsPerNode}}, size: Size{Factor: 1}, want: []VC{{"all", 1, maxGPUsPerNode}}},
		{base: []VC{{"all", 1, maxGPUsPerNode}}, size: Size{Factor: 0.5}, want: []VC{{"all", 1, maxGPUsPerNode / 2}}},
		{base: []VC{{"all", 1, maxGPUsPerNode}}, size: Size{Factor: 2}, wantErr: true},
		{base: []VC{{"all", 1, math.MaxInt64}}, size: Size{Factor: 2}, wantErr: true},
		{base: []VC{{"all", 1, math.MaxInt64}}, size: Size{Factor: 0.5}, wantErr: true},
		{base: []VC{{"a", maxNodes, 8}}, size: Size{Factor: 1.5}, wantErr: true},
		{base: []VC{{"a", math.MaxInt64, 8}}, size: Size{Factor: 2}, wantErr: true},
		{base: []VC{{"all", 1, 8}}, size: Size{Nodes: maxNodes + 1}, wantErr: true},
	}
	for _, tc := range cases {
		got, err := Scale(tc.base, tc.size, tc.largest, tc.fit)
		if (err != nil) != tc.wantErr || err == nil && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Scale(%v, %s, fit %v) = %v, %v; want %v (error %v)", tc.base, tc.size, tc.fit, got, err, tc.want, tc.wantErr)
		}
	}
	if vcs[0].Nodes != 20 || pool[0].GPUsPerNode != 338 {
		t.Error("Scale changed its base")
	}
}

func TestParseSizes(t *testing.T) {
	got, err := ParseFactors(" 0.5, 0.75,1,1.25 ,1.5")
	if want := []Size{{Factor: 0.5}, {Factor: 0.75}, {Factor: 1}, {Factor: 1.25}, {Factor: 1.5}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseFactors = %v, %v; want %v", got, err, want)
	}
	if got, err := ParseNodeCounts("16,20,24"); err != nil || !reflect.DeepEqual(got, []Size{{Nodes: 16}, {Nodes: 20}, {Nodes: 24}}) {
		t.Errorf("ParseNodeCounts = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0.5,,1", "0", "-1", "NaN", "Inf", "1e9", "1,1", "x"} {
		if _, err := ParseFactors(bad); !errors.Is(err, ErrBadSizes) {
			t.Errorf("ParseFactors(%q): %v; want ErrBadSizes", bad, err)
		}
	}
	for _, bad := range []string{"", "0", "1.5", "2,2", "99999999"} {
		if _, err := ParseNodeCounts(bad); !errors.Is(err, ErrBadSizes) {
			t.Errorf("ParseNodeCounts(%q): %v; want ErrBadSizes", bad, err)
		}
	}
}

func FuzzParseSizes(f *testing.F) {
	for _, s := range []string{"0.5,1,1.5", "16,20", "", ",", "1e-300", "0x1p-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, parse := range []func(string) ([]Size, error){ParseFactors, ParseNodeCounts} {
			sizes, err := parse(s)
			if err != nil {
				if !errors.Is(err, ErrBadSizes) {
					t.Fatalf("%q: %v does not wrap ErrBadSizes", s, err)
				}
				continue
			}
			base := []VC{{Name: "all", Nodes: 3, GPUsPerNode: 4}}
			for _, z := range sizes {
				vcs, err := Scale(base, z, []int{5}, true)
				if err != nil || vcs[0].Nodes < 2 || vcs[0].Nodes > maxNodes {
					t.Fatalf("%q: size %s: %v, %v", s, z, vcs, err)
				}
			}
		}
	})
}

// TestSweepVenus sweeps the Venus slice on its two VCs from half to one and
// a half times their nodes (FIFO, blocking), each VC at least as large as its
// widest job: the size 1 is the plain replay (ANCHORS' FIFO), sizes below
// 0.9 stop at the widest job (144 GPUs on vcvGl, 16 on vcvlY), and queueing
// falls as capacity grows (utilization need not: a blocking queue idles a
// small cluster behind wide jobs, 0.66 on 160 GPUs, 0.94 on 176). Scaled exactly, half of Venus cannot run a third
// of its jobs.
func TestSweepVenus(t *testing.T) {
	tr, err := trace.Open(realTrace(t, "helios/venus_sept_2vc.csv"), "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(realTrace(t, "helios/venus_sept_2vc_vcs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cl Cluster
	if cl.VCs, err = ParseVCs(f); err != nil {
		t.Fatal(err)
	}
	w, base, err := SweepWorkload(tr, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Jobs) != 1867 || !reflect.DeepEqual(base, cl.VCs) {
		t.Fatalf("%d jobs on %v; want 1867 on %v", len(w.Jobs), base, cl.VCs)
	}
	sizes, err := ParseFactors("0.5,0.75,1,1.25,1.5")
	if err != nil {
		t.Fatal(err)
	}
	pts, err := Sweep(context.Background(), w, base, SweepConfig{Sizes: sizes, FitLargest: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := FromTrace(tr, cl)
	if err != nil {
		t.Fatal(err)
	}
	fifo, err := Run(t.Context(), plain, FIFO, Config{})
	if err != nil {
		t.Fatal(err)
	}
	one := pts[2]
	if one.NJobs != 1867 || one.NeverRun != 0 || one.AvgJCT != fifo.AvgJCT || one.AvgQueue != fifo.AvgQueue || one.P99Queue != fifo.P99Queue || one.GPUs != 176 {
		t.Errorf("size 1: %+v; want the plain replay's avg JCT %v, avg queue %v, p99 %v on 176 GPUs", one, fifo.AvgJCT, fifo.AvgQueue, fifo.P99Queue)
	}
	if math.Abs(one.AvgJCT-16534) > 1 {
		t.Errorf("size 1: avg JCT %.1f; want 16,534 (ANCHORS' FIFO)", one.AvgJCT)
	}
	for i, p := range pts {
		t.Logf("%s: %d GPUs, %d jobs, never %d, queue avg %.0f median %.0f p95 %.0f p99 %.0f, JCT %.0f, util %.3f",
			p.Size, p.GPUs, p.NJobs, p.NeverRun, p.AvgQueue, p.MedianQueue, p.P95Queue, p.P99Queue, p.AvgJCT, p.Utilization)
		if p.Utilization <= 0 || p.Utilization > 1 {
			t.Errorf("%s: utilization %v", p.Size, p.Utilization)
		}
		if i == 0 {
			continue
		}
		q := pts[i-1]
		switch {
		case p.GPUs == q.GPUs: // both at the largest jobs' bound: the same cluster
			if p.AvgQueue != q.AvgQueue || p.AvgJCT != q.AvgJCT || !reflect.DeepEqual(p.Cluster, q.Cluster) {
				t.Errorf("%s and %s: the same %d GPUs, different figures", p.Size, q.Size, p.GPUs)
			}
		case p.GPUs < q.GPUs || p.AvgQueue >= q.AvgQueue || p.P99Queue > q.P99Queue || p.AvgJCT >= q.AvgJCT:
			t.Errorf("%s after %s: %d GPUs, avg queue %.0f, p99 %.0f, JCT %.0f; want more GPUs, less queueing",
				p.Size, q.Size, p.GPUs, p.AvgQueue, p.P99Queue, p.AvgJCT)
		}
		if p.NeverRun != 0 {
			t.Errorf("%s: %d jobs never run though the VCs fit the largest", p.Size, p.NeverRun)
		}
	}
	// Fitting the largest jobs, half of Venus keeps 18 of vcvGl's 20 nodes
	// (its widest job has 144 GPUs) and both of vcvlY's (16 GPUs).
	if pts[0].NeverRun != 0 || pts[0].Cluster[0].Nodes != 18 || pts[0].Cluster[1].Nodes != 2 {
		t.Errorf("×0.5, fitting the largest jobs: %d never run on %v", pts[0].NeverRun, pts[0].Cluster)
	}
	// Scaled exactly, half of Venus is 10 + 1 nodes: the wider jobs never run.
	exact, err := Sweep(context.Background(), w, base, SweepConfig{Sizes: sizes[:1]})
	if err != nil {
		t.Fatal(err)
	}
	if p := exact[0]; p.NeverRun == 0 || p.NJobs+p.NeverRun != 1867 || p.Cluster[0].Nodes != 10 || p.Cluster[1].Nodes != 1 || p.NeverRunGPUTimeShare <= 0 {
		t.Errorf("×0.5 exact: %d never run (GPU time share %v) on %v", p.NeverRun, p.NeverRunGPUTimeShare, p.Cluster)
	}
	t.Logf("×0.5 exact: %d never run, %.3f of the GPU time", exact[0].NeverRun, exact[0].NeverRunGPUTimeShare)
}
