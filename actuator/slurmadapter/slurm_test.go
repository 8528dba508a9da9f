package slurmadapter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/actuator/ces"
	"github.com/heliostat-dev/heliostat/actuator/loop"
	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestMain(m *testing.M) { os.Exit(schematest.Main(m)) }

// loggedCommands returns a directory of scripts that run Slurm's own
// commands of those names, each first appending its command line to log.
func loggedCommands(t *testing.T, names ...string) (dir, log string) {
	t.Helper()
	dir = t.TempDir()
	log = filepath.Join(dir, "commands.log")
	wrapCommands(t, dir, func(name, real string) string {
		return fmt.Sprintf("echo \"%s $*\" >> %s\nexec %s \"$@\"", name, log, real)
	}, names...)
	return dir, log
}

// wrapCommands writes into dir a script for each of Slurm's commands of
// those names whose body (after the #! line) body returns, given the name
// and the command's own path.
func wrapCommands(t *testing.T, dir string, body func(name, real string) string, names ...string) {
	t.Helper()
	for _, name := range names {
		real, err := exec.LookPath(name)
		if err != nil {
			t.Fatal(err)
		}
		script := "#!/bin/sh\n" + body(name, real) + "\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// auditedLoop returns a guard on s that applies actions to partition batch
// and nodes gpu*, a control loop through it that plans power from a peak
// window of a minute with no down delay and keeps at least minPowered nodes
// powered, both on clk, and the loop's audit log in database db.
func auditedLoop(t *testing.T, s *Scheduler, db string, conn driver.Conn, clk *clock, minPowered int) (*adapter.Guard, *loop.Loop, *audit.Log) {
	t.Helper()
	al, err := audit.New(conn, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"batch"}, Nodes: []string{"gpu*"}}, s, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	lcfg := loop.Config{Cluster: "slurm-test", Interval: time.Second, PeakWindow: time.Minute}
	lcfg.CES = ces.DefaultConfig()
	lcfg.CES.MinPowered, lcfg.CES.DownDelay, lcfg.CES.WakeLatency = minPowered, 0, time.Minute
	l, err := loop.New(lcfg, g, al, nil, nil, nil, nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	return g, l, al
}

// passes returns a function that runs one pass of l and returns its
// report, failing the test (with slurmctld's log) if the pass fails.
func passes(ctx context.Context, t *testing.T, c *slurmtest.Cluster, l *loop.Loop) func() loop.Report {
	return func() loop.Report {
		t.Helper()
		rep, err := l.Once(ctx)
		if err != nil {
			t.Fatalf("pass: %v\n%s", err, c.LogTail(20))
		}
		return rep
	}
}

// clock is the actuator's clock in these tests: real Slurm, injected time,
// so that the loop's peak window passes without sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestSlurm drives the actuator against a real slurmctld and four slurmd
// (gpu1..gpu4, 8 fake GPUs each) with power saving configured, in order:
//
//	(a) the loop raises a younger, shorter job's priority and it starts
//	    ahead of an older one;
//	(b) with one node busy and a minimum of three powered, the loop powers
//	    an idle node down and the suspend program runs for it; right before
//	    the command the adapter read the queue, then the node;
//	(c) a node with a running job, or one a pending job is bound for, is
//	    never powered down, whoever asks;
//	(d) a queue that outgrows the powered nodes powers the node back up:
//	    the resume program runs and the node takes jobs again.
func TestSlurm(t *testing.T) {
	c := slurmtest.StartWith(t, slurmtest.Options{Conf: map[string]string{"SuspendTimeout": "3", "ResumeTimeout": "30"}})
	dbc, conn := schematest.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	clk := &clock{t: time.Now()}
	bin, cmdLog := loggedCommands(t, "squeue", "sinfo", "scontrol")
	s, err := New(Config{Conf: c.Conf(), BinDir: bin}, c.Env(), nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	g, l, al := auditedLoop(t, s, dbc.Database, conn, clk, 3)
	must := func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("%v\n%s", err, c.LogTail(20))
		}
		return out
	}
	pass := passes(ctx, t, c, l)
	nodeState := func(name string) string {
		return strings.TrimSpace(must(c.Run(ctx, "sinfo", "-h", "-n", name, "-o", "%t")))
	}
	waitNode := func(name, want string) {
		t.Helper()
		for st := nodeState(name); st != want; st = nodeState(name) {
			select {
			case <-ctx.Done():
				t.Fatalf("%s is %q; want %q\n%s", name, st, want, c.LogTail(20))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	running := func(id string) {
		t.Helper()
		if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, id); err != nil {
			t.Fatalf("%v\n%s", err, c.LogTail(20))
		}
	}

	t.Run("a_priority", func(t *testing.T) {
		filler := must(c.Submit(ctx, "-N4", "--gres=gpu:8", "--wrap", "sleep 300"))
		running(filler)
		old := must(c.Submit(ctx, "-N4", "--gres=gpu:8", "-t", "60", "-J", "old", "--wrap", "sleep 30"))
		young := must(c.Submit(ctx, "-N4", "--gres=gpu:8", "-t", "1", "-J", "young", "--wrap", "sleep 30"))
		rep := pass()
		set := map[string]int64{}
		for _, a := range rep.Actions {
			if a.Kind == "set_priority" && a.Outcome == audit.Applied {
				set[a.Target] = *a.Value
			}
		}
		if len(set) != 2 || !(set[young] > set[old]) {
			t.Fatalf("pass set priorities %v; want %s above %s (actions %+v)", set, young, old, rep.Actions)
		}
		for id, want := range set {
			got := must(c.Run(ctx, "squeue", "-h", "-j", id, "-o", "%Q"))
			if p, _ := strconv.ParseInt(strings.TrimSpace(got), 10, 64); p != want {
				t.Errorf("squeue priority of %s = %s; want %d", id, got, want)
			}
		}
		must(c.Run(ctx, "scancel", filler))
		running(young)
		if st, err := c.State(ctx, old); err != nil || st != "PENDING" {
			t.Errorf("older job %s is %q (%v) while the raised %s runs; want PENDING", old, st, err, young)
		}
		must(c.Run(ctx, "scancel", old, young))
		if _, err := c.WaitJob(ctx, old, young); err != nil {
			t.Fatal(err)
		}
	})

	// A job held after the pass looked at the queue keeps its hold, and
	// its priority is skipped, not failed: within PriorityRecheck of the
	// look Slurm refuses the command ("Job is in held state"); past it the
	// guard reads the queue again and sends nothing.
	t.Run("a_held_after_the_look", func(t *testing.T) {
		id := must(c.Submit(ctx, "--gres=gpu:8", "-N1", "--begin=now+1hour", "--wrap", "true"))
		if _, err := g.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		must(c.Run(ctx, "scontrol", "hold", id))
		for _, after := range []time.Duration{0, adapter.PriorityRecheck + time.Second} {
			clk.add(after)
			if r := g.Do(ctx, adapter.Action{Kind: adapter.SetPriority, Target: id, Partition: "batch", Priority: 5000}); r.Outcome != adapter.Skipped || !errors.Is(r.Err, adapter.ErrHeld) {
				t.Errorf("%v after the look: set the priority of held job %s = %v %v; want skipped, %v", after, id, r.Outcome, r.Err, adapter.ErrHeld)
			}
			if got := strings.TrimSpace(must(c.Run(ctx, "squeue", "-h", "-j", id, "-o", "%Q %r"))); !strings.HasPrefix(got, "0 JobHeld") {
				t.Errorf("%v after the look: squeue priority and reason of %s = %q; want 0 JobHeld…", after, id, got)
			}
		}
		must(c.Run(ctx, "scancel", id))
	})

	busyJob := ""
	t.Run("b_power_down_idle", func(t *testing.T) {
		busyJob = must(c.Submit(ctx, "-w", "gpu1", "--gres=gpu:2", "--wrap", "sleep 300"))
		running(busyJob)
		pass() // starts the peak window
		clk.add(2 * time.Minute)
		rep := pass()
		var down []string
		for _, a := range rep.Actions {
			if a.Kind == "power_down" {
				if a.Outcome != audit.Applied {
					t.Errorf("power-down %s: %s %s", a.Target, a.Outcome, a.Error)
				}
				down = append(down, a.Target)
			}
		}
		if !slices.Equal(down, []string{"gpu2"}) {
			t.Fatalf("powered down %v; want [gpu2] (busy gpu1, three kept powered); actions %+v", down, rep.Actions)
		}
		waitNode("gpu2", "idle~")
		if calls, err := c.SuspendCalls(); err != nil || !slices.Equal(calls, []string{"gpu2"}) {
			t.Errorf("suspend program calls %q, %v; want [gpu2]", calls, err)
		}
		b, err := os.ReadFile(cmdLog)
		if err != nil {
			t.Fatal(err)
		}
		cmds := strings.Split(strings.TrimSpace(string(b)), "\n")
		i := slices.Index(cmds, "scontrol update nodename=gpu2 state=POWER_DOWN")
		if i < 2 || !strings.HasPrefix(cmds[i-2], "squeue ") || !strings.HasPrefix(cmds[i-1], "sinfo ") {
			t.Errorf("commands up to the power-down %q; want squeue, then sinfo, right before it", cmds[:max(i+1, 0)])
		}
	})

	t.Run("c_busy_never_touched", func(t *testing.T) {
		bound := must(c.Submit(ctx, "-w", "gpu3", "--gres=gpu:8", "-N1", "--begin=now+1hour", "--wrap", "true"))
		for _, tc := range []struct {
			node string
			want error
		}{{"gpu1", adapter.ErrNodeBusy}, {"gpu3", adapter.ErrNodeBusy}} {
			if err := s.PowerDown(ctx, tc.node); !errors.Is(err, tc.want) {
				t.Errorf("PowerDown(%s) = %v; want %v", tc.node, err, tc.want)
			}
			if r := g.Do(ctx, adapter.Action{Kind: adapter.PowerDown, Target: tc.node}); r.Outcome != adapter.Skipped || !errors.Is(r.Err, tc.want) {
				t.Errorf("guard power-down %s = %v %v; want skipped, %v", tc.node, r.Outcome, r.Err, tc.want)
			}
		}
		// The plan itself never names them, pass after pass.
		for range 3 {
			clk.add(time.Minute)
			for _, a := range pass().Actions {
				if a.Kind == "power_down" && (a.Target == "gpu1" || a.Target == "gpu3") {
					t.Errorf("the loop powered down %s: %+v", a.Target, a)
				}
			}
		}
		if st := nodeState("gpu1"); st != "mix" {
			t.Errorf("gpu1 is %q; want mix (running, no power-down pending)", st)
		}
		if calls, _ := c.SuspendCalls(); slices.Contains(calls, "gpu1") || slices.Contains(calls, "gpu3") {
			t.Errorf("suspend program ran for %q", calls)
		}
		must(c.Run(ctx, "scancel", bound))
	})

	t.Run("d_queue_powers_up", func(t *testing.T) {
		// Whole-cluster jobs cannot start while gpu1 is busy, so Slurm
		// itself does not resume gpu2 for them: only the plan can.
		var queued []string
		for range 2 {
			queued = append(queued, must(c.Submit(ctx, "-N4", "--gres=gpu:8", "--wrap", "true")))
		}
		clk.add(time.Minute)
		rep := pass()
		var up []string
		for _, a := range rep.Actions {
			if a.Kind == "power_up" && a.Outcome == audit.Applied {
				up = append(up, a.Target)
			}
		}
		if !slices.Equal(up, []string{"gpu2"}) {
			t.Fatalf("powered up %v; want [gpu2]; actions %+v", up, rep.Actions)
		}
		waitNode("gpu2", "idle")
		if calls, err := c.ResumeCalls(); err != nil || !slices.Equal(calls, []string{"gpu2"}) {
			t.Errorf("resume program calls %q, %v; want [gpu2]", calls, err)
		}
		must(c.Run(ctx, "scancel", busyJob))
		if states, err := c.WaitJob(ctx, queued...); err != nil || states[0] != "COMPLETED" || states[1] != "COMPLETED" {
			t.Errorf("queued whole-cluster jobs: %v, %v; want COMPLETED on all four nodes", states, err)
		}
	})

	// Every action is in the audit table with its outcome.
	recs, err := al.List(ctx, audit.Query{Cluster: "slurm-test", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Outcome == audit.Planned || r.Adapter != "slurm" || r.Reason == "" {
			t.Errorf("audit row %+v", r)
		}
	}
}

// TestSlurmNodesLeftOn drives the adapter and the loop against a real Slurm
// 22.05 that accepts a manual POWER_DOWN of nodes it should not lose and runs
// the suspend program for them:
//
//	(a) gpu1's only job, CPU-only, is suspended (scontrol suspend, as
//	    PreemptMode=SUSPEND does): Slurm frees its CPUs and the node's
//	    counters read idle, but the job holds the node, so it is busy;
//	(b) SuspendExcNodes=gpu[2-3]:1,gpu4 keeps gpu4 and one usable node of
//	    gpu2..gpu3 on: gpu4 and gpu2 are excluded, and PowerDown refuses
//	    them (a skip, not a failure, through the guard);
//	(c) the loop, with a minimum of one node powered and no down delay,
//	    asks to power down gpu3 alone, the only node it may (before, it
//	    asked for gpu2 and gpu4 every pass, and the guard skipped them),
//	    and the suspend program runs for gpu3 alone.
func TestSlurmNodesLeftOn(t *testing.T) {
	c := slurmtest.StartWith(t, slurmtest.Options{Conf: map[string]string{"SuspendTimeout": "3", "ResumeTimeout": "30", "SuspendExcNodes": "gpu[2-3]:1,gpu4"}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	must := mustOK(t, c)
	clk := &clock{t: time.Now()}
	s, err := New(Config{Conf: c.Conf()}, c.Env(), nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"batch"}, Nodes: []string{"gpu*"}}, s, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	node := func(name string) adapter.Node {
		t.Helper()
		snap, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := find(snap.Nodes, name)
		if !ok {
			t.Fatalf("no node %s in %+v", name, snap.Nodes)
		}
		return n
	}
	refused := func(name string, want error) {
		t.Helper()
		if err := s.PowerDown(ctx, name); !errors.Is(err, want) {
			t.Errorf("PowerDown(%s) = %v; want %v", name, err, want)
		}
		if r := g.Do(ctx, adapter.Action{Kind: adapter.PowerDown, Target: name}); r.Outcome != adapter.Skipped || !errors.Is(r.Err, want) {
			t.Errorf("guard power-down %s = %v %v; want skipped, %v", name, r.Outcome, r.Err, want)
		}
	}

	id := must(c.Submit(ctx, "-N1", "-w", "gpu1", "--wrap", "sleep 300"))
	if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, id); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail(20))
	}
	must(c.Run(ctx, "scontrol", "suspend", id))
	if _, err := c.WaitState(ctx, func(s string) bool { return s == "SUSPENDED" }, id); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail(20))
	}

	t.Run("a_suspended_job_holds_its_node", func(t *testing.T) {
		n := node("gpu1")
		t.Logf("gpu1 with job %s suspended: state %s, busy %v, jobs %v", id, n.State, n.Busy, n.Jobs)
		if !slices.Equal(n.Jobs, []string{id}) {
			t.Errorf("gpu1's jobs = %v; want [%s]", n.Jobs, id)
		}
		refused("gpu1", adapter.ErrNodeBusy)
	})

	t.Run("b_excluded_from_power_saving", func(t *testing.T) {
		for name, want := range map[string]bool{"gpu1": false, "gpu2": true, "gpu3": false, "gpu4": true} {
			if got := node(name).PowerSaveExcluded; got != want {
				t.Errorf("%s: PowerSaveExcluded = %v; want %v", name, got, want)
			}
		}
		refused("gpu4", adapter.ErrPowerSaveExcluded)
		refused("gpu2", adapter.ErrPowerSaveExcluded)
	})

	t.Run("c_loop_powers_down_only_what_it_may", func(t *testing.T) {
		lcfg := loop.Config{Cluster: "x", Interval: time.Second, PeakWindow: time.Minute, Forecast: loop.ForecastPeak}
		lcfg.CES = ces.DefaultConfig()
		lcfg.CES.MinPowered, lcfg.CES.DownDelay, lcfg.CES.WakeLatency = 1, 0, time.Minute
		l, err := loop.New(lcfg, g, &memAudit{}, nil, nil, nil, nil, clk.now)
		if err != nil {
			t.Fatal(err)
		}
		var down []string
		for range 2 {
			rep, err := l.Once(ctx)
			if err != nil {
				t.Fatalf("pass: %v\n%s", err, c.LogTail(20))
			}
			for _, a := range rep.Actions {
				if a.Kind == string(adapter.PowerDown) {
					if a.Outcome != audit.Applied {
						t.Errorf("power_down %s: %s %s; want only nodes the plan may power, applied", a.Target, a.Outcome, a.Error)
					}
					down = append(down, a.Target)
				}
			}
			clk.add(2 * time.Minute) // past the peak window
		}
		if !slices.Equal(down, []string{"gpu3"}) {
			t.Errorf("the loop powered down %v; want [gpu3] (gpu1's job is suspended, gpu2 and gpu4 excluded)", down)
		}
		for st := ""; st != "idle~"; st = must(c.Run(ctx, "sinfo", "-h", "-n", "gpu3", "-o", "%t")) {
			select {
			case <-ctx.Done():
				t.Fatalf("gpu3 is %q; want idle~\n%s", st, c.LogTail(20))
			case <-time.After(200 * time.Millisecond):
			}
		}
		// gpu2 is now the one usable node of gpu[2-3]: still kept on.
		refused("gpu2", adapter.ErrPowerSaveExcluded)
		if calls, err := c.SuspendCalls(); err != nil || !slices.Equal(calls, []string{"gpu3"}) {
			t.Errorf("suspend program calls %q, %v; want [gpu3]", calls, err)
		}
	})
	must(c.Run(ctx, "scancel", id))
}

// memAudit is an audit log in memory: the loop's actions, planned and
// settled.
type memAudit struct{ n int }

func (m *memAudit) NewID(time.Time) string                       { m.n++; return strconv.Itoa(m.n) }
func (m *memAudit) Plan(context.Context, []audit.Record) error   { return nil }
func (m *memAudit) Settle(context.Context, []audit.Record) error { return nil }

// startCluster starts a private Slurm cluster for one test and returns it,
// a context for the test's minute, and must, which fails t on a command's
// error (with slurmctld's log) and returns its output trimmed.
func startCluster(t *testing.T) (*slurmtest.Cluster, context.Context, func(string, error) string) {
	t.Helper()
	c := slurmtest.StartWith(t, slurmtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c, ctx, mustOK(t, c)
}

// mustOK returns must, which fails t on a command's error (with c's
// slurmctld log) and returns its output trimmed.
func mustOK(t *testing.T, c *slurmtest.Cluster) func(string, error) string {
	return func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("%v\n%s", err, c.LogTail(20))
		}
		return strings.TrimSpace(out)
	}
}

// waitReason polls squeue until pending job id waits for a reason ok
// takes, and fails the test (naming want) if ctx ends first.
func waitReason(ctx context.Context, t *testing.T, c *slurmtest.Cluster, id, want string, ok func(string) bool) {
	t.Helper()
	must := mustOK(t, c)
	for r := ""; !ok(r); r = must(c.Run(ctx, "squeue", "-h", "-j", id, "-o", "%r")) {
		select {
		case <-ctx.Done():
			t.Fatalf("job %s waits for %q; want %s", id, r, want)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// runningJob submits a job with args and waits until it runs; it returns
// the job's id.
func runningJob(ctx context.Context, t *testing.T, c *slurmtest.Cluster, args ...string) string {
	t.Helper()
	id := mustOK(t, c)(c.Submit(ctx, args...))
	if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, id); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail(20))
	}
	return id
}

// snapshotNow returns an adapter on c, its clock (set to now) and its first
// snapshot.
func snapshotNow(ctx context.Context, t *testing.T, c *slurmtest.Cluster) (*Scheduler, *clock, adapter.Snapshot) {
	t.Helper()
	clk := &clock{t: time.Now()}
	s, err := New(Config{Conf: c.Conf()}, c.Env(), nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s, clk, snap
}

// TestSlurmPendingArraysAndWaits reads a real Slurm 22.05's queue: a pending
// array stands for its tasks — all those of its task list, however long
// (squeue cuts the list at 64 bytes unless SLURM_BITSTR_LEN=0), or its
// throttle less its running tasks — and jobs waiting for a dependency, a
// begin time or the array's throttle cannot start however many nodes are up.
func TestSlurmPendingArraysAndWaits(t *testing.T) {
	c, ctx, must := startCluster(t)
	// Two of the four nodes run the throttled array's tasks; each task of
	// the other arrays asks for three nodes, so they stay pending.
	thr := must(c.Submit(ctx, "--gres=gpu:8", "-N1", "--array=0-9%2", "-J", "thr", "--wrap", "sleep 120"))
	step := must(c.Submit(ctx, "--gres=gpu:8", "-N3", "--array=0-99:3", "-J", "step", "--wrap", "true"))
	var squares []string
	for i := range 30 {
		squares = append(squares, strconv.Itoa(i*i))
	}
	long := must(c.Submit(ctx, "--gres=gpu:8", "-N3", "--array="+strings.Join(squares, ","), "-J", "long", "--wrap", "true"))
	dep := must(c.Submit(ctx, "--gres=gpu:1", "--dependency=afterok:"+thr, "-J", "dep", "--wrap", "true"))
	begin := must(c.Submit(ctx, "--gres=gpu:1", "--begin=now+1hour", "-J", "begin", "--wrap", "true"))
	for len(strings.Fields(must(c.Run(ctx, "squeue", "-h", "-t", "RUNNING", "-o", "%i")))) < 2 {
		time.Sleep(200 * time.Millisecond)
	}
	s, err := New(Config{Conf: c.Conf()}, c.Env(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		tasks, gpus, nodes int
		ineligible         bool
	}
	got := map[string]view{}
	for _, j := range snap.Jobs {
		got[j.ID] = view{j.PendingTasks(), j.GPUs, j.NodeCount, j.Ineligible}
	}
	want := map[string]view{
		thr:   {1, 8, 1, true}, // 2-9%2 with 2 running: the throttle is spent
		step:  {34, 24, 3, false},
		long:  {30, 24, 3, false},
		dep:   {1, 1, 1, true},
		begin: {1, 1, 1, true},
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("job %s = %+v; want %+v", id, got[id], w)
		}
	}
	if t.Failed() {
		t.Log(must(c.Run(ctx, "squeue", "-o", "%i %T %r %K")))
	}
}

// TestSlurmArrayPartlyHeld sets the priority of a pending job array one of
// whose tasks was held after the pass looked at the queue. Slurm 22.05
// sets it on the other tasks, refuses the held one ("Job is in held
// state") and scontrol exits 1, printing a line per group of tasks: the
// action is applied, not skipped as held, its error names the task left
// out, and it keeps its unit of the rate limit. An array all of whose
// tasks are held is skipped as held, and its unit is given back.
func TestSlurmArrayPartlyHeld(t *testing.T) {
	c, ctx, must := startCluster(t)
	// A job on all four nodes keeps the others pending.
	filler := must(c.Submit(ctx, "-N4", "--gres=gpu:8", "--wrap", "sleep 300"))
	if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, filler); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail(20))
	}
	part := must(c.Submit(ctx, "-N4", "--gres=gpu:8", "--array=0-3", "--wrap", "true"))
	all := must(c.Submit(ctx, "-N4", "--gres=gpu:8", "--array=0-3", "--wrap", "true"))
	other := must(c.Submit(ctx, "-N4", "--gres=gpu:8", "--wrap", "true"))
	clk := &clock{t: time.Now()} // stands still: the guard's look stays fresh
	s, err := New(Config{Conf: c.Conf()}, c.Env(), nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"batch"}, MaxPriorityPerMinute: 1}, s, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	// Held after the look: the guard cannot see it, Slurm refuses it.
	must(c.Run(ctx, "scontrol", "hold", part+"_2"))
	for _, task := range []string{"0", "1", "2", "3"} {
		must(c.Run(ctx, "scontrol", "hold", all+"_"+task))
	}
	priorities := func(id string) string {
		return strings.Join(strings.Fields(must(c.Run(ctx, "squeue", "-r", "-h", "-j", id, "-o", "%i=%Q"))), " ")
	}

	res := g.Do(ctx, adapter.Action{Kind: adapter.SetPriority, Target: all, Partition: "batch", Priority: 4242})
	if res.Outcome != adapter.Skipped || !errors.Is(res.Err, adapter.ErrHeld) {
		t.Errorf("set the priority of array %s, every task held = %s %v; want skipped, %v", all, res.Outcome, res.Err, adapter.ErrHeld)
	}
	want := fmt.Sprintf("%[1]s_0=0 %[1]s_1=0 %[1]s_2=0 %[1]s_3=0", all)
	if got := priorities(all); got != want {
		t.Errorf("priorities of array %s = %q; want %q", all, got, want)
	}

	res = g.Do(ctx, adapter.Action{Kind: adapter.SetPriority, Target: part, Partition: "batch", Priority: 4242})
	t.Logf("array %s, task 2 held: %s: %v", part, res.Outcome, res.Err)
	if res.Outcome != adapter.Applied || !errors.Is(res.Err, adapter.ErrPartial) || !strings.Contains(res.Err.Error(), part+"_2: Job is in held state") {
		t.Errorf("set the priority of array %s, task 2 held = %s %v; want applied, %v naming %s_2 held", part, res.Outcome, res.Err, adapter.ErrPartial, part)
	}
	want = fmt.Sprintf("%[1]s_0=4242 %[1]s_1=4242 %[1]s_3=4242 %[1]s_2=0", part)
	if got := priorities(part); got != want {
		t.Errorf("priorities of array %s = %q; want %q", part, got, want)
	}

	// The cap of 1 a minute was spent on the change that happened.
	res = g.Do(ctx, adapter.Action{Kind: adapter.SetPriority, Target: other, Partition: "batch", Priority: 4242})
	if res.Outcome != adapter.Skipped || !errors.Is(res.Err, adapter.ErrRateLimited) {
		t.Errorf("set the priority of job %s after the array's = %s %v; want skipped, %v", other, res.Outcome, res.Err, adapter.ErrRateLimited)
	}
}

// TestSlurmHetJobPriorities sets the priorities of a pending heterogeneous
// job's two components, as a pass does, each to its own value: Slurm 22.05
// takes the leader's job id for the whole job (every component), so the
// adapter names the leader alone ("J+0") and the other component keeps the
// priority set on it, whichever is set last.
func TestSlurmHetJobPriorities(t *testing.T) {
	c, ctx, must := startCluster(t)
	filler := must(c.Submit(ctx, "-N4", "--gres=gpu:8", "--wrap", "sleep 300"))
	if _, err := c.WaitState(ctx, func(s string) bool { return s == "RUNNING" }, filler); err != nil {
		t.Fatalf("%v\n%s", err, c.LogTail(20))
	}
	leader := must(c.Submit(ctx, "--gres=gpu:2", "--wrap", "true", ":", "--gres=gpu:4", "--wrap", "true"))
	clk := &clock{t: time.Now()}
	s, err := New(Config{Conf: c.Conf()}, c.Env(), nil, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"batch"}}, s, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := g.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var other string
	for _, j := range snap.Jobs {
		if j.ID != leader && j.ID != filler {
			other = j.ID
		}
	}
	if other == "" {
		t.Fatalf("queue %+v: no second component of het job %s", snap.Jobs, leader)
	}
	want := map[string]int64{other: 3000, leader: 2000} // the leader last
	for _, id := range []string{other, leader} {
		res := g.Do(ctx, adapter.Action{Kind: adapter.SetPriority, Target: id, Partition: "batch", Priority: want[id]})
		if res.Outcome != adapter.Applied || res.Err != nil {
			t.Fatalf("set the priority of component %s = %s %v; want applied", id, res.Outcome, res.Err)
		}
	}
	got := must(c.Run(ctx, "squeue", "-h", "-j", leader, "-o", "%i %Q"))
	w := fmt.Sprintf("%s+0 %d\n%s+1 %d", leader, want[leader], leader, want[other])
	lines := strings.Split(got, "\n")
	slices.Sort(lines)
	if strings.Join(lines, "\n") != w {
		t.Errorf("priorities of het job %s:\n%s\nwant\n%s", leader, got, w)
	}
}
