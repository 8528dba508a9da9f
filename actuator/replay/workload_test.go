package replay

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/ingest/trace"
)

func TestParseVCs(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []VC
		err      string // substring; "" means no error
	}{
		{"venus", "vc,nodes,gpus_per_node\nvcvGl,20,8\nvcvlY,2,8\n", []VC{{"vcvGl", 20, 8}, {"vcvlY", 2, 8}}, ""},
		{"default gpus and spaces, BOM", "\uFEFFVC, Nodes\n a , 3 \n", []VC{{"a", 3, 8}}, ""},
		{"BOM before a quoted header", "\uFEFF\"vc\",\"nodes\"\r\n\"a\",3\r\n", []VC{{"a", 3, 8}}, ""},
		{"columns in another order", "gpus_per_node,vc,nodes\n4,x,2\n", []VC{{"x", 2, 4}}, ""},
		{"empty", "", nil, "empty file"},
		{"no vc column", "name,nodes\na,1\n", nil, `no column "vc"`},
		{"no rows", "vc,nodes\n", nil, "no virtual clusters"},
		{"bad nodes", "vc,nodes\na,zero\n", nil, "line 2: nodes"},
		{"zero nodes", "vc,nodes\na,0\n", nil, "line 2: nodes"},
		{"bad gpus", "vc,nodes,gpus_per_node\na,1,-8\n", nil, "line 2: gpus_per_node"},
		{"twice", "vc,nodes\na,1\na,2\n", nil, "line 3: vc \"a\" appears twice"},
		{"empty name", "vc,nodes\n,1\n", nil, "line 2: vc"},
		{"cells", "vc,nodes\na,1,3\n", nil, "line 2: 3 cells"},
		{"duplicate column", "vc,vc,nodes\na,b,1\n", nil, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseVCs(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrBadVCs) {
					t.Fatalf("ParseVCs(%q) = %v, %v; want an ErrBadVCs about %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || len(got) != len(tc.want) {
				t.Fatalf("ParseVCs(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("ParseVCs(%q) = %v; want %v", tc.in, got, tc.want)
				}
			}
		})
	}
}

func FuzzParseVCs(f *testing.F) {
	f.Add("vc,nodes,gpus_per_node\nvcvGl,20,8\nvcvlY,2,8\n")
	f.Add("vc,nodes\na,1\n")
	f.Add("vc,nodes\n\"a\nb\",1\n")
	f.Add("\uFEFF\"vc\",\"nodes\"\na,1\n")
	f.Fuzz(func(t *testing.T, in string) {
		vcs, err := ParseVCs(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrBadVCs) {
				t.Fatalf("error %v does not wrap ErrBadVCs", err)
			}
			return
		}
		if len(vcs) == 0 {
			t.Fatal("no error and no VCs")
		}
		for _, v := range vcs {
			if v.Name == "" || v.Nodes < 1 || v.GPUsPerNode < 1 {
				t.Fatalf("accepted %+v", v)
			}
		}
	})
}

func TestFromTrace(t *testing.T) {
	base := time.Date(2020, 9, 1, 0, 0, 0, 0, time.UTC)
	job := func(id, vc string, gpus int, submit, run int) trace.Job {
		return trace.Job{ID: id, User: "u", Queue: vc, GPUs: gpus, Procs: -1, ReqProcs: -1, Submit: base.Add(time.Duration(submit) * time.Second),
			Run: time.Duration(run) * time.Second, ReqTime: -1}
	}
	helios := &trace.Trace{Format: "helios", Jobs: []trace.Job{
		job("late", "a", 8, 50, 10),
		job("early", "b", 1, 10, 5),
		job("cpu", "a", 0, 11, 5),
		job("norun", "a", 1, 12, -1),
		job("nowhere", "zz", 1, 13, 5),
		job("huge", "b", 17, 14, 5),
		job("tie", "a", 2, 50, 1),
	}}
	w, err := FromTrace(helios, Cluster{VCs: []VC{{"a", 2, 8}, {"b", 2, 8}}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range w.Jobs {
		ids = append(ids, j.ID)
	}
	if strings.Join(ids, ",") != "early,late,tie" {
		t.Errorf("jobs %v; want early, late, tie (by submission, ties in file order)", ids)
	}
	want := map[string]int{SkipNoGPUs: 1, SkipNoRun: 1, SkipUnknownVC: 1, SkipTooLarge: 1}
	for k, v := range want {
		if w.Skipped[k] != v {
			t.Errorf("skipped %v; want %v", w.Skipped, want)
		}
	}
	if w.Jobs[0].VC != 1 || w.Jobs[1].VC != 0 || w.Jobs[0].Run != 5 || w.Jobs[0].ReqTime != -1 {
		t.Errorf("jobs %+v", w.Jobs)
	}
	// Pooled: VCs ignored, 17 GPUs fit 4 × 8.
	w, err = FromTrace(helios, Cluster{Nodes: 4, GPUsPerNode: 8})
	if err != nil || len(w.Jobs) != 5 || w.Skipped[SkipUnknownVC] != 0 {
		t.Errorf("pooled: %v jobs, skipped %v, %v; want 5", len(w.Jobs), w.Skipped, err)
	}
	if _, err := FromTrace(helios, Cluster{}); err == nil {
		t.Error("helios without a cluster: no error")
	}
	swf := &trace.Trace{Format: "swf", MaxProcs: 64, Jobs: []trace.Job{
		{ID: "1", Submit: base, Run: time.Minute, Procs: 16, ReqProcs: 32, ReqTime: time.Hour},
		{ID: "2", Submit: base, Run: time.Minute, Procs: -1, ReqProcs: 4, ReqTime: -1},
		{ID: "3", Submit: base, Run: time.Minute, Procs: 65, ReqProcs: -1},
	}}
	w, err = FromTrace(swf, Cluster{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.VCs) != 1 || w.VCs[0].GPUsPerNode != 64 || w.VCs[0].Nodes != 1 || len(w.Jobs) != 2 ||
		w.Jobs[0].GPUs != 16 || w.Jobs[0].ReqProcs != 32 || w.Jobs[0].ReqTime != 3600 || w.Jobs[1].GPUs != 4 || w.Skipped[SkipTooLarge] != 1 {
		t.Errorf("swf: %+v", w)
	}
	swf.MaxProcs = 0
	if _, err := FromTrace(swf, Cluster{}); err == nil {
		t.Error("swf without MaxProcs: no error")
	}
	if _, err := FromTrace(swf, Cluster{Nodes: 2}); err == nil {
		t.Error("nodes without GPUs per node: no error")
	}
}

// TestFromTraceUnknownVCs: the jobs left out for a VC the VC file lacks are
// counted by VC name too.
func TestFromTraceUnknownVCs(t *testing.T) {
	base := time.Date(2020, 9, 1, 0, 0, 0, 0, time.UTC)
	tr := &trace.Trace{Format: "helios"}
	for i, vc := range []string{"a", "zz", "y", "zz", "a", "zz", ""} {
		tr.Jobs = append(tr.Jobs, trace.Job{ID: strconv.Itoa(i), Queue: vc, GPUs: 1, Procs: -1, ReqProcs: -1, Submit: base, Run: time.Second, ReqTime: -1})
	}
	for _, tc := range []struct {
		name string
		cl   Cluster
		want map[string]int
	}{
		{"VC file", Cluster{VCs: []VC{{"a", 1, 8}}}, map[string]int{"zz": 3, "y": 1, "": 1}},
		{"every VC known", Cluster{VCs: []VC{{"a", 1, 8}, {"zz", 1, 8}, {"y", 1, 8}, {"", 1, 8}}}, map[string]int{}},
		{"pooled", Cluster{Nodes: 1, GPUsPerNode: 8}, map[string]int{}},
	} {
		w, err := FromTrace(tr, tc.cl)
		if err != nil {
			t.Fatalf("%s: FromTrace error %v", tc.name, err)
		}
		if !reflect.DeepEqual(w.UnknownVCs, tc.want) {
			t.Errorf("%s: FromTrace UnknownVCs = %v (skipped %v); want %v", tc.name, w.UnknownVCs, w.Skipped, tc.want)
		}
		if w.Skipped[SkipUnknownVC] != sumInts(tc.want) {
			t.Errorf("%s: FromTrace skipped %v; want %s %d", tc.name, w.Skipped, SkipUnknownVC, sumInts(tc.want))
		}
	}
}

func sumInts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestFromTraceMaxProcs: an SWF machine from the header is bounded like
// --gpus-per-node; a larger one is refused, not run as a smaller one.
func TestFromTraceMaxProcs(t *testing.T) {
	job := trace.Job{ID: "1", Submit: time.Unix(0, 0), Run: time.Minute, Procs: 1, ReqProcs: -1, GPUs: -1, ReqTime: -1}
	for _, tc := range []struct {
		maxProcs int
		err      string // "": accepted
	}{
		{1, ""},
		{maxGPUsPerNode, ""},
		{maxGPUsPerNode + 1, "MaxProcs"},
		{2_000_000, "2000000"},
		{math.MaxInt64, "9223372036854775807"},
	} {
		tr := &trace.Trace{Format: "swf", MaxProcs: tc.maxProcs, Jobs: []trace.Job{job}}
		w, err := FromTrace(tr, Cluster{})
		if tc.err == "" {
			if err != nil || w.VCs[0].GPUsPerNode != tc.maxProcs {
				t.Errorf("FromTrace(MaxProcs %d) = %v, %v; want one node of %d", tc.maxProcs, w, err, tc.maxProcs)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("FromTrace(MaxProcs %d) error %v; want one naming %q", tc.maxProcs, err, tc.err)
		}
		if _, _, err := SweepWorkload(tr, Cluster{}); err == nil {
			t.Errorf("SweepWorkload(MaxProcs %d): no error", tc.maxProcs)
		}
		// --nodes and --gpus-per-node replace the header's size.
		if _, err := FromTrace(tr, Cluster{Nodes: 2, GPUsPerNode: 4}); err != nil {
			t.Errorf("FromTrace(MaxProcs %d, 2 nodes × 4) error %v", tc.maxProcs, err)
		}
	}
}

// FuzzReplay replays an SWF trace read from fuzzed text under every policy,
// with and without backfill: whatever the reader accepts runs to the end
// without error or panic, every job starts no earlier than its submission and
// ends after its run.
func FuzzReplay(f *testing.F) {
	f.Add("; MaxProcs: 8\n1 0 0 10 4 -1 -1 4 20 -1 1 1 1 1 1 -1 -1 -1\n2 1 0 5 8 -1 -1 8 5 -1 1 2 1 1 1 -1 -1 -1\n3 2 0 0 1 -1 -1 1 -1 -1 1 1 1 1 1 -1 -1 -1\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := trace.ReadSWF(strings.NewReader(in))
		if err != nil || tr.MaxProcs <= 0 || tr.MaxProcs > 4096 {
			return
		}
		w, err := FromTrace(tr, Cluster{})
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Jobs) > 200 {
			return
		}
		for _, p := range Policies {
			for _, bf := range []bool{false, true} {
				r, err := Run(t.Context(), w, p, Config{Backfill: bf})
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				for i, j := range w.Jobs {
					if r.Start[i] < j.Submit || r.End[i] != r.Start[i]+j.Run {
						t.Fatalf("%s: job %s submit %d start %d end %d run %d", p, j.ID, j.Submit, r.Start[i], r.End[i], j.Run)
					}
				}
			}
		}
	})
}
