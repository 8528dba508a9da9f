package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// unreadable is an audit log whose history cannot be read while fail is set
// (a SELECT that fails where INSERTs pass).
type unreadable struct {
	*audit.Log
	mu   sync.Mutex
	fail bool
}

func (u *unreadable) List(ctx context.Context, q audit.Query) ([]audit.Record, error) {
	u.mu.Lock()
	fail := u.fail
	u.mu.Unlock()
	if fail {
		return nil, errors.New("code: 497, message: Not enough privileges")
	}
	return u.Log.List(ctx, q)
}

func (u *unreadable) set(fail bool) { u.mu.Lock(); u.fail = fail; u.mu.Unlock() }

// TestLoopCapsSurviveRestart restarts the actuator (a new guard and loop on
// the same audit table) 31 minutes after a round of power-downs of 60 idle
// nodes: neither the guard's --actuator.max-power-actions-per-hour nor
// CES's --ces.max-transitions-per-hour lets more power-downs through within
// the hour than its cap. Before, both started empty after a restart: 40
// power-downs in an hour with a cap of 20.
func TestLoopCapsSurviveRestart(t *testing.T) {
	for _, tc := range []struct {
		name          string
		guardCap, ces int
		cap           int // the cap that binds
	}{
		{"guard cap", 20, 60, 20},
		{"ces cap", 1000, 10, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, conn := schematest.Database(t)
			sched := &static{snap: adapter.Snapshot{Nodes: idleNodes("gpu", 60)}}
			start := func() *Loop {
				lc := testConfig()
				lc.Forecast = ForecastPeak
				lc.CES.MinPowered, lc.CES.MaxTransitionsPerHour = 1, tc.ces
				return auditedLoop(t, conn, cfg.Database, sched, adapter.GuardConfig{Apply: true, Partitions: []string{"gpu"}, Nodes: []string{"*"}, MaxPowerPerHour: tc.guardCap}, lc)
			}
			var downs []time.Time
			l := start()
			for m := 0; m <= 90; m++ {
				if m == 31 {
					l = start() // a deploy, a crash, an OOM kill
				}
				now := t0.Add(time.Duration(m) * time.Minute)
				sched.at(now)
				rep, err := l.Once(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range rep.Actions {
					if a.Kind == string(adapter.PowerDown) && a.Outcome == audit.Applied {
						downs = append(downs, now)
					}
				}
			}
			if len(downs) == 0 {
				t.Fatal("nothing powered down")
			}
			for i, first := range downs {
				in := 0
				for _, d := range downs[i:] {
					if d.Sub(first) < time.Hour {
						in++
					}
				}
				if in > tc.cap {
					t.Fatalf("%d power-downs in the hour from +%v; the cap is %d (%d in all, last at +%v)", in, first.Sub(t0), tc.cap, len(downs), downs[len(downs)-1].Sub(t0))
				}
			}
			// The cap binds again an hour after the first round, not
			// before: the restart neither reset it nor stopped the work.
			if last := downs[len(downs)-1]; last.Sub(t0) < time.Hour {
				t.Errorf("last power-down at +%v; want a second round after the first one's hour", last.Sub(t0))
			}
		})
	}
}

// TestLoopCapsHistoryUnread: when the power actions of the hour before the
// start cannot be read, power-downs are held — recorded as skipped, saying
// why — and counted in heliostat_actuator_power_history_errors_total, while
// the read is retried each pass; power-ups go out. Once the read succeeds,
// the held power-downs go out at the next pass (not RepeatAfter later),
// within what the earlier run left of the caps.
func TestLoopCapsHistoryUnread(t *testing.T) {
	cfg, conn := schematest.Database(t)
	sched := &static{snap: adapter.Snapshot{Nodes: idleNodes("gpu", 10)}}
	start := func(au Auditor, reg prometheus.Registerer, minPowered int) *Loop {
		g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"gpu"}, Nodes: []string{"*"}, MaxPowerPerHour: 6}, sched, func() time.Time { return t0 })
		if err != nil {
			t.Fatal(err)
		}
		lc := testConfig()
		lc.Forecast, lc.PeakWindow, lc.CES.MinPowered = ForecastPeak, time.Minute, minPowered
		l, err := New(lc, g, au, nil, nil, nil, reg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	al, err := audit.New(conn, cfg.Database, nil)
	if err != nil {
		t.Fatal(err)
	}
	pass := func(l *Loop, m int) Report {
		t.Helper()
		sched.at(t0.Add(time.Duration(m) * time.Minute))
		rep, err := l.Once(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	count := func(rep Report, kind adapter.Kind, outcome, errPart string) int {
		n := 0
		for _, a := range rep.Actions {
			if a.Kind == string(kind) && a.Outcome == outcome && strings.Contains(a.Error, errPart) {
				n++
			}
		}
		return n
	}
	// The first run keeps 7 of 10 nodes powered: 3 of the guard's 6 units
	// go on power-downs (gpu-0, -1, -2).
	l := start(al, nil, 7)
	downs := 0
	for m := range 4 {
		downs += count(pass(l, m), adapter.PowerDown, audit.Applied, "")
	}
	if downs != 3 {
		t.Fatalf("first run: %d power-downs; want 3", downs)
	}

	// Restarted with the history unreadable, and a minimum of 2: a job
	// bound for gpu-0 wakes it (a fourth unit), power-downs are held.
	sched.mu.Lock()
	sched.snap.Jobs = []adapter.Job{{ID: "1", User: "u", Partition: "gpu", GPUs: 8, NodeCount: 1, Submit: t0, TimeLimit: time.Hour, Nodes: []string{"gpu-0"}}}
	sched.mu.Unlock()
	reg := prometheus.NewRegistry()
	u := &unreadable{Log: al, fail: true}
	l = start(u, reg, 2)
	held := 0
	for m := 4; m <= 6; m++ {
		rep := pass(l, m)
		if m == 4 && count(rep, adapter.PowerUp, audit.Applied, "") != 1 {
			t.Errorf("+%dm: %+v; want gpu-0 powered up for the job bound for it", m, rep.Actions)
		}
		if n := count(rep, adapter.PowerDown, audit.Applied, ""); n > 0 {
			t.Fatalf("+%dm: %d power-downs with the history unread", m, n)
		}
		held += count(rep, adapter.PowerDown, audit.Skipped, "could not be read from the audit table")
	}
	if held == 0 {
		t.Error("no power-down recorded as held for the unread history")
	}
	if got := testutil.ToFloat64(l.m.powerHistoryErrors); got != 3 {
		t.Errorf("heliostat_actuator_power_history_errors_total = %v; want 3 (a read per pass)", got)
	}
	// Readable again: of the 6 units, the first run spent 3 and this one
	// 1 on the power-up; 2 are left.
	u.set(false)
	rep := pass(l, 7)
	if n := count(rep, adapter.PowerDown, audit.Applied, ""); n != 2 {
		t.Errorf("+7m, history read: %d power-downs applied; want 2, what the caps have left (%+v)", n, rep.Actions)
	}
	if n := count(rep, adapter.PowerDown, audit.Skipped, "rate limit reached"); n == 0 {
		t.Errorf("+7m: %+v; want the rest held back by the cap", rep.Actions)
	}
}

// TestLoopPriorityCapSurvivesRestart restarts the actuator (a new guard and
// loop on the same audit table) 20 seconds after a pass whose priority
// changes filled --actuator.max-priority-updates-per-minute: no minute sees
// more changes than the cap — applied, or in a dry run advised (skipped as
// a dry run) — and the changes held back go out once the minute has room.
// Before, the restarted guard's window started empty: 8 changes within 20
// seconds with a cap of 4.
func TestLoopPriorityCapSurvivesRestart(t *testing.T) {
	const cap, jobs = 4, 10
	for _, tc := range []struct {
		name    string
		apply   bool
		outcome string // what a change the cap let through is recorded as
		// atRestart is how many changes the cap lets through in the
		// restarted run's first pass: none applied; in a dry run the
		// same 4 advised again, as the window already holds them.
		atRestart int
	}{
		{"apply", true, audit.Applied, 0},
		{"dry run", false, audit.Skipped, cap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, conn := schematest.Database(t)
			sched := &static{}
			for i := range jobs {
				sched.snap.Jobs = append(sched.snap.Jobs, adapter.Job{ID: fmt.Sprint(100 + i), User: "u", Partition: "gpu", GPUs: 8,
					Submit: t0.Add(-time.Duration(i) * time.Minute), TimeLimit: time.Duration(i+1) * time.Hour})
			}
			start := func() *Loop {
				return auditedLoop(t, conn, cfg.Database, sched, adapter.GuardConfig{Apply: tc.apply, Partitions: []string{"gpu"}, MaxPriorityPerMinute: cap}, testConfig())
			}
			let := map[string]time.Time{} // job → when the cap let its change through
			l := start()
			for s := 0; s <= 140; s += 20 {
				if s == 20 {
					l = start() // a crash, and systemd's RestartSec=5s
				}
				now := t0.Add(time.Duration(s) * time.Second)
				sched.at(now)
				rep, err := l.Once(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				through := 0
				for _, a := range rep.Actions {
					if a.Kind != string(adapter.SetPriority) || a.Outcome != tc.outcome || tc.outcome == audit.Skipped && a.Error != adapter.ErrDryRun.Error() {
						continue
					}
					through++
					if _, ok := let[a.Target]; !ok {
						let[a.Target] = now
					}
				}
				if s == 20 && through != tc.atRestart {
					t.Errorf("restarted at +20s: %d priority changes let through; want %d (%+v)", through, tc.atRestart, rep.Actions)
				}
			}
			var times []time.Time
			for _, at := range let {
				times = append(times, at)
			}
			for _, first := range times {
				in := 0
				for _, at := range times {
					if !at.Before(first) && at.Sub(first) < time.Minute {
						in++
					}
				}
				if in > cap {
					t.Fatalf("%d priority changes in the minute from +%v; the cap is %d (%v)", in, first.Sub(t0), cap, let)
				}
			}
			if len(let) != jobs {
				t.Errorf("%d of %d jobs' priorities changed by +140s; want all, once the cap had room (%v)", len(let), jobs, let)
			}
		})
	}
}
