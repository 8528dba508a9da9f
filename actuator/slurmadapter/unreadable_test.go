package slurmadapter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/collector/slurm/slurmtest"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestSlurmUnreadableJob: on a real Slurm 22.05 whose squeue writes one
// pending job's GPU request in a form the adapter cannot read (the test's
// squeue rewrites that job's "gres:gpu:7" to "gres:gpu:7:x", as a plugin or
// a later release might write something new), the actuator's passes go on.
// Before 2026-11-25 that one record failed the whole squeue document, and
// with it every pass. Now the job beside it gets its priority, the
// unreadable job keeps its own, the decode error is counted, and no idle
// node of its partition is powered down while it waits: each power-down is
// refused, naming the job, and the suspend program never runs. Once the job
// has left the queue the idle nodes are powered down (when the refused
// power-downs are asked for again, --actuator.repeat-after later).
func TestSlurmUnreadableJob(t *testing.T) {
	c := slurmtest.StartWith(t, slurmtest.Options{Conf: map[string]string{"SuspendTimeout": "3", "ResumeTimeout": "30"}})
	dbc, conn := schematest.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	must := mustOK(t, c)
	runningJob(ctx, t, c, "-w", "gpu1", "--gres=gpu:8", "--wrap", "sleep 300")
	bad := must(c.Submit(ctx, "-w", "gpu1", "--gres=gpu:7", "-t", "30", "--wrap", "true"))
	good := must(c.Submit(ctx, "-w", "gpu1", "--gres=gpu:2", "-t", "30", "--wrap", "true"))
	waitReason(ctx, t, c, good, "Resources or Priority", func(r string) bool { return r == "Resources" || r == "Priority" })

	bin := t.TempDir()
	wrapCommands(t, bin, func(name, real string) string {
		if name != "squeue" {
			return fmt.Sprintf("exec %s \"$@\"", real)
		}
		return fmt.Sprintf("out=$(%s \"$@\") || exit $?\nprintf '%%s\\n' \"$out\" | sed 's/\"gres:gpu:7\"/\"gres:gpu:7:x\"/g'", real)
	}, "squeue", "sinfo", "scontrol")
	clk := &clock{t: time.Now()}
	reg := prometheus.NewRegistry()
	s, err := New(Config{Conf: c.Conf(), BinDir: bin}, c.Env(), reg, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	_, l, _ := auditedLoop(t, s, dbc.Database, conn, clk, 0)
	pass := passes(ctx, t, c, l)

	var refused int
	priorities := map[string]bool{}
	for range 3 {
		for _, a := range pass().Actions {
			switch a.Kind {
			case string(adapter.SetPriority):
				priorities[a.Target] = a.Outcome == audit.Applied
			case string(adapter.PowerDown):
				if a.Outcome != audit.Skipped || !strings.Contains(a.Error, "pending job "+bad) || !strings.Contains(a.Error, `"gpu:7:x"`) {
					t.Errorf("power-down of %s: %s %q; want skipped, naming job %s and its request", a.Target, a.Outcome, a.Error, bad)
				}
				refused++
			}
		}
		clk.add(2 * time.Minute)
	}
	if !priorities[good] || len(priorities) != 1 {
		t.Errorf("priorities set %v; want job %s's only (job %s could not be read)", priorities, good, bad)
	}
	if refused == 0 {
		t.Error("no power-down planned for the idle gpu2..gpu4; want them planned and refused")
	}
	if calls, err := c.SuspendCalls(); err != nil || len(calls) != 0 {
		t.Errorf("suspend program calls %q, %v; want none while job %s waits", calls, err, bad)
	}
	if n := testutil.ToFloat64(s.m.decodeErrors.WithLabelValues("squeue", "record")); n < 3 {
		t.Errorf("heliostat_actuator_slurm_decode_errors_total{command=squeue,kind=record} = %v; want one per read of the queue, at least 3", n)
	}

	must(c.Run(ctx, "scancel", bad))
	if _, err := c.WaitJob(ctx, bad); err != nil {
		t.Fatal(err)
	}
	// A refused power-down is asked for again once --actuator.repeat-after
	// (10 minutes) has passed.
	clk.add(10 * time.Minute)
	var down []string
	for range 2 {
		for _, a := range pass().Actions {
			if a.Kind == string(adapter.PowerDown) && a.Outcome == audit.Applied {
				down = append(down, a.Target)
			}
		}
		clk.add(2 * time.Minute)
	}
	// Demand is now gpu1 and the node job good needs; CES keeps its buffer
	// above it and powers down the rest.
	slices.Sort(down)
	if len(down) == 0 || slices.Contains(down, "gpu1") {
		t.Errorf("powered down %v once job %s left; want idle nodes of gpu2..gpu4", down, bad)
	}
}
