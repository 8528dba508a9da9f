package sim

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/collector/sim/simtest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// pipeline is the path of `heliostat up` (simtest.Pipeline); tee keeps a
// copy of what was published.
type pipeline struct {
	*simtest.Pipeline
	tee *tee
}

func newPipeline(t *testing.T) *pipeline {
	t.Helper()
	sp := simtest.New(t)
	return &pipeline{Pipeline: sp, tee: &tee{pub: sp.Pub}}
}

// stored waits until ClickHouse holds everything published so far.
func (p *pipeline) stored(t *testing.T, cluster string) published {
	t.Helper()
	if err := p.Pub.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := p.tee.rec.decode(t, cluster)
	waitRows(t, p.Conn, p.DB+".gpu_samples", uint64(len(got.samples)))
	waitRows(t, p.Conn, p.DB+".job_events FINAL", uint64(len(got.events)))
	waitRows(t, p.Conn, p.DB+".gpu_allocations FINAL", uint64(len(got.intervals())))
	return got
}

// TestRestartContinuesJobs: a simulator that stops with KeepJobs (as up's
// does at Ctrl-C, or at --sim.duration) ends no job: a later one restored
// from its Snapshot ends the running job at its own end, in its own state,
// starts the pending one, and the GPU energy counters go on rising. In
// ClickHouse every job ends COMPLETED, every allocation closes when its job
// ends, and no GPU has two samples at one time. Before, every clean stop
// ended the running job as NODE_FAIL and the pending one as CANCELLED.
func TestRestartContinuesJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse and a broker; skipped with -short")
	}
	p := newPipeline(t)
	jobs := []JobSpec{
		{ID: "a", User: "ua", VC: "vc1", GPUs: 8, Duration: 2 * time.Hour, TimeLimit: 4 * time.Hour},
		{ID: "c", User: "uc", VC: "vc1", GPUs: 4, Duration: 30 * time.Minute},
		{ID: "b", User: "ub", VC: "vc1", GPUs: 16, Submit: 10 * time.Minute, Duration: 30 * time.Minute},
	}
	cfg := Config{Cluster: "restart", Nodes: 2, VCs: "vc1:2", Start: t0, Duration: time.Hour, KeepJobs: true}
	first, err := New(cfg, Jobs(jobs), nil, p.tee, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	snap := first.Snapshot()
	if got, want := snap.Clock, t0.Add(time.Hour); !got.Equal(want) {
		t.Errorf("Snapshot().Clock = %v; want %v", got, want)
	}
	var open []string
	for _, j := range snap.Jobs {
		open = append(open, j.ID+" "+j.State)
	}
	if want := []string{"a RUNNING", "b PENDING"}; !slices.Equal(open, want) {
		t.Errorf("Snapshot() jobs = %v; want %v", open, want)
	}
	saved := viaJSON(t, snap) // as up keeps it
	stored := p.stored(t, "restart")
	if got := p.Jobs(t, "restart", t0); got["a"].State != "RUNNING" || got["b"].State != "PENDING" {
		t.Errorf("after the first run's stop: a %+v, b %+v; want RUNNING and PENDING", got["a"], got["b"])
	}

	cfg.Start, cfg.Duration = saved.Clock.Add(time.Second), 0
	second, err := New(cfg, Jobs(nil), nil, p.tee, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	restored, err := second.Restore(saved)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b"}; !slices.Equal(restored, want) {
		t.Errorf("Restore() = %v; want %v", restored, want)
	}
	if err := second.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	all := p.stored(t, "restart")
	if n := len(all.events) - len(stored.events); n != 3 {
		t.Errorf("the second run published %d job events; want 3 (a's END, b's START and END)", n)
	}
	checkConsistent(t, all)

	want := map[string]simtest.Job{
		"a": {State: "COMPLETED", Start: 0, End: 7200},
		"c": {State: "COMPLETED", Start: 0, End: 1800},
		"b": {State: "COMPLETED", Start: 7200, End: 9000},
	}
	got := p.Jobs(t, "restart", t0)
	for id, w := range want {
		if got[id] != w {
			t.Errorf("job %s in ClickHouse: %+v; want %+v", id, got[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("jobs in ClickHouse: %v; want %v", got, want)
	}
	if n := schematest.Count(t, p.Conn, p.DB+".gpu_allocations FINAL WHERE alloc_end IS NULL"); n != 0 {
		t.Errorf("%d allocations open; want none", n)
	}
	if n := schematest.Count(t, p.Conn, "(SELECT gpu_uuid, ts FROM "+p.DB+".gpu_samples GROUP BY gpu_uuid, ts HAVING count() > 1)"); n != 0 {
		t.Errorf("%d GPU times with two samples; want none", n)
	}
	// Each GPU's energy counter rises across the restart.
	last := map[string]uint64{}
	for _, s := range all.samples {
		e, _ := s.s.Uint(schemas.Energy)
		if e < last[s.gpu.UUID] {
			t.Errorf("%s/%d at %d: energy %d mJ after %d", s.host, s.gpu.Index, s.s.TSMillis/1000-t0.Unix(), e, last[s.gpu.UUID])
			break
		}
		last[s.gpu.UUID] = e
	}
}

// TestRestore: a restored Sim takes over what fits its configuration and
// leaves out, and names, what does not.
func TestRestore(t *testing.T) {
	jobs := []JobSpec{
		{ID: "a", VC: "vc1", GPUs: 4, Duration: time.Hour},
		{ID: "m", VC: "vc1", GPUs: 16, Duration: time.Hour},
		{ID: "p", VC: "vc1", GPUs: 8, Duration: time.Hour},
	}
	base, _ := newTestSim(t, Config{Nodes: 3, VCs: "vc1:3"}, Jobs(jobs))
	if err := base.Advance(context.Background(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	snap := base.Snapshot()
	for _, tc := range []struct {
		name  string
		cfg   Config
		edit  func(*State)
		want  []string
		start map[string]int64 // seconds after t0, once restored and run
	}{
		{name: "all", cfg: Config{Nodes: 3, VCs: "vc1:3"}, want: []string{"a", "m", "p"},
			start: map[string]int64{"p": 3600}},
		{name: "a node gone", cfg: Config{Nodes: 3, VCs: "vc1:3"}, want: []string{"m", "p"},
			edit: func(s *State) { s.Jobs[0].Placement[0].Node = "sim-node-009" }},
		{name: "fewer GPUs per node", cfg: Config{Nodes: 3, VCs: "vc1:3", GPUsPerNode: 4}, want: []string{"a", "p"}},
		{name: "a GPU out of range", cfg: Config{Nodes: 3, VCs: "vc1:3"}, want: []string{"m", "p"},
			edit: func(s *State) { s.Jobs[0].Placement[0].GPUs[0] = 8 }},
		{name: "an unknown virtual cluster", cfg: Config{Nodes: 3, VCs: "vc2:3"}, want: nil},
		{name: "GPUs taken twice", cfg: Config{Nodes: 3, VCs: "vc1:3"}, want: []string{"a", "p"},
			edit: func(s *State) { s.Jobs[1].Placement[0].Node = s.Jobs[0].Placement[0].Node }},
		{name: "a bad state", cfg: Config{Nodes: 3, VCs: "vc1:3"}, want: []string{"a", "m"},
			edit: func(s *State) { s.Jobs[2].State = "COMPLETED" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rec, st := restored(t, snap, tc.edit, tc.cfg, tc.want)
			if err := s.Advance(context.Background(), t0.Add(3*time.Hour)); err != nil {
				t.Fatal(err)
			}
			p := rec.decode(t, "test")
			for id, want := range tc.start {
				if got := p.last[id].StartMillis/1000 - t0.Unix(); got != want {
					t.Errorf("job %s started at %d s; want %d", id, got, want)
				}
			}
			if _, err := s.Restore(st); err == nil {
				t.Errorf("Restore() after Advance: no error")
			}
		})
	}
}

// viaJSON returns snap as a saved state file gives it back: through JSON.
func viaJSON(t *testing.T, snap State) State {
	t.Helper()
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// restored passes snap through JSON, as a saved state file does, applies
// edit (nil: none), and restores it into a new Sim of cfg that starts a
// second after the saved clock; the restored jobs must be want. It returns
// the Sim, its recorder and the state restored.
func restored(t *testing.T, snap State, edit func(*State), cfg Config, want []string) (*Sim, *recorder, State) {
	t.Helper()
	st := viaJSON(t, snap)
	if edit != nil {
		edit(&st)
	}
	cfg.Cluster, cfg.Start = "test", st.Clock.Add(time.Second)
	rec := &recorder{}
	s, err := New(cfg, Jobs(nil), nil, rec, nil, nil, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Restore(st)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Restore() = %v; want %v", got, want)
	}
	return s, rec, st
}

// TestEndLost: the jobs a killed run left open end UNKNOWN at the given
// time, their open allocations close then (or at their job's end, when the
// job ended), and what the Sim holds itself is left alone.
func TestEndLost(t *testing.T) {
	s, rec := newTestSim(t, Config{Nodes: 1, VCs: "vc1:1"}, Jobs([]JobSpec{{ID: "a", VC: "vc1", GPUs: 8, Duration: time.Hour}}))
	if err := s.Advance(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	before := len(rec.decode(t, "test").events)
	at := t0.Add(90 * time.Second)
	ms := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	lost := []schemas.JobEvent{
		{Type: schemas.JobStart, JobID: "x", User: "ux", State: schemas.StateRunning, SubmitMillis: ms(-time.Hour), StartMillis: ms(-time.Minute),
			Nodes: []string{"sim-node-001"}, GPUs: 1, ExitCode: schemas.Unknown},
		{Type: schemas.JobSubmit, JobID: "p", State: schemas.StatePending, SubmitMillis: ms(-time.Hour)},
		{Type: schemas.JobStart, JobID: "a", State: schemas.StateRunning, SubmitMillis: ms(0), StartMillis: ms(0)}, // held
	}
	allocs := []schemas.Alloc{
		{Host: "sim-node-001", GPUIndex: 0, GPUUUID: "GPU-x", JobID: "x", StartMillis: ms(-time.Minute), Source: schemas.AllocSim},
		{Host: "sim-node-001", GPUIndex: 1, GPUUUID: "GPU-y", JobID: "y", StartMillis: ms(-time.Hour), EndMillis: ms(-30 * time.Minute), Source: schemas.AllocSim},
		{Host: "sim-node-001", GPUIndex: 2, GPUUUID: "GPU-a", JobID: "a", StartMillis: ms(0), Source: schemas.AllocSim}, // held
	}
	if n := s.EndLost(at, lost, allocs); n != 2 {
		t.Errorf("EndLost() = %d; want 2", n)
	}
	if err := s.Advance(context.Background(), t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	p := rec.decode(t, "test")
	var ended []string
	for _, e := range p.events[before:] {
		ended = append(ended, e.JobID)
		if e.Type != schemas.JobEnd || e.State != schemas.StateUnknown || e.EventMillis != at.UnixMilli() || e.EndMillis != at.UnixMilli() {
			t.Errorf("event of job %s: %v %v at %d, end %d; want END UNKNOWN at %d", e.JobID, e.Type, e.State, e.EventMillis, e.EndMillis, at.UnixMilli())
		}
	}
	if want := []string{"x", "p"}; !slices.Equal(ended, want) {
		t.Errorf("ended %v; want %v", ended, want)
	}
	if a := p.last["a"]; a.State != schemas.StateRunning {
		t.Errorf("job a (held) %v; want RUNNING", a.State)
	}
	closed := map[string]int64{}
	for _, a := range p.allocs {
		if a.EndMillis != 0 {
			closed[a.JobID] = a.EndMillis
		}
	}
	if want := map[string]int64{"x": at.UnixMilli(), "y": ms(-30 * time.Minute)}; len(closed) != 2 || closed["x"] != want["x"] || closed["y"] != want["y"] {
		t.Errorf("allocations closed %v; want %v", closed, want)
	}
}
