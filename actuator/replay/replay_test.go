package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

type hj struct {
	id               string
	vc, submit, gpus int
	run, req         int64
	user             string // default: the id (every job its own user)
}

func workload(vcs []VC, jobs []hj) *Workload {
	w := &Workload{VCs: vcs}
	for _, j := range jobs {
		u := j.user
		if u == "" {
			u = "u-" + j.id
		}
		w.Jobs = append(w.Jobs, Job{ID: j.id, User: u, VC: j.vc, Submit: 1_700_000_000 + int64(j.submit), Run: j.run, GPUs: j.gpus, ReqTime: j.req})
	}
	return w
}

// TestHandChecked replays small traces whose schedules were worked out by
// hand (the comments give them).
func TestHandChecked(t *testing.T) {
	twoNodes := []VC{{Name: "vc", Nodes: 2, GPUsPerNode: 4}}
	oneNode := []VC{{Name: "vc", Nodes: 1, GPUsPerNode: 4}}
	// a holds node 0; b needs both nodes whole and blocks; c and d wait
	// behind it under FIFO, go ahead of it under SJF.
	blocking := []hj{
		{id: "a", submit: 0, gpus: 4, run: 100},
		{id: "b", submit: 1, gpus: 8, run: 50},
		{id: "c", submit: 2, gpus: 1, run: 10},
		{id: "d", submit: 3, gpus: 2, run: 20},
	}
	// One node: a holds it until 100. QSSF orders by run × GPUs (the
	// cold-start prediction is the time limit, equal to the run here):
	// c (30 GPU·s), d (60), b (80); SJF and FIFO by run: b, then c, d.
	service := []hj{
		{id: "a", submit: 0, gpus: 4, run: 100, req: 100},
		{id: "b", submit: 1, gpus: 4, run: 20, req: 20},
		{id: "c", submit: 2, gpus: 1, run: 30, req: 30},
		{id: "d", submit: 3, gpus: 2, run: 30, req: 30},
	}
	// Backfill on one node, estimates from the limits: b (whole node)
	// blocks with shadow time 100 (a's limit); c (ends by 62) and e (by
	// 9) start ahead of it, d (limit 200) may not.
	backfill := []hj{
		{id: "a", submit: 0, gpus: 2, run: 100, req: 100},
		{id: "b", submit: 1, gpus: 4, run: 10, req: 10},
		{id: "c", submit: 2, gpus: 1, run: 50, req: 60},
		{id: "d", submit: 3, gpus: 1, run: 50, req: 200},
		{id: "e", submit: 4, gpus: 1, run: 5, req: 5},
	}
	for _, tc := range []struct {
		name      string
		vcs       []VC
		jobs      []hj
		pol       Policy
		backfill  bool
		wantStart map[string]int64
		wantJCT   float64
		wantQueue float64
		wantBSD   float64 // 0: not checked
	}{
		// a 0–100 on node 0; b 100–150 on both; c, d 150 on node 0
		// (tightest). JCTs 100, 149, 158, 167.
		{name: "fifo blocks", vcs: twoNodes, jobs: blocking, pol: FIFO,
			wantStart: map[string]int64{"a": 0, "b": 100, "c": 150, "d": 150}, wantJCT: 574.0 / 4, wantQueue: 394.0 / 4},
		// c at 2 and d at 3 on node 1; b when a ends. JCTs 100, 149,
		// 10, 20; slowdowns 1, (99+50)/50, 1, 1.
		{name: "sjf", vcs: twoNodes, jobs: blocking, pol: SJF,
			wantStart: map[string]int64{"a": 0, "b": 100, "c": 2, "d": 3}, wantJCT: 279.0 / 4, wantQueue: 99.0 / 4, wantBSD: (3 + 149.0/50) / 4},
		{name: "qssf with cold-start predictions orders as sjf here", vcs: twoNodes, jobs: blocking, pol: QSSF,
			wantStart: map[string]int64{"a": 0, "b": 100, "c": 2, "d": 3}, wantJCT: 279.0 / 4, wantQueue: 99.0 / 4},
		// c and d 100–130 side by side, then b 130–150. JCTs 100, 149,
		// 128, 127.
		{name: "qssf orders by service time", vcs: oneNode, jobs: service, pol: QSSF,
			wantStart: map[string]int64{"a": 0, "b": 130, "c": 100, "d": 100}, wantJCT: 504.0 / 4, wantQueue: 324.0 / 4},
		// The oracle on the same key as QSSF: c (30 GPU·s), d (60), b
		// (80), as above.
		{name: "sjf-gpu orders by true service time", vcs: oneNode, jobs: service, pol: SJFGPU,
			wantStart: map[string]int64{"a": 0, "b": 130, "c": 100, "d": 100}, wantJCT: 504.0 / 4, wantQueue: 324.0 / 4},
		// b 100–120, then c and d 120–150. JCTs 100, 119, 148, 147.
		{name: "sjf orders by run time", vcs: oneNode, jobs: service, pol: SJF,
			wantStart: map[string]int64{"a": 0, "b": 100, "c": 120, "d": 120}, wantJCT: 514.0 / 4, wantQueue: 334.0 / 4},
		// a 0–100, c 2–52, e 4–9, b 100–110, d 110–160. JCTs 100, 109,
		// 50, 157, 5.
		{name: "fifo with backfill", vcs: oneNode, jobs: backfill, pol: FIFO, backfill: true,
			wantStart: map[string]int64{"a": 0, "b": 100, "c": 2, "d": 110, "e": 4}, wantJCT: 421.0 / 5, wantQueue: 206.0 / 5},
		// Without backfill: b 100–110, then c, d, e at 110. JCTs 100,
		// 109, 158, 157, 111.
		{name: "fifo without backfill", vcs: oneNode, jobs: backfill, pol: FIFO,
			wantStart: map[string]int64{"a": 0, "b": 100, "c": 110, "d": 110, "e": 110}, wantJCT: 635.0 / 5, wantQueue: 420.0 / 5},
		// Tightest node: x (4 GPUs) on node 0 until 1, y (1) on node 1;
		// at 2 z (1) goes to node 1 (3 free) rather than node 0 (4),
		// so that w (4) fits on node 0 at 3. First fit would have put
		// z on node 0 and w would wait until 100.
		{name: "tightest node", vcs: twoNodes, pol: FIFO, jobs: []hj{
			{id: "x", submit: 0, gpus: 4, run: 1},
			{id: "y", submit: 0, gpus: 1, run: 100},
			{id: "z", submit: 2, gpus: 1, run: 100},
			{id: "w", submit: 3, gpus: 4, run: 10},
		}, wantStart: map[string]int64{"x": 0, "y": 0, "z": 2, "w": 3}, wantJCT: (1 + 100 + 100 + 10) / 4.0},
		// Each VC is separate: b blocks vc 0, not c in vc 1. A job of
		// zero run time ends when it starts.
		{name: "virtual clusters are separate", vcs: []VC{{"v0", 1, 4}, {"v1", 1, 4}}, pol: FIFO, jobs: []hj{
			{id: "a", vc: 0, submit: 0, gpus: 4, run: 100},
			{id: "b", vc: 0, submit: 1, gpus: 1, run: 10},
			{id: "c", vc: 1, submit: 2, gpus: 4, run: 0},
			{id: "d", vc: 1, submit: 2, gpus: 4, run: 5},
		}, wantStart: map[string]int64{"a": 0, "b": 100, "c": 2, "d": 2}, wantJCT: (100 + 109 + 0 + 5) / 4.0, wantQueue: 99.0 / 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := workload(tc.vcs, tc.jobs)
			res, err := Run(t.Context(), w, tc.pol, Config{Backfill: tc.backfill})
			if err != nil {
				t.Fatal(err)
			}
			for i, j := range w.Jobs {
				if want := tc.wantStart[j.ID]; res.Start[i]-1_700_000_000 != want {
					t.Errorf("job %s started at %d; want %d", j.ID, res.Start[i]-1_700_000_000, want)
				}
				if res.End[i] != res.Start[i]+j.Run {
					t.Errorf("job %s: end %d, start %d, run %d", j.ID, res.End[i], res.Start[i], j.Run)
				}
			}
			if res.NJobs != len(tc.jobs) || math.Abs(res.AvgJCT-tc.wantJCT) > 1e-9 || math.Abs(res.AvgQueue-tc.wantQueue) > 1e-9 {
				t.Errorf("n %d avg JCT %v queue %v; want %d, %v, %v", res.NJobs, res.AvgJCT, res.AvgQueue, len(tc.jobs), tc.wantJCT, tc.wantQueue)
			}
			if tc.wantBSD != 0 && math.Abs(res.AvgBoundedSlowdown-tc.wantBSD) > 1e-9 {
				t.Errorf("avg bounded slowdown %v; want %v", res.AvgBoundedSlowdown, tc.wantBSD)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	// 100 one-GPU jobs, one node of one GPU, each of 1 s, all at once:
	// job k waits k s. p99 (nearest rank) is the 99th smallest wait, 98.
	var jobs []hj
	for k := range 100 {
		jobs = append(jobs, hj{id: string(rune('A' + k)), gpus: 1, run: 1})
	}
	res, err := Run(t.Context(), workload([]VC{{"v", 1, 1}}, jobs), FIFO, Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Bounded slowdown with run 1 < 10: max(1, (k+1)/10).
	var bsd float64
	for k := range 100 {
		bsd += math.Max(1, float64(k+1)/10)
	}
	if res.P99Queue != 98 || res.MaxQueue != 99 || res.AvgQueue != 49.5 || res.AvgJCT != 50.5 ||
		math.Abs(res.AvgBoundedSlowdown-bsd/100) > 1e-9 || res.Makespan != 100 || res.SlowdownBoundS != 10 {
		t.Fatalf("got %+v", res)
	}
	if g := GapClosed(100, 50, 55); math.Abs(g-0.9) > 1e-12 {
		t.Errorf("GapClosed(100, 50, 55) = %v; want 0.9", g)
	}
	if g := GapClosed(1, 1, 1); !math.IsNaN(g) {
		t.Errorf("GapClosed with no gap = %v; want NaN", g)
	}
}

func TestRunRejects(t *testing.T) {
	vcs := []VC{{"v", 1, 4}}
	for _, tc := range []struct {
		name string
		w    *Workload
		pol  Policy
		cfg  Config
		want string
	}{
		{"unknown policy", workload(vcs, nil), "lifo", Config{}, "unknown policy"},
		{"no VCs", &Workload{}, FIFO, Config{}, "no virtual clusters"},
		{"too large", workload(vcs, []hj{{id: "x", gpus: 5, run: 1}}), FIFO, Config{}, "GPUs"},
		{"no GPUs", workload(vcs, []hj{{id: "x", gpus: 0, run: 1}}), FIFO, Config{}, "GPUs"},
		{"negative run", workload(vcs, []hj{{id: "x", gpus: 1, run: -1}}), FIFO, Config{}, "run"},
		{"unsorted", workload(vcs, []hj{{id: "x", submit: 5, gpus: 1}, {id: "y", submit: 1, gpus: 1}}), FIFO, Config{}, "order of submission"},
		{"bad VC", &Workload{VCs: vcs, Jobs: []Job{{ID: "x", VC: 3, GPUs: 1}}}, FIFO, Config{}, "VC 3"},
		{"bad config", workload(vcs, nil), FIFO, Config{RefitEvery: -1}, "refit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(t.Context(), tc.w, tc.pol, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v; want an error about %q", err, tc.want)
			}
		})
	}
}

// TestQSSFCausal checks that QSSF's predictions use only jobs that had
// ended, in the replay's own timeline, before the decision: lengthening the
// run of a job J moves only J's end (nothing is preempted, and until J's
// old end the replays are the same), so no prediction made before J's old
// end may change. It also checks that the outcome is learned: some later
// prediction does change.
func TestQSSFCausal(t *testing.T) {
	var jobs []hj
	// Three users with repeated, distinct run times, on a small cluster
	// so that queues form and starts move under the policy.
	for k := range 300 {
		u := []string{"ann", "bob", "cid"}[k%3]
		run := []int64{30, 600, 5000}[k%3] + int64(k%7)
		jobs = append(jobs, hj{id: "j" + string(rune('0'+k%10)) + string(rune('a'+k/10%26)) + string(rune('a'+k/260)), user: u, submit: k * 40, gpus: 1 + k%4, run: run})
	}
	base := workload([]VC{{"v", 2, 4}}, jobs)
	run := func(w *Workload) (*engine, Result) {
		e := newEngine(w, QSSF, Config{}.withDefaults())
		if err := e.run(t.Context()); err != nil {
			t.Fatal(err)
		}
		return e, e.result()
	}
	e0, r0 := run(base)
	// J: a job of ann's that ends mid-trace.
	J := -1
	for i, j := range base.Jobs {
		if j.User == "ann" && r0.End[i] > base.Jobs[100].Submit {
			J = i
			break
		}
	}
	oldEnd := r0.End[J]
	changed := &Workload{VCs: base.VCs, Jobs: slices.Clone(base.Jobs)}
	changed.Jobs[J].Run = 20000
	e1, _ := run(changed)
	later := 0
	for i, j := range base.Jobs {
		p0, p1 := e0.pred.pred[i], e1.pred.pred[i]
		if j.Submit < oldEnd && p0 != p1 {
			t.Fatalf("job %s submitted at %d, before J ended at %d: predicted %v, %v with J's run changed", j.ID, j.Submit, oldEnd, p0, p1)
		}
		if j.Submit > oldEnd && j.User == "ann" && p0 != p1 {
			later++
		}
	}
	if later == 0 {
		t.Fatal("no prediction after J ended changed: J's outcome was not learned")
	}
}

// TestRunProgressAndCancel checks that a replay reports how many jobs have
// ended every ProgressEvery and stops, naming the policy and the cause, once
// its context is cancelled.
func TestRunProgressAndCancel(t *testing.T) {
	var jobs []hj
	n := 5*ProgressEvery + 7
	for k := range n {
		jobs = append(jobs, hj{id: fmt.Sprint("j", k), user: fmt.Sprint("u", k%5), submit: k, gpus: 1 + k%3, run: int64(1 + k%50)})
	}
	w := workload([]VC{{"v", 2, 4}}, jobs)
	for _, p := range Policies {
		var seen []int
		if _, err := Run(t.Context(), w, p, Config{Progress: func(ended, total int) {
			if total != n {
				t.Errorf("%s: progress total %d; want %d", p, total, n)
			}
			seen = append(seen, ended)
		}}); err != nil {
			t.Fatal(err)
		}
		if want := []int{ProgressEvery, 2 * ProgressEvery, 3 * ProgressEvery, 4 * ProgressEvery, 5 * ProgressEvery}; !slices.Equal(seen, want) {
			t.Errorf("%s: progress at %v ended jobs; want %v", p, seen, want)
		}

		stop := errors.New("operator pressed Ctrl-C")
		ctx, cancel := context.WithCancelCause(t.Context())
		_, err := Run(ctx, w, p, Config{Progress: func(ended, _ int) {
			if ended == 2*ProgressEvery {
				cancel(stop)
			}
		}})
		if want := fmt.Sprintf("replay: %s stopped after %d of %d jobs ended", p, 2*ProgressEvery, n); !errors.Is(err, stop) || !strings.Contains(err.Error(), want) {
			t.Errorf("cancelled %s replay: %v; want %q and the cause", p, err, want)
		}
	}
}
