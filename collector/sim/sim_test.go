package sim

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func sec(n int) time.Duration { return time.Duration(n) * time.Second }

// newTestSim returns a Sim of cfg running jobs, publishing to a recorder, at
// Speedup 0 from t0.
func newTestSim(t *testing.T, cfg Config, work Workload) (*Sim, *recorder) {
	t.Helper()
	cfg.Start = t0
	if cfg.Cluster == "" {
		cfg.Cluster = "test"
	}
	rec := &recorder{}
	s, err := New(cfg, work, nil, rec, nil, nil, func() time.Time { return t0 })
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, rec
}

func TestScheduling(t *testing.T) {
	type action struct {
		at      int // seconds after t0; < 0: before the first step
		do      func(*Sim) error
		wantErr error
	}
	type want struct {
		start, end int // seconds after t0; start -1: never started
		state      schemas.JobState
		nodes      []string
	}
	type silence struct {
		node     string
		from, to int // no samples in [from, to), samples at to
	}
	job := func(id, vc string, gpus, submit, dur int) JobSpec {
		return JobSpec{ID: id, User: "u" + id, Name: "n" + id, VC: vc, GPUs: gpus, Submit: sec(submit), Duration: sec(dur)}
	}
	n1, n2, n3 := "sim-node-001", "sim-node-002", "sim-node-003"
	for _, tc := range []struct {
		name    string
		cfg     Config
		jobs    []JobSpec
		actions []action
		until   int
		want    map[string]want
		silent  []silence
		updates map[string]int64 // job → priority of its UPDATE event
	}{{
		name:  "fifo without backfill",
		cfg:   Config{Nodes: 1},
		jobs:  []JobSpec{job("a", "vc1", 8, 0, 100), job("b", "vc1", 8, 1, 50), job("c", "vc1", 1, 2, 10)},
		until: 200,
		want: map[string]want{
			"a": {0, 100, schemas.StateCompleted, []string{n1}},
			"b": {100, 150, schemas.StateCompleted, []string{n1}},
			"c": {150, 160, schemas.StateCompleted, []string{n1}},
		},
	}, {
		name: "backfill lets short jobs ahead without delaying the held job",
		cfg:  Config{Nodes: 1, Backfill: true},
		jobs: []JobSpec{
			{ID: "a", VC: "vc1", GPUs: 4, Duration: sec(90), TimeLimit: sec(100)},
			{ID: "b", VC: "vc1", GPUs: 8, Submit: sec(1), Duration: sec(10), TimeLimit: sec(10)},
			{ID: "c", VC: "vc1", GPUs: 2, Submit: sec(2), Duration: sec(50), TimeLimit: sec(60)},
			{ID: "d", VC: "vc1", GPUs: 2, Submit: sec(3), Duration: sec(50), TimeLimit: sec(200)},
			{ID: "e", VC: "vc1", GPUs: 8, Submit: sec(4), Duration: sec(50)},
		},
		until: 400,
		want: map[string]want{
			"a": {0, 90, schemas.StateCompleted, []string{n1}},
			"c": {2, 52, schemas.StateCompleted, []string{n1}},
			"b": {90, 100, schemas.StateCompleted, []string{n1}},
			"d": {100, 150, schemas.StateCompleted, []string{n1}},
			"e": {150, 200, schemas.StateCompleted, []string{n1}},
		},
	}, {
		name: "best fit on one node",
		cfg:  Config{Nodes: 2},
		jobs: []JobSpec{job("a", "", 6, 0, 100), job("b", "", 4, 0, 100), job("c", "", 2, 0, 100),
			job("d", "", 4, 0, 100), job("e", "", 1, 1, 10)},
		until: 300,
		want: map[string]want{
			"a": {0, 100, schemas.StateCompleted, []string{n1}},
			"b": {0, 100, schemas.StateCompleted, []string{n2}},
			"c": {0, 100, schemas.StateCompleted, []string{n1}},
			"d": {0, 100, schemas.StateCompleted, []string{n2}},
			"e": {100, 110, schemas.StateCompleted, []string{n1}},
		},
	}, {
		name: "large jobs take whole nodes",
		cfg:  Config{Nodes: 3},
		jobs: []JobSpec{job("a", "", 12, 0, 100), job("b", "", 1, 1, 10), job("c", "", 8, 2, 10),
			job("d", "", 24, 3, 10)},
		until: 300,
		want: map[string]want{
			"a": {0, 100, schemas.StateCompleted, []string{n1, n2}},
			"b": {1, 11, schemas.StateCompleted, []string{n3}},
			"c": {11, 21, schemas.StateCompleted, []string{n3}},
			"d": {100, 110, schemas.StateCompleted, []string{n1, n2, n3}},
		},
	}, {
		name:  "virtual clusters queue apart",
		cfg:   Config{Nodes: 2, VCs: "vc1:1,vc2:1"},
		jobs:  []JobSpec{job("a", "vc1", 8, 0, 100), job("b", "vc1", 1, 1, 10), job("c", "vc2", 1, 2, 10)},
		until: 200,
		want: map[string]want{
			"a": {0, 100, schemas.StateCompleted, []string{n1}},
			"b": {100, 110, schemas.StateCompleted, []string{n1}},
			"c": {2, 12, schemas.StateCompleted, []string{n2}},
		},
	}, {
		name: "priority reorders the queue",
		cfg:  Config{Nodes: 1},
		jobs: []JobSpec{job("a", "vc1", 8, 0, 100), job("b", "vc1", 8, 1, 50), job("c", "vc1", 8, 2, 30)},
		actions: []action{
			{at: 50, do: func(s *Sim) error { return s.SetPriority("c", 10) }},
			{at: 60, do: func(s *Sim) error { return s.SetPriority("zzz", 10) }, wantErr: ErrUnknownJob},
			{at: 60, do: func(s *Sim) error { return s.SetPriority("a", 5) }},
		},
		until: 300,
		want: map[string]want{
			"a": {0, 100, schemas.StateCompleted, []string{n1}},
			"b": {130, 180, schemas.StateCompleted, []string{n1}},
			"c": {100, 130, schemas.StateCompleted, []string{n1}},
		},
		updates: map[string]int64{"c": 10, "a": 5},
	}, {
		name: "final states and time limit",
		cfg:  Config{Nodes: 1},
		jobs: []JobSpec{
			{ID: "f", VC: "vc1", GPUs: 1, Duration: sec(100), State: schemas.StateFailed},
			{ID: "x", VC: "vc1", GPUs: 1, Duration: sec(100), State: schemas.StateCancelled},
			{ID: "t", VC: "vc1", GPUs: 1, Duration: sec(100), TimeLimit: sec(60)},
			{ID: "z", VC: "vc1", GPUs: 1, Duration: 0},
		},
		until: 200,
		want: map[string]want{
			"f": {0, 100, schemas.StateFailed, []string{n1}},
			"x": {0, 100, schemas.StateCancelled, []string{n1}},
			"t": {0, 60, schemas.StateTimeout, []string{n1}},
			"z": {0, 0, schemas.StateCompleted, []string{n1}},
		},
	}, {
		name: "powered-down node gets no jobs and sends nothing until awake",
		cfg:  Config{Nodes: 2, WakeDelay: sec(300)},
		jobs: []JobSpec{job("a", "", 8, 0, 1000), job("b", "", 1, 10, 100)},
		actions: []action{
			{at: -1, do: func(s *Sim) error { return s.PowerDown(n2) }},
			{at: 15, do: func(s *Sim) error { return s.PowerDown(n1) }, wantErr: ErrNodeBusy},
			{at: 15, do: func(s *Sim) error { return s.PowerDown("sim-node-999") }, wantErr: ErrUnknownNode},
			{at: 15, do: func(s *Sim) error { return s.PowerDown(n2) }},
			{at: 20, do: func(s *Sim) error { return s.PowerUp(n2) }},
			{at: 30, do: func(s *Sim) error { return s.PowerUp(n2) }}, // waking already: no change
			{at: 30, do: func(s *Sim) error { return s.PowerUp("nope") }, wantErr: ErrUnknownNode},
			{at: 1500, do: func(s *Sim) error { return s.PowerDown(n1) }},
		},
		until: 2000,
		want: map[string]want{
			"a": {0, 1000, schemas.StateCompleted, []string{n1}},
			"b": {320, 420, schemas.StateCompleted, []string{n2}},
		},
		silent: []silence{{n2, 0, 320}, {n1, 1510, 2010}},
	}, {
		name: "power-down cancels a wake-up",
		cfg:  Config{Nodes: 1, WakeDelay: sec(60)},
		jobs: []JobSpec{job("a", "vc1", 1, 0, 10)},
		actions: []action{
			{at: -1, do: func(s *Sim) error { return s.PowerDown(n1) }},
			{at: 10, do: func(s *Sim) error { return s.PowerUp(n1) }},
			{at: 30, do: func(s *Sim) error { return s.PowerDown(n1) }},
			{at: 100, do: func(s *Sim) error { return s.PowerUp(n1) }},
		},
		until:  300,
		want:   map[string]want{"a": {160, 170, schemas.StateCompleted, []string{n1}}},
		silent: []silence{{n1, 0, 160}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.SampleInterval = 10 * time.Second
			s, rec := newTestSim(t, tc.cfg, Jobs(tc.jobs))
			ctx := context.Background()
			for _, a := range tc.actions {
				if a.at >= 0 {
					if err := s.Advance(ctx, t0.Add(sec(a.at))); err != nil {
						t.Fatal(err)
					}
				}
				if err := a.do(s); !errors.Is(err, a.wantErr) {
					t.Fatalf("action at %ds: %v; want %v", a.at, err, a.wantErr)
				}
			}
			if err := s.Advance(ctx, t0.Add(sec(tc.until))); err != nil {
				t.Fatal(err)
			}
			p := rec.decode(t, "test")
			for id, w := range tc.want {
				e, ok := p.last[id]
				if !ok {
					t.Errorf("job %s: no events", id)
					continue
				}
				gotStart := -1
				if e.StartMillis != 0 {
					gotStart = int(e.StartMillis/1000 - t0.Unix())
				}
				gotEnd := int(e.EndMillis/1000 - t0.Unix())
				if gotStart != w.start || gotEnd != w.end || e.State != w.state || !slices.Equal(e.Nodes, w.nodes) {
					t.Errorf("job %s: start %d end %d state %v nodes %v; want %d %d %v %v",
						id, gotStart, gotEnd, e.State, e.Nodes, w.start, w.end, w.state, w.nodes)
				}
				if e.Type != schemas.JobEnd {
					t.Errorf("job %s: last event %v; want END", id, e.Type)
				}
			}
			var types = map[string][]schemas.JobEventType{}
			for _, e := range p.events {
				types[e.JobID] = append(types[e.JobID], e.Type)
				if e.Type == schemas.JobUpdate && e.Priority != tc.updates[e.JobID] {
					t.Errorf("job %s: UPDATE with priority %d; want %d", e.JobID, e.Priority, tc.updates[e.JobID])
				}
			}
			for id, ts := range types {
				want := []schemas.JobEventType{schemas.JobSubmit, schemas.JobStart, schemas.JobEnd}
				if _, ok := tc.updates[id]; ok {
					ts = slices.DeleteFunc(ts, func(t schemas.JobEventType) bool { return t == schemas.JobUpdate })
				}
				if !slices.Equal(ts, want) {
					t.Errorf("job %s: events %v; want %v", id, ts, want)
				}
			}
			for _, sl := range tc.silent {
				var in, after int
				for _, smp := range p.samples {
					ts := int(smp.s.TSMillis/1000 - t0.Unix())
					if smp.host == sl.node && ts >= sl.from && ts < sl.to {
						in++
					}
					if smp.host == sl.node && ts >= sl.to {
						after++
					}
				}
				if in != 0 || (sl.to < tc.until && after == 0) {
					t.Errorf("%s: %d samples in [%d, %d), %d after; want none, some", sl.node, in, sl.from, sl.to, after)
				}
			}
			checkConsistent(t, p)
		})
	}
}

func TestRejects(t *testing.T) {
	jobs := []JobSpec{
		{ID: "ok", VC: "vc1", GPUs: 8, Duration: sec(10)},
		{ID: "cpu", VC: "vc1", GPUs: 0, Duration: sec(10)},
		{ID: "vc", VC: "nope", GPUs: 1, Duration: sec(10)},
		{ID: "big", VC: "vc1", GPUs: 16, Duration: sec(10)},
		{ID: "neg", VC: "vc1", GPUs: 1, Duration: -sec(10)},
		{ID: "state", VC: "vc1", GPUs: 1, Duration: sec(10), State: schemas.StateRunning},
		{ID: "ok", VC: "vc1", GPUs: 1, Duration: sec(10)}, // duplicate while "ok" is pending... or running
	}
	s, rec := newTestSim(t, Config{Nodes: 1}, Jobs(jobs))
	if err := s.Advance(context.Background(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Rejected != 6 || st.Submitted != 1 || st.Finished != 1 {
		t.Errorf("Stats() = %+v; want 6 rejected, 1 submitted, 1 finished", st)
	}
	p := rec.decode(t, "test")
	if len(p.last) != 1 {
		t.Errorf("events of %d jobs; want 1", len(p.last))
	}
}
