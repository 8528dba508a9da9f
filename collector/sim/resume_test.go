package sim

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// TestAutoResume: with AutoResume, the job at the head of the queue that
// could run on powered-down nodes powers up just the nodes it lacks, holds
// them and any empty node it counted while they wake (they are not powered
// down under it, and no other job takes them, even one ranked above it
// since) and starts on them WakeDelay later; without it, or when even every
// node would not do, no node is woken.
func TestAutoResume(t *testing.T) {
	for _, tc := range []struct {
		name       string
		nodes      int
		down       []string // powered down at the start
		jobs       []JobSpec
		autoResume bool
		backfill   bool
		woken      []string         // waking at 20 s, held for job "b"
		heldUp     []string         // up at 20 s, held for job "b"
		priority   map[string]int64 // set at 20 s
		start      map[string]int64 // seconds after the start (-1 reported: never started)
	}{
		{
			name: "a one-node job wakes one node", nodes: 3, down: []string{"sim-node-002", "sim-node-003"}, autoResume: true,
			jobs: []JobSpec{
				{ID: "a", VC: "vc1", GPUs: 8, Duration: sec(1000)},
				{ID: "b", VC: "vc1", GPUs: 4, Submit: sec(10), Duration: sec(100)},
			},
			woken: []string{"sim-node-002"}, start: map[string]int64{"a": 0, "b": 310},
		},
		{
			name: "a two-node job wakes only the node it lacks", nodes: 3, down: []string{"sim-node-002", "sim-node-003"}, autoResume: true,
			jobs: []JobSpec{
				{ID: "b", VC: "vc1", GPUs: 16, Submit: sec(10), Duration: sec(100)},
			},
			woken: []string{"sim-node-002"}, heldUp: []string{"sim-node-001"}, start: map[string]int64{"b": 310},
		},
		{
			// c, ranked above b after b woke node 2, does not take it:
			// it starts when b ends.
			name: "the node woken for a job is not taken by a job ranked above it", nodes: 2, down: []string{"sim-node-002"}, autoResume: true,
			jobs: []JobSpec{
				{ID: "a", VC: "vc1", GPUs: 8, Duration: sec(1000)},
				{ID: "b", VC: "vc1", GPUs: 8, Submit: sec(10), Duration: sec(100)},
				{ID: "c", VC: "vc1", GPUs: 8, Submit: sec(15), Duration: sec(100)},
			},
			priority: map[string]int64{"c": 100},
			woken:    []string{"sim-node-002"}, start: map[string]int64{"a": 0, "b": 310, "c": 410},
		},
		{
			// b counts the empty node 2 and wakes node 3; node 2 is
			// b's from then on, so c, ranked first at 20 s, waits for b
			// to end (as in Slurm, which allocates b both nodes when it
			// powers node 3 up).
			name: "a two-node job holds the empty node it counted", nodes: 3, down: []string{"sim-node-003"}, autoResume: true,
			jobs: []JobSpec{
				{ID: "a", VC: "vc1", GPUs: 8, Duration: sec(1000)},
				{ID: "b", VC: "vc1", GPUs: 16, Submit: sec(10), Duration: sec(100)},
				{ID: "c", VC: "vc1", GPUs: 4, Submit: sec(15), Duration: sec(100)},
			},
			priority: map[string]int64{"c": 100},
			woken:    []string{"sim-node-003"}, heldUp: []string{"sim-node-002"}, start: map[string]int64{"a": 0, "b": 310, "c": 410},
		},
		{
			// With backfill, c's shadow time counts node 2 free once b
			// has run there to its limit (310 + 100 s), not once node 2
			// is up (310 s): d, which ends at 350 s, may start at once on
			// node 3 beside e.
			name: "backfill counts a held node free after its job", nodes: 3, down: []string{"sim-node-002"}, autoResume: true, backfill: true,
			jobs: []JobSpec{
				{ID: "a", VC: "vc1", GPUs: 8, Duration: sec(1000), TimeLimit: sec(1000)},
				{ID: "e", VC: "vc1", GPUs: 4, Duration: sec(5000), TimeLimit: sec(5000)},
				{ID: "b", VC: "vc1", GPUs: 8, Submit: sec(10), Duration: sec(100), TimeLimit: sec(100)},
				{ID: "c", VC: "vc1", GPUs: 8, Submit: sec(15), Duration: sec(100), TimeLimit: sec(2000)},
				{ID: "d", VC: "vc1", GPUs: 4, Submit: sec(100), Duration: sec(250), TimeLimit: sec(250)},
			},
			priority: map[string]int64{"c": 100},
			woken:    []string{"sim-node-002"}, start: map[string]int64{"a": 0, "e": 0, "b": 310, "c": 410, "d": 100},
		},
		{
			name: "without auto-resume the job waits for the busy node", nodes: 2, down: []string{"sim-node-002"},
			jobs: []JobSpec{
				{ID: "a", VC: "vc1", GPUs: 8, Duration: sec(1000)},
				{ID: "b", VC: "vc1", GPUs: 8, Submit: sec(10), Duration: sec(100)},
			},
			start: map[string]int64{"a": 0, "b": 1000},
		},
		{
			// Until a ends, even both nodes would not do; then the node
			// b lacks is woken.
			name: "no node is woken while all of them would not do", nodes: 2, down: []string{"sim-node-002"}, autoResume: true,
			jobs: []JobSpec{
				{ID: "a", VC: "vc1", GPUs: 8, Duration: sec(1000)},
				{ID: "b", VC: "vc1", GPUs: 16, Submit: sec(10), Duration: sec(100)},
			},
			start: map[string]int64{"a": 0, "b": 1300},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			s, err := New(Config{Cluster: "test", Nodes: tc.nodes, Start: t0, AutoResume: tc.autoResume, Backfill: tc.backfill}, Jobs(tc.jobs), nil, rec, nil, nil, func() time.Time { return t0 })
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tc.down {
				if err := s.PowerDown(n); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Advance(context.Background(), t0.Add(sec(20))); err != nil {
				t.Fatal(err)
			}
			var woken, heldUp []string
			for _, n := range s.Nodes() {
				if n.State == NodeUp && n.ResumedFor == "b" {
					heldUp = append(heldUp, n.Name)
					if err := s.PowerDown(n.Name); !errors.Is(err, ErrNodeBusy) {
						t.Errorf("PowerDown(%s) while it is held for b = %v; want ErrNodeBusy", n.Name, err)
					}
				}
				if n.State != NodeWaking {
					continue
				}
				woken = append(woken, n.Name)
				if n.ResumedFor != "b" {
					t.Errorf("%s waking for %q; want b", n.Name, n.ResumedFor)
				}
				if err := s.PowerDown(n.Name); !errors.Is(err, ErrNodeBusy) {
					t.Errorf("PowerDown(%s) while it wakes for b = %v; want ErrNodeBusy", n.Name, err)
				}
			}
			if !slices.Equal(woken, tc.woken) {
				t.Errorf("waking at 20 s: %v; want %v", woken, tc.woken)
			}
			if !slices.Equal(heldUp, tc.heldUp) {
				t.Errorf("up and held for b at 20 s: %v; want %v", heldUp, tc.heldUp)
			}
			for id, p := range tc.priority {
				if err := s.SetPriority(id, p); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Advance(context.Background(), t0.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			p := rec.decode(t, "test")
			for id, want := range tc.start {
				got := int64(-1)
				if ms := p.last[id].StartMillis; ms != 0 {
					got = ms/1000 - t0.Unix()
				}
				if got != want {
					t.Errorf("job %s started at %d s; want %d", id, got, want)
				}
			}
			// Once b has started, its nodes are no longer held.
			for _, n := range s.Nodes() {
				if n.ResumedFor != "" && tc.start["b"] >= 0 {
					t.Errorf("%s still held for %s after it started", n.Name, n.ResumedFor)
				}
			}
		})
	}
}
