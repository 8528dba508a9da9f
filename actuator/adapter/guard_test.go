package adapter_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/simadapter"
	"github.com/heliostat-dev/heliostat/collector/sim"
)

type discard struct{}

func (discard) Publish(context.Context, string, []byte, []byte) error { return nil }

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// newCluster returns a simulated cluster of three nodes — sim-node-001 and
// -002 in vc1, both running a job, -003 idle in vc2 — with job "q" pending in
// vc1, 10 simulated seconds in.
func newCluster(t *testing.T) (*sim.Sim, *simadapter.Scheduler) {
	t.Helper()
	s, err := sim.New(sim.Config{Cluster: "t", Nodes: 3, VCs: "vc1:2,vc2:1", Start: t0}, sim.Jobs([]sim.JobSpec{
		{ID: "a", User: "u", VC: "vc1", GPUs: 8, Duration: time.Hour},
		{ID: "b", User: "u", VC: "vc1", GPUs: 8, Submit: time.Second, Duration: time.Hour},
		{ID: "q", User: "u", VC: "vc1", GPUs: 8, Submit: 2 * time.Second, Duration: time.Hour},
	}), nil, discard{}, nil, nil, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Advance(context.Background(), t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	return s, simadapter.New(s)
}

func nodeState(t *testing.T, s *sim.Sim, name string) sim.NodeState {
	t.Helper()
	for _, n := range s.Nodes() {
		if n.Name == name {
			return n.State
		}
	}
	t.Fatalf("no node %s", name)
	return 0
}

func TestGuard(t *testing.T) {
	all := adapter.GuardConfig{Apply: true, Partitions: []string{"*"}, Nodes: []string{"*"}}
	for _, tc := range []struct {
		name    string
		cfg     adapter.GuardConfig
		action  adapter.Action
		want    adapter.Outcome
		wantErr error
		check   func(t *testing.T, s *sim.Sim)
	}{
		{"dry run by default", adapter.GuardConfig{Partitions: []string{"*"}, Nodes: []string{"*"}},
			adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"}, adapter.Skipped, adapter.ErrDryRun,
			func(t *testing.T, s *sim.Sim) {
				if st := nodeState(t, s, "sim-node-003"); st != sim.NodeUp {
					t.Errorf("dry run: node is %v; want up", st)
				}
			}},
		{"empty allowlist touches nothing", adapter.GuardConfig{Apply: true},
			adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"}, adapter.Skipped, adapter.ErrNotAllowed, nil},
		{"empty allowlist sets no priority", adapter.GuardConfig{Apply: true},
			adapter.Action{Kind: adapter.SetPriority, Target: "q", Partition: "vc1", Priority: 5}, adapter.Skipped, adapter.ErrNotAllowed, nil},
		{"node pattern must match", adapter.GuardConfig{Apply: true, Partitions: []string{"*"}, Nodes: []string{"gpu*"}},
			adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"}, adapter.Skipped, adapter.ErrNotAllowed, nil},
		{"every partition of the node must be allowed", adapter.GuardConfig{Apply: true, Partitions: []string{"vc1"}, Nodes: []string{"*"}},
			adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"}, adapter.Skipped, adapter.ErrNotAllowed, nil},
		{"busy node is never powered down", all,
			adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-001"}, adapter.Skipped, adapter.ErrNodeBusy,
			func(t *testing.T, s *sim.Sim) {
				if st := nodeState(t, s, "sim-node-001"); st != sim.NodeUp {
					t.Errorf("busy node is %v; want up", st)
				}
			}},
		{"idle node is powered down", all,
			adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"}, adapter.Applied, nil,
			func(t *testing.T, s *sim.Sim) {
				if st := nodeState(t, s, "sim-node-003"); st != sim.NodeDown {
					t.Errorf("node is %v; want down", st)
				}
			}},
		{"unknown node", all, adapter.Action{Kind: adapter.PowerUp, Target: "nope"}, adapter.Skipped, adapter.ErrUnknownNode, nil},
		{"priority applied", adapter.GuardConfig{Apply: true, Partitions: []string{"vc1"}},
			adapter.Action{Kind: adapter.SetPriority, Target: "q", Partition: "vc1", Priority: 5}, adapter.Applied, nil,
			func(t *testing.T, s *sim.Sim) {
				if p := s.Pending(); len(p) != 1 || p[0].Priority != 5 {
					t.Errorf("Pending() = %+v; want q at priority 5", p)
				}
			}},
		{"a job gone since it was read is skipped", adapter.GuardConfig{Apply: true, Partitions: []string{"vc1"}},
			adapter.Action{Kind: adapter.SetPriority, Target: "zz", Partition: "vc1", Priority: 5}, adapter.Skipped, adapter.ErrUnknownJob, nil},
		{"unknown kind", all, adapter.Action{Kind: "reboot", Target: "sim-node-003"}, adapter.Skipped, nil, nil},
		{"a job on several partitions needs every one allowed", adapter.GuardConfig{Apply: true, Partitions: []string{"vc1"}},
			adapter.Action{Kind: adapter.SetPriority, Target: "q", Partition: "vc1,vc2", Priority: 5}, adapter.Skipped, adapter.ErrNotAllowed, nil},
		{"a job on several allowed partitions", adapter.GuardConfig{Apply: true, Partitions: []string{"vc1", "vc2"}},
			adapter.Action{Kind: adapter.SetPriority, Target: "q", Partition: "vc2, vc1", Priority: 5}, adapter.Applied, nil, nil},
		{"a job on no partition needs *", adapter.GuardConfig{Apply: true, Partitions: []string{"vc1"}},
			adapter.Action{Kind: adapter.SetPriority, Target: "q", Partition: ",", Priority: 5}, adapter.Skipped, adapter.ErrNotAllowed, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, sched := newCluster(t)
			g, err := adapter.NewGuard(tc.cfg, sched, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := g.Do(context.Background(), tc.action)
			if r.Outcome != tc.want || tc.wantErr != nil && !errors.Is(r.Err, tc.wantErr) || tc.want == adapter.Skipped && r.Err == nil {
				t.Fatalf("Do(%+v) = %v, %v; want %v, %v", tc.action, r.Outcome, r.Err, tc.want, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

// TestGuardPowerUpAndRateLimit powers a node down and up again within a cap of
// one power transition an hour: the power-up is counted but passes, and the
// next power-down waits for the hour to pass.
func TestGuardPowerUpAndRateLimit(t *testing.T) {
	s, sched := newCluster(t)
	now := t0
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"*"}, Nodes: []string{"sim-node-00[0-9]"}, MaxPowerPerHour: 1}, sched, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if r := g.Do(ctx, adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"}); r.Outcome != adapter.Applied {
		t.Fatalf("power down: %v %v", r.Outcome, r.Err)
	}
	if r := g.Do(ctx, adapter.Action{Kind: adapter.PowerUp, Target: "sim-node-003"}); r.Outcome != adapter.Applied {
		t.Fatalf("power up with the cap reached: %v %v; want applied", r.Outcome, r.Err)
	}
	if st := nodeState(t, s, "sim-node-003"); st != sim.NodeWaking {
		t.Errorf("node is %v; want waking", st)
	}
	// Waking is not on: a power-down is refused before the rate limit.
	if r := g.Do(ctx, adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"}); r.Outcome != adapter.Skipped || !errors.Is(r.Err, adapter.ErrUnusable) {
		t.Errorf("power down a waking node: %v %v; want skipped, not on", r.Outcome, r.Err)
	}
	if err := s.Advance(ctx, t0.Add(10*time.Second+sim.DefaultWakeDelay)); err != nil {
		t.Fatal(err)
	}
	if st := nodeState(t, s, "sim-node-003"); st != sim.NodeUp {
		t.Fatalf("node is %v after the wake-up delay; want up", st)
	}
	now = now.Add(59 * time.Minute)
	if r := g.Do(ctx, adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"}); r.Outcome != adapter.Skipped || !errors.Is(r.Err, adapter.ErrRateLimited) {
		t.Errorf("power down within the hour: %v %v; want rate limited", r.Outcome, r.Err)
	}
	if st := nodeState(t, s, "sim-node-003"); st != sim.NodeUp {
		t.Errorf("node is %v after a refused power-down; want up", st)
	}
	now = t0.Add(time.Hour)
	if r := g.Do(ctx, adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"}); r.Outcome != adapter.Applied {
		t.Errorf("an hour later: %v %v; want applied", r.Outcome, r.Err)
	}
}

// TestGuardRateLimitSchedulerClock counts the caps on the actions' decision
// times, the scheduler's clock, when they carry one: on a simulated cluster
// an hour apart in simulated time is an hour apart, however little the
// Guard's own clock moved.
func TestGuardRateLimitSchedulerClock(t *testing.T) {
	s, sched := newCluster(t)
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"*"}, Nodes: []string{"*"}, MaxPowerPerHour: 1, MaxPriorityPerMinute: 1},
		sched, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		a       adapter.Action
		advance time.Duration // simulated time to run the cluster to first (the power-up's wake-up)
		want    adapter.Outcome
		room    time.Time // a skipped action's RateLimitError.RoomAt
	}{
		{a: adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003", At: t0}, want: adapter.Applied},
		{a: adapter.Action{Kind: adapter.PowerUp, Target: "sim-node-003", At: t0}, want: adapter.Applied},
		{a: adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003", At: t0.Add(59 * time.Minute)}, advance: 10*time.Second + sim.DefaultWakeDelay, want: adapter.Skipped,
			room: t0.Add(time.Hour)}, // the power-down and the power-up at t0 fill the cap of 1 twice over: room once both have left
		{a: adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003", At: t0.Add(time.Hour)}, want: adapter.Applied},
		{a: adapter.Action{Kind: adapter.SetPriority, Target: "q", Partition: "vc1", Priority: 5, At: t0.Add(time.Hour)}, want: adapter.Applied},
		{a: adapter.Action{Kind: adapter.SetPriority, Target: "q", Partition: "vc1", Priority: 7, At: t0.Add(time.Hour + 59*time.Second)}, want: adapter.Skipped, room: t0.Add(time.Hour + time.Minute)},
		{a: adapter.Action{Kind: adapter.SetPriority, Target: "q", Partition: "vc1", Priority: 8, At: t0.Add(time.Hour + time.Minute)}, want: adapter.Applied},
	} {
		if tc.advance > 0 {
			if err := s.Advance(ctx, t0.Add(tc.advance)); err != nil {
				t.Fatal(err)
			}
		}
		r := g.Do(ctx, tc.a)
		if r.Outcome != tc.want || tc.want == adapter.Skipped && !errors.Is(r.Err, adapter.ErrRateLimited) {
			t.Errorf("%s %s at %v: %v %v; want %v", tc.a.Kind, tc.a.Target, tc.a.At, r.Outcome, r.Err, tc.want)
		}
		var limited *adapter.RateLimitError
		if tc.want == adapter.Skipped && (!errors.As(r.Err, &limited) || !limited.RoomAt.Equal(tc.room)) {
			t.Errorf("%s %s at %v: %v; want a RateLimitError with room at %v", tc.a.Kind, tc.a.Target, tc.a.At, r.Err, tc.room)
		}
	}
}

// faulty is the simulated cluster's scheduler with failures switched on:
// reading it, or the next action (then switched off again).
type faulty struct {
	*simadapter.Scheduler
	readErr, actErr error
	calls           int // actions that reached the scheduler
}

func (f *faulty) Snapshot(ctx context.Context) (adapter.Snapshot, error) {
	if f.readErr != nil {
		return adapter.Snapshot{}, f.readErr
	}
	return f.Scheduler.Snapshot(ctx)
}

func (f *faulty) act() error {
	f.calls++
	err := f.actErr
	f.actErr = nil
	return err
}

func (f *faulty) SetPriority(ctx context.Context, id string, p int64) error {
	if err := f.act(); err != nil {
		return err
	}
	return f.Scheduler.SetPriority(ctx, id, p)
}

func (f *faulty) PowerDown(ctx context.Context, n string) error {
	if err := f.act(); err != nil {
		return err
	}
	return f.Scheduler.PowerDown(ctx, n)
}

func (f *faulty) PowerUp(ctx context.Context, n string) error {
	if err := f.act(); err != nil {
		return err
	}
	return f.Scheduler.PowerUp(ctx, n)
}

// TestGuardFailures: a node that cannot be read again fails the power
// action (it is not a refusal the loop may set aside); an action the
// scheduler fails or refuses gives its unit of the rate limit back, so the
// same action, tried again, is not rate limited; a dry run spends it, once
// for an action asked for again.
func TestGuardFailures(t *testing.T) {
	errRead := errors.New("squeue: exit status 1: Unable to contact slurm controller")
	errAct := errors.New("scontrol: signal: killed")
	type step struct {
		a               adapter.Action
		readErr, actErr error
		want            adapter.Outcome
		wantErr         error
		wantCalls       int // actions that reached the scheduler so far
	}
	down := adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"}
	up := adapter.Action{Kind: adapter.PowerUp, Target: "sim-node-003"}
	prio := adapter.Action{Kind: adapter.SetPriority, Target: "q", Partition: "vc1", Priority: 5}
	prio6 := prio
	prio6.Priority = 6
	capped := adapter.GuardConfig{Apply: true, Partitions: []string{"*"}, Nodes: []string{"*"}, MaxPowerPerHour: 1, MaxPriorityPerMinute: 1}
	dry := capped
	dry.Apply = false
	for _, tc := range []struct {
		name  string
		cfg   adapter.GuardConfig
		steps []step
	}{
		{"failed re-read fails a power-up", capped, []step{
			{a: up, readErr: errRead, want: adapter.Failed, wantErr: errRead},
		}},
		{"failed re-read fails a power-down and spends nothing", capped, []step{
			{a: down, readErr: errRead, want: adapter.Failed, wantErr: errRead},
			{a: down, want: adapter.Applied, wantCalls: 1},
		}},
		{"failed re-read fails in a dry run too", dry, []step{
			{a: down, readErr: errRead, want: adapter.Failed, wantErr: errRead},
		}},
		{"failed power-down gives its unit back", capped, []step{
			{a: down, actErr: errAct, want: adapter.Failed, wantErr: errAct, wantCalls: 1},
			{a: down, want: adapter.Applied, wantCalls: 2},
		}},
		{"power-down refused as busy gives its unit back", capped, []step{
			{a: down, actErr: adapter.ErrNodeBusy, want: adapter.Skipped, wantErr: adapter.ErrNodeBusy, wantCalls: 1},
			{a: down, want: adapter.Applied, wantCalls: 2},
		}},
		{"power-down refused as excluded from power saving gives its unit back", capped, []step{
			{a: down, actErr: fmt.Errorf("slurm: %w", adapter.ErrPowerSaveExcluded), want: adapter.Skipped, wantErr: adapter.ErrPowerSaveExcluded, wantCalls: 1},
			{a: down, want: adapter.Applied, wantCalls: 2},
		}},
		{"power-down refused as unusable gives its unit back", capped, []step{
			{a: down, actErr: fmt.Errorf("slurm: %w", adapter.ErrUnusable), want: adapter.Skipped, wantErr: adapter.ErrUnusable, wantCalls: 1},
			{a: down, want: adapter.Applied, wantCalls: 2},
		}},
		{"failed priority change gives its unit back", capped, []step{
			{a: prio, actErr: errAct, want: adapter.Failed, wantErr: errAct, wantCalls: 1},
			{a: prio, want: adapter.Applied, wantCalls: 2},
			{a: prio, want: adapter.Skipped, wantErr: adapter.ErrRateLimited, wantCalls: 2},
		}},
		{"priority change of a job gone gives its unit back", capped, []step{
			{a: prio, actErr: adapter.ErrUnknownJob, want: adapter.Skipped, wantErr: adapter.ErrUnknownJob, wantCalls: 1},
			{a: prio, want: adapter.Applied, wantCalls: 2},
		}},
		// A job array's priority set on some tasks, others held: the
		// change happened.
		{"priority change applied in part keeps its unit", capped, []step{
			{a: prio, actErr: fmt.Errorf("%w: set on q_0-1,3; left out q_2: Job is in held state", adapter.ErrPartial), want: adapter.Applied, wantErr: adapter.ErrPartial, wantCalls: 1},
			{a: prio, want: adapter.Skipped, wantErr: adapter.ErrRateLimited, wantCalls: 1},
		}},
		// A dry run changes nothing, so the loop asks for the same action
		// again; an applied run would have made it once.
		{"dry run spends its unit once per action", dry, []step{
			{a: down, want: adapter.Skipped, wantErr: adapter.ErrDryRun},
			{a: down, want: adapter.Skipped, wantErr: adapter.ErrDryRun},
			{a: prio, want: adapter.Skipped, wantErr: adapter.ErrDryRun},
			{a: prio, want: adapter.Skipped, wantErr: adapter.ErrDryRun},
			{a: prio6, want: adapter.Skipped, wantErr: adapter.ErrRateLimited},
		}},
		{"applied run spends a unit per action", capped, []step{
			{a: prio, want: adapter.Applied, wantCalls: 1},
			{a: prio, want: adapter.Skipped, wantErr: adapter.ErrRateLimited, wantCalls: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, sched := newCluster(t)
			f := &faulty{Scheduler: sched}
			g, err := adapter.NewGuard(tc.cfg, f, func() time.Time { return t0 })
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				f.readErr, f.actErr = st.readErr, st.actErr
				r := g.Do(context.Background(), st.a)
				if r.Outcome != st.want || st.wantErr != nil && !errors.Is(r.Err, st.wantErr) || st.wantErr == nil && r.Err != nil {
					t.Fatalf("step %d: Do(%+v) = %v, %v; want %v, %v", i, st.a, r.Outcome, r.Err, st.want, st.wantErr)
				}
				if f.calls != st.wantCalls {
					t.Fatalf("step %d: %d actions reached the scheduler; want %d", i, f.calls, st.wantCalls)
				}
			}
		})
	}
}

func TestGuardConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg adapter.GuardConfig
		ok  bool
	}{
		{adapter.GuardConfig{}, true},
		{adapter.GuardConfig{Nodes: []string{"gpu[1-4]"}}, true},
		{adapter.GuardConfig{Nodes: []string{"gpu["}}, false},
		{adapter.GuardConfig{Nodes: []string{"gpu1[0-9]", "gpu20", "rack[a-c]-n[0-7]"}}, true},
		// Slurm host lists, which as shell patterns match other nodes.
		{adapter.GuardConfig{Nodes: []string{"gpu[10-20]"}}, false},
		{adapter.GuardConfig{Nodes: []string{"n[0-7]", "gpu[01-04"}}, false}, // gpu[01-04,07] split at its comma
		{adapter.GuardConfig{Nodes: []string{"gpu[1-4]x[12]"}}, false},
		{adapter.GuardConfig{MaxPowerPerHour: -1}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v; want ok %v", tc.cfg, err, tc.ok)
		}
	}
}

// TestGuardFlags: the caps' flags refuse 0 and below (0 would read as the
// default, not as "none") and say how to forbid the actions instead.
func TestGuardFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
		prio int
		pow  int
	}{
		{nil, "", adapter.DefaultMaxPriorityPerMinute, adapter.DefaultMaxPowerPerHour},
		{[]string{"--actuator.max-power-actions-per-hour=3", "--actuator.max-priority-updates-per-minute=7"}, "", 7, 3},
		{[]string{"--actuator.max-power-actions-per-hour=0"}, "leave --actuator.nodes empty", 0, 0},
		{[]string{"--actuator.max-priority-updates-per-minute=-1"}, "leave --actuator.partitions empty", 0, 0},
		{[]string{"--actuator.max-power-actions-per-hour=many"}, "not a whole number", 0, 0},
	} {
		var c adapter.GuardConfig
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.RegisterFlags(fs)
		err := fs.Parse(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v; want one containing %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || c.MaxPriorityPerMinute != tc.prio || c.MaxPowerPerHour != tc.pow {
			t.Errorf("%v: %v, caps %d/min %d/h; want %d/min %d/h", tc.args, err, c.MaxPriorityPerMinute, c.MaxPowerPerHour, tc.prio, tc.pow)
		}
	}
}

// holding marks the jobs in held as held in its snapshots and counts them.
type holding struct {
	adapter.Scheduler
	held    map[string]bool
	reads   int
	readErr error
}

func (h *holding) Snapshot(ctx context.Context) (adapter.Snapshot, error) {
	h.reads++
	if h.readErr != nil {
		return adapter.Snapshot{}, h.readErr
	}
	snap, err := h.Scheduler.Snapshot(ctx)
	for i := range snap.Jobs {
		snap.Jobs[i].Held = h.held[snap.Jobs[i].ID]
	}
	return snap, err
}

// TestGuardLooksAtTheQueue: a priority is set only on a job pending and not
// held in a look at the queue at most PriorityRecheck old; an older look is
// read again, and a failed read fails the action.
func TestGuardLooksAtTheQueue(t *testing.T) {
	_, sim := newCluster(t)
	h := &holding{Scheduler: sim, held: map[string]bool{}}
	now := t0
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"*"}}, h, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := adapter.Action{Kind: adapter.SetPriority, Target: "q", Partition: "vc1", Priority: 5}
	for _, st := range []struct {
		name    string
		advance time.Duration
		held    bool
		readErr error
		want    adapter.Outcome
		wantErr error
		reads   int
	}{
		{"no look yet: read", 0, false, nil, adapter.Applied, nil, 1},
		{"a fresh look is used", adapter.PriorityRecheck, false, nil, adapter.Applied, nil, 1},
		{"held since a fresh look: the scheduler's to refuse", 0, true, nil, adapter.Applied, nil, 1},
		{"an old look is read again: held", time.Second, true, nil, adapter.Skipped, adapter.ErrHeld, 2},
		{"released", adapter.PriorityRecheck + time.Second, false, nil, adapter.Applied, nil, 3},
		{"a failed read fails", adapter.PriorityRecheck + time.Second, false, errors.New("squeue: timeout"), adapter.Failed, nil, 4},
	} {
		now = now.Add(st.advance)
		h.held["q"], h.readErr = st.held, st.readErr
		q.Priority++ // not the same action again within the rate window
		r := g.Do(ctx, q)
		if r.Outcome != st.want || st.wantErr != nil && !errors.Is(r.Err, st.wantErr) || h.reads != st.reads {
			t.Errorf("%s: Do = %v, %v after %d reads; want %v, %v after %d", st.name, r.Outcome, r.Err, h.reads, st.want, st.wantErr, st.reads)
		}
	}
	// A job no longer pending in the queue.
	h.readErr = nil
	if r := g.Do(ctx, adapter.Action{Kind: adapter.SetPriority, Target: "gone", Partition: "vc1", Priority: 9}); r.Outcome != adapter.Skipped || !errors.Is(r.Err, adapter.ErrUnknownJob) {
		t.Errorf("a job not in the queue: %v, %v; want skipped, %v", r.Outcome, r.Err, adapter.ErrUnknownJob)
	}
}

// excluding marks nodes excluded from power saving in its snapshots, as
// the Slurm adapter does for SuspendExcNodes.
type excluding struct {
	adapter.Scheduler
	excluded string
}

func (e *excluding) Snapshot(ctx context.Context) (adapter.Snapshot, error) {
	snap, err := e.Scheduler.Snapshot(ctx)
	for i := range snap.Nodes {
		snap.Nodes[i].PowerSaveExcluded = snap.Nodes[i].Name == e.excluded
	}
	return snap, err
}

// TestGuardPowerSaveExcluded: a node the scheduler's power saving excludes
// is never powered down — skipped, not failed, and nothing is sent — but
// may be powered up.
func TestGuardPowerSaveExcluded(t *testing.T) {
	s, sched := newCluster(t)
	f := &faulty{Scheduler: sched}
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"*"}, Nodes: []string{"*"}}, &excluding{Scheduler: f, excluded: "sim-node-003"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := g.Do(context.Background(), adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"})
	if r.Outcome != adapter.Skipped || !errors.Is(r.Err, adapter.ErrPowerSaveExcluded) || f.calls != 0 {
		t.Errorf("power down an excluded node = %v, %v (%d sent); want skipped, %v, none sent", r.Outcome, r.Err, f.calls, adapter.ErrPowerSaveExcluded)
	}
	if st := nodeState(t, s, "sim-node-003"); st != sim.NodeUp {
		t.Errorf("excluded node is %v; want up", st)
	}
	if err := s.PowerDown("sim-node-003"); err != nil { // by hand
		t.Fatal(err)
	}
	if r := g.Do(context.Background(), adapter.Action{Kind: adapter.PowerUp, Target: "sim-node-003"}); r.Outcome != adapter.Applied {
		t.Errorf("power up an excluded node = %v, %v; want applied", r.Outcome, r.Err)
	}
}

// TestGuardPowerUpAlreadyPowered: a power-up of a node that is on or
// waking by the time the guard looks (it woke since the plan read it) sends
// nothing and is skipped, saying so, not applied; its unit of the power cap
// is given back. Before, it was applied and spent the cap's unit.
func TestGuardPowerUpAlreadyPowered(t *testing.T) {
	s, sched := newCluster(t)
	f := &faulty{Scheduler: sched}
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"*"}, Nodes: []string{"*"}, MaxPowerPerHour: 1}, f, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.PowerDown("sim-node-003"); err != nil {
		t.Fatal(err)
	}
	if err := s.PowerUp("sim-node-003"); err != nil { // waking, by hand
		t.Fatal(err)
	}
	for _, node := range []string{"sim-node-001", "sim-node-003"} { // on (running a job), waking
		if r := g.Do(ctx, adapter.Action{Kind: adapter.PowerUp, Target: node}); r.Outcome != adapter.Skipped || !errors.Is(r.Err, adapter.ErrAlreadyPowered) || f.calls != 0 {
			t.Errorf("power up %s, %v = %v, %v (%d sent); want skipped, %v, none sent", node, nodeState(t, s, node), r.Outcome, r.Err, f.calls, adapter.ErrAlreadyPowered)
		}
	}
	if err := s.Advance(ctx, t0.Add(10*time.Second+sim.DefaultWakeDelay)); err != nil {
		t.Fatal(err)
	}
	if r := g.Do(ctx, adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"}); r.Outcome != adapter.Applied {
		t.Errorf("power down after power-ups that sent nothing, cap 1 = %v, %v; want applied", r.Outcome, r.Err)
	}
}

// TestGuardSeed: power actions an earlier run made, seeded at start, count
// in the rate limits as the run's own would: with a cap of 2 an hour and
// two seeded within it, a power-down waits for the older to leave the
// window; in a dry run a seeded action is the same action asked for again,
// and costs no second unit.
func TestGuardSeed(t *testing.T) {
	past := []adapter.Action{
		{Kind: adapter.PowerDown, Target: "sim-node-002", At: t0.Add(-20 * time.Minute)},
		{Kind: adapter.PowerUp, Target: "sim-node-003", At: t0.Add(-50 * time.Minute)}, // older, given second
		{Kind: "reboot", Target: "sim-node-003", At: t0},                               // not a kind the guard knows: ignored
	}
	down := adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"}
	for _, tc := range []struct {
		name  string
		apply bool
		at    time.Duration // of the power-down, after t0
		want  adapter.Outcome
		err   error
		room  time.Duration // a RateLimitError's RoomAt, after t0
	}{
		{"cap spent by the earlier run", true, 0, adapter.Skipped, adapter.ErrRateLimited, 10 * time.Minute},
		{"room once the oldest left the window", true, 10 * time.Minute, adapter.Applied, nil, 0},
		{"dry run: the seeded action again costs nothing", false, 0, adapter.Skipped, adapter.ErrDryRun, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, sched := newCluster(t)
			g, err := adapter.NewGuard(adapter.GuardConfig{Apply: tc.apply, Partitions: []string{"*"}, Nodes: []string{"*"}, MaxPowerPerHour: 2}, sched, nil)
			if err != nil {
				t.Fatal(err)
			}
			seed := slices.Clone(past)
			if !tc.apply {
				seed[1] = adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003", At: t0.Add(-50 * time.Minute)}
			}
			g.Seed(seed)
			a := down
			a.At = t0.Add(tc.at)
			r := g.Do(context.Background(), a)
			if r.Outcome != tc.want || tc.err != nil && !errors.Is(r.Err, tc.err) || tc.err == nil && r.Err != nil {
				t.Fatalf("Do(%+v) = %v, %v; want %v, %v", a, r.Outcome, r.Err, tc.want, tc.err)
			}
			var limited *adapter.RateLimitError
			if errors.As(r.Err, &limited) && !limited.RoomAt.Equal(t0.Add(tc.room)) {
				t.Errorf("room at %v; want %v", limited.RoomAt, t0.Add(tc.room))
			}
		})
	}
}

// addingJobs adds pending jobs to the snapshots of the scheduler it wraps.
type addingJobs struct {
	adapter.Scheduler
	jobs []adapter.Job
}

func (a *addingJobs) Snapshot(ctx context.Context) (adapter.Snapshot, error) {
	snap, err := a.Scheduler.Snapshot(ctx)
	snap.Jobs = append(snap.Jobs, a.jobs...)
	return snap, err
}

// TestGuardUnreadableJob: an idle node is not powered down while a pending
// job that may start on it (submitted to its partition, or naming none)
// could not be read in full — skipped, naming the job and what could not be
// read, and nothing sent — unless that job is held or was submitted to
// other partitions only.
func TestGuardUnreadableJob(t *testing.T) {
	const fault = `GPU request: tres_per_node: GRES count "b" is not a number`
	for _, tc := range []struct {
		name    string
		job     adapter.Job
		refused bool
	}{
		{"its partition", adapter.Job{ID: "x", Partition: "vc2", Unreadable: fault}, true},
		{"one of its partitions", adapter.Job{ID: "x", Partition: "vc1,vc2", Unreadable: fault}, true},
		{"no partition named", adapter.Job{ID: "x", Unreadable: fault}, true},
		{"another partition", adapter.Job{ID: "x", Partition: "vc1", Unreadable: fault}, false},
		{"held", adapter.Job{ID: "x", Partition: "vc2", Held: true, Unreadable: fault}, false},
		{"cannot start yet", adapter.Job{ID: "x", Partition: "vc2", Ineligible: true, Reason: "Dependency", Unreadable: fault}, false},
		{"read in full", adapter.Job{ID: "x", Partition: "vc2", GPUs: 8}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, sched := newCluster(t)
			f := &faulty{Scheduler: sched}
			g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"*"}, Nodes: []string{"*"}}, &addingJobs{Scheduler: f, jobs: []adapter.Job{tc.job}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := g.Do(context.Background(), adapter.Action{Kind: adapter.PowerDown, Target: "sim-node-003"})
			if !tc.refused {
				if r.Outcome != adapter.Applied {
					t.Errorf("power down sim-node-003 = %v, %v; want applied", r.Outcome, r.Err)
				}
				return
			}
			if r.Outcome != adapter.Skipped || !errors.Is(r.Err, adapter.ErrUnreadableJob) || f.calls != 0 {
				t.Errorf("power down sim-node-003 = %v, %v (%d sent); want skipped, %v, none sent", r.Outcome, r.Err, f.calls, adapter.ErrUnreadableJob)
			}
			if r.Err != nil && (!strings.Contains(r.Err.Error(), "pending job x") || !strings.Contains(r.Err.Error(), fault)) {
				t.Errorf("error %q; want it naming job x and %q", r.Err, fault)
			}
			if st := nodeState(t, s, "sim-node-003"); st != sim.NodeUp {
				t.Errorf("sim-node-003 is %v; want up", st)
			}
		})
	}
}
