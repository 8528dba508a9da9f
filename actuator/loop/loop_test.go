package loop

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/actuator/ces"
	"github.com/heliostat-dev/heliostat/actuator/demandlog"
	"github.com/heliostat-dev/heliostat/actuator/qssf"
	"github.com/heliostat-dev/heliostat/actuator/simadapter"
	"github.com/heliostat-dev/heliostat/collector/sim"
	"github.com/heliostat-dev/heliostat/predictor/live"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestMain(m *testing.M) { os.Exit(schematest.Main(m)) }

type discard struct{}

func (discard) Publish(context.Context, string, []byte, []byte) error { return nil }

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// checked is the simulated cluster's scheduler with a check, before every
// action, that the action's planned row is already in the audit table.
type checked struct {
	*simadapter.Scheduler
	t    *testing.T
	conn driver.Conn
	db   string
	sent []string
}

func (c *checked) planned(kind adapter.Kind, target string) {
	c.t.Helper()
	var n uint64
	if err := c.conn.QueryRow(context.Background(), "SELECT count() FROM "+c.db+".actions WHERE kind = ? AND target = ? AND outcome = 'planned'",
		string(kind), target).Scan(&n); err != nil {
		c.t.Errorf("read audit table: %v", err)
	}
	if n == 0 {
		c.t.Errorf("%s %s sent before its planned row was written", kind, target)
	}
	c.sent = append(c.sent, string(kind)+" "+target)
}

func (c *checked) SetPriority(ctx context.Context, id string, p int64) error {
	c.planned(adapter.SetPriority, id)
	return c.Scheduler.SetPriority(ctx, id, p)
}

func (c *checked) PowerDown(ctx context.Context, n string) error {
	c.planned(adapter.PowerDown, n)
	return c.Scheduler.PowerDown(ctx, n)
}

func (c *checked) PowerUp(ctx context.Context, n string) error {
	c.planned(adapter.PowerUp, n)
	return c.Scheduler.PowerUp(ctx, n)
}

// cluster is a simulated cluster of three nodes: vc1 (sim-node-001, -002)
// runs "a" and "b" for two hours with "long" (limit 10h) and "short" (limit
// 1h) queued behind them; vc2 (sim-node-003) is idle until "late" arrives at
// 30 minutes.
func cluster(t *testing.T) *sim.Sim {
	t.Helper()
	s, err := sim.New(sim.Config{Cluster: "t", Nodes: 3, VCs: "vc1:2,vc2:1", Start: t0, WakeDelay: time.Minute}, sim.Jobs([]sim.JobSpec{
		{ID: "a", User: "u", VC: "vc1", GPUs: 8, Duration: 2 * time.Hour},
		{ID: "b", User: "u", VC: "vc1", GPUs: 8, Submit: time.Second, Duration: 2 * time.Hour},
		{ID: "long", User: "u", VC: "vc1", GPUs: 8, Submit: 2 * time.Second, Duration: time.Hour, TimeLimit: 10 * time.Hour},
		{ID: "short", User: "u", VC: "vc1", GPUs: 8, Submit: 3 * time.Second, Duration: time.Hour, TimeLimit: time.Hour},
		{ID: "late", User: "u", VC: "vc2", GPUs: 4, Submit: 30 * time.Minute, Duration: time.Hour, TimeLimit: time.Hour},
	}), nil, discard{}, nil, nil, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testConfig() Config {
	c := Config{Cluster: "t", Interval: time.Minute, PeakWindow: 5 * time.Minute}
	c.CES = ces.DefaultConfig()
	c.CES.MinPowered, c.CES.DownDelay, c.CES.WakeLatency = 0, 0, time.Minute
	return c
}

// TestLoopSim runs passes over the simulated cluster with --actuator.apply:
// the shorter queued job is raised ahead of the longer, the idle node is
// powered down once a peak window of demand has been watched, a job queued
// for its partition powers it up again, and every action is in the audit
// table, planned before it was sent.
func TestLoopSim(t *testing.T) {
	cfg, conn := schematest.Database(t)
	s := cluster(t)
	sched := &checked{Scheduler: simadapter.New(s), t: t, conn: conn, db: cfg.Database}
	// The guard's own clock stands still: its caps count on the simulated
	// time of each decision, as in heliostat up, where the simulated cluster
	// runs faster than the wall clock. Two priority changes a minute let
	// pass 1's two through, and pass 4's only if it is 31 simulated minutes
	// later.
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"*"}, Nodes: []string{"sim-node-*"}, MaxPriorityPerMinute: 2},
		sched, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	al, err := audit.New(conn, cfg.Database, nil)
	if err != nil {
		t.Fatal(err)
	}
	dl, err := demandlog.New(conn, cfg.Database, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(testConfig(), g, al, nil, dl, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	step := func(to time.Duration) Report {
		t.Helper()
		if err := s.Advance(ctx, t0.Add(to)); err != nil {
			t.Fatal(err)
		}
		rep, err := l.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}

	rep := step(10 * time.Second)
	if rep.Pending != 2 {
		t.Fatalf("pass 1: %d pending; want 2", rep.Pending)
	}
	v := l.View()
	if len(v.Queue) != 2 || v.Queue[0].JobID != "short" || v.Queue[0].Source != SourceTimeLimit || v.Queue[0].PredictedS != 3600 {
		t.Fatalf("queue = %+v; want short (time limit 1h) first", v.Queue)
	}
	prio := map[string]int64{}
	for _, p := range s.Pending() {
		prio[p.ID] = p.Priority
	}
	if !(prio["short"] > prio["long"]) || prio["short"] != v.Queue[0].TargetPriority {
		t.Errorf("priorities %v; want short above long, at %d", prio, v.Queue[0].TargetPriority)
	}
	if slices.ContainsFunc(sched.sent, func(s string) bool { return strings.HasPrefix(s, "power") }) {
		t.Errorf("pass 1 powered nodes before a peak window was watched: %v", sched.sent)
	}
	// Pass 2: nothing changed, so nothing is sent again.
	if rep := step(time.Minute); len(rep.Actions) != 0 {
		t.Errorf("pass 2 actions %+v; want none", rep.Actions)
	}
	// After the peak window, the idle vc2 node goes down; vc1's are busy.
	rep = step(6 * time.Minute)
	if len(rep.Actions) != 1 || rep.Actions[0].Kind != "power_down" || rep.Actions[0].Target != "sim-node-003" || rep.Actions[0].Outcome != audit.Applied {
		t.Fatalf("pass 3 actions %+v; want sim-node-003 powered down", rep.Actions)
	}
	if st := nodeState(t, s, "sim-node-003"); st != sim.NodeDown {
		t.Errorf("sim-node-003 is %v; want down", st)
	}
	// "late" arrives in vc2 at 30 minutes: its node comes back.
	rep = step(31 * time.Minute)
	if len(rep.Actions) != 2 || rep.Actions[0].Kind != "set_priority" || rep.Actions[0].Target != "late" ||
		rep.Actions[1].Kind != "power_up" || rep.Actions[1].Target != "sim-node-003" || rep.Actions[1].Outcome != audit.Applied {
		t.Fatalf("pass 4 actions %+v; want late's priority set and sim-node-003 powered up", rep.Actions)
	}
	if err := s.Advance(ctx, t0.Add(33*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if p := s.Pending(); slices.ContainsFunc(p, func(j sim.PendingJob) bool { return j.ID == "late" }) {
		t.Errorf("late is still pending after its node woke: %+v", p)
	}
	got, err := al.List(ctx, audit.Query{Cluster: "t", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("audit rows %d; want 5 (3 priorities, down, up): %+v", len(got), got)
	}
	for _, r := range got {
		if r.Outcome != audit.Applied || r.DryRun || r.Basis == "" || r.Reason == "" || r.Adapter != "sim" {
			t.Errorf("audit row %+v", r)
		}
	}
	// The demand of each partition's steps was saved: vc1's two busy
	// nodes, vc2 idle until late's one node of demand.
	saved, err := dl.Load(ctx, "t", t0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	mark := func(part string, at time.Duration, v float64) demandlog.Mark {
		return demandlog.Mark{Partition: part, Step: t0.Add(at), Demand: v}
	}
	want := []demandlog.Mark{mark("vc1", 0, 2), mark("vc1", 30*time.Minute, 2), mark("vc2", 0, 0), mark("vc2", 30*time.Minute, 1)}
	if !slices.Equal(saved.Marks, want) || saved.Rejected != 0 {
		t.Errorf("saved demand %+v (%d rejected), want %+v", saved.Marks, saved.Rejected, want)
	}
}

// TestLoopDryRun: without --actuator.apply nothing changes in the cluster,
// every decision is recorded once as skipped with dry_run = 1, and repeated
// passes do not record it again.
func TestLoopDryRun(t *testing.T) {
	cfg, conn := schematest.Database(t)
	s := cluster(t)
	g, err := adapter.NewGuard(adapter.GuardConfig{Partitions: []string{"*"}, Nodes: []string{"*"}}, simadapter.New(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	al, _ := audit.New(conn, cfg.Database, nil)
	asked := &askedPredictor{}
	l, err := New(testConfig(), g, al, asked, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, at := range []time.Duration{10 * time.Second, 6 * time.Minute, 7 * time.Minute, 8 * time.Minute} {
		if err := s.Advance(ctx, t0.Add(at)); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Once(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range s.Pending() {
		if p.Priority != 0 {
			t.Errorf("dry run changed %s's priority to %d", p.ID, p.Priority)
		}
	}
	if st := nodeState(t, s, "sim-node-003"); st != sim.NodeUp {
		t.Errorf("dry run: sim-node-003 is %v; want up", st)
	}
	got, err := al.List(ctx, audit.Query{Cluster: "t", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, r := range got {
		kinds[r.Kind]++
		if !r.DryRun || r.Outcome != audit.Skipped || !strings.Contains(r.Error, "dry run") {
			t.Errorf("dry-run row %+v", r)
		}
	}
	if kinds["set_priority"] != 2 || kinds["power_down"] != 1 || len(got) != 3 {
		t.Errorf("dry run recorded %v; want 2 priorities and 1 power-down, once each", kinds)
	}
	// Each pending job is predicted by its name in the jobs table, so the
	// predictor can use the job's record.
	named := map[string]bool{}
	for _, s := range asked.specs {
		if s.Cluster != "t" || s.User != "u" {
			t.Errorf("predicted %+v; want cluster t, user u", s)
		}
		named[s.JobID] = true
	}
	if len(named) != 2 || !named["long"] || !named["short"] {
		t.Errorf("predicted jobs %v; want long and short (late comes at 30 min)", named)
	}
}

// askedPredictor records what it is asked and has no model.
type askedPredictor struct{ specs []live.Spec }

func (p *askedPredictor) Predict(s live.Spec) (live.Estimate, error) {
	p.specs = append(p.specs, s)
	return live.Estimate{}, live.ErrNoModel
}

// TestLoopNoAuditNoAction: when the audit table cannot be written, nothing is
// sent.
func TestLoopNoAuditNoAction(t *testing.T) {
	_, conn := schematest.Database(t)
	s := cluster(t)
	g, _ := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"*"}, Nodes: []string{"*"}}, simadapter.New(s), nil)
	al, _ := audit.New(conn, "no_such_database", nil)
	l, err := New(testConfig(), g, al, nil, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Advance(context.Background(), t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Once(context.Background()); err == nil || !strings.Contains(err.Error(), "none sent") {
		t.Errorf("Once with no audit table = %v; want an error saying none was sent", err)
	}
	for _, p := range s.Pending() {
		if p.Priority != 0 {
			t.Errorf("job %s's priority changed to %d without an audit row", p.ID, p.Priority)
		}
	}
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

// TestPriorityOrder checks the mapping against QSSF's own order on random
// queues: a higher priority exactly when ranked ahead (keys a second or more
// apart), always within [1, PriorityCeiling].
func TestPriorityOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, rate := range []float64{1, 0.01, 50} {
		c := qssf.Config{AgingRate: rate}
		jobs := make([]qssf.Job, 300)
		for i := range jobs {
			jobs[i] = qssf.Job{ID: string(rune('a' + i%26)), GPUs: 1 + rng.IntN(16),
				Submit: t0.Add(time.Duration(rng.IntN(86400)) * time.Second), Predicted: time.Duration(rng.IntN(100000)) * time.Second}
		}
		ranked := c.Rank(t0, jobs)
		for i := 1; i < len(ranked); i++ {
			a, b := &ranked[i-1].Job, &ranked[i].Job
			pa, pb := Priority(c, a), Priority(c, b)
			if pa < pb || (c.Key(b)-c.Key(a))/rate >= 1 && pa == pb {
				t.Fatalf("rate %g: rank %d priority %d, rank %d priority %d (keys %v, %v)", rate, i, pa, i+1, pb, c.Key(a), c.Key(b))
			}
		}
	}
	for _, tc := range []struct {
		j    qssf.Job
		want int64
	}{
		{qssf.Job{Submit: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}, PriorityCeiling},
		{qssf.Job{Submit: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), GPUs: 2, Predicted: time.Hour}, PriorityCeiling - 7200},
		{qssf.Job{Submit: time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)}, PriorityCeiling},
		{qssf.Job{Submit: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)}, 1},
	} {
		if got := Priority(qssf.Config{AgingRate: 1}, &tc.j); got != tc.want {
			t.Errorf("Priority(%+v) = %d; want %d", tc.j, got, tc.want)
		}
	}
}

// flaky is the simulated cluster's scheduler with failures switched on and
// off: reading the queue, or every action.
type flaky struct {
	*simadapter.Scheduler
	readErr, actErr error
}

func (f *flaky) Snapshot(ctx context.Context) (adapter.Snapshot, error) {
	if f.readErr != nil {
		return adapter.Snapshot{}, f.readErr
	}
	return f.Scheduler.Snapshot(ctx)
}

func (f *flaky) SetPriority(ctx context.Context, id string, p int64) error {
	if f.actErr != nil {
		return f.actErr
	}
	return f.Scheduler.SetPriority(ctx, id, p)
}

// TestLoopReady: Ready fails before the first pass, while passes fail
// (the scheduler cannot be read) and while the scheduler refuses the
// actions sent, naming the cause, and holds again after a clean pass.
func TestLoopReady(t *testing.T) {
	cfg, conn := schematest.Database(t)
	s := cluster(t)
	sched := &flaky{Scheduler: simadapter.New(s)}
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"*"}}, sched, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	al, err := audit.New(conn, cfg.Database, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(testConfig(), g, al, nil, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Advance(ctx, t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	want := func(step string, wants ...string) {
		t.Helper()
		err := l.Ready()
		if len(wants) == 0 {
			if err != nil {
				t.Errorf("%s: Ready() = %v; want nil", step, err)
			}
			return
		}
		for _, w := range wants {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Ready() = %v; want it to say %q", step, err, w)
			}
		}
	}
	want("before a pass", "actuator: no pass of the control loop yet")

	sched.readErr = errors.New("squeue: exit status 1: Unable to contact slurm controller")
	if _, err := l.Once(ctx); err == nil {
		t.Fatal("Once with squeue failing succeeded")
	}
	want("scheduler unreadable", "actuator: failing for", "Unable to contact slurm controller")

	sched.readErr, sched.actErr = nil, errors.New("scontrol: Access/permission denied")
	rep, err := l.Once(ctx)
	if err != nil || len(rep.Actions) == 0 {
		t.Fatalf("Once with scontrol refusing = %+v, %v; want priority actions and no error", rep, err)
	}
	want("actions refused", "scheduler actions: failing for", fmt.Sprintf("%d of %d actions failed", len(rep.Actions), len(rep.Actions)), "Access/permission denied")
	if err := l.Ready(); err != nil && strings.Contains(err.Error(), "actuator:") {
		t.Errorf("a pass succeeded but Ready() still reports it failing: %v", err)
	}

	sched.actErr = nil
	if _, err := l.Once(ctx); err != nil {
		t.Fatal(err)
	}
	want("recovered")
}
