package loop

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/demandlog"
	"github.com/heliostat-dev/heliostat/predictor/demand"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// storeLoop is forecastLoop keeping its demand history in d.
func storeLoop(t *testing.T, c Config, d DemandStore) *Loop {
	t.Helper()
	l := forecastLoop(t, c)
	l.pool = map[string]*poolState{}
	l.stored = storedDemand{store: d}
	return l
}

// sameSteps says whether two demand histories hold the same steps.
func sameSteps(a, b *demandModel) bool {
	return a.steps.Start.Equal(b.steps.Start) && slices.EqualFunc(a.steps.Values, b.steps.Values, func(x, y float64) bool {
		return x == y || (math.IsNaN(x) && math.IsNaN(y))
	})
}

// TestDemandStoreRestart: an actuator restarted after 30 hours forecasts with
// the demand model at its first pass, from exactly the history the first
// run recorded (saved to ClickHouse and read back), including the step the
// first run stopped in; without a store it would watch demand for another
// day first.
func TestDemandStoreRestart(t *testing.T) {
	cfg, conn := schematest.Database(t)
	dl, err := demandlog.New(conn, cfg.Database, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := storeLoop(t, Config{}, dl)
	ps := &poolState{name: "gpu", first: day0}
	first.pool["gpu"] = ps
	first.loadDemand(ctx, day0)
	stop := day0.Add(30*time.Hour + 4*time.Minute) // within a step
	var now time.Time
	for now = day0; now.Before(stop); now = now.Add(2 * time.Minute) {
		first.forecast(ps, now, daily(now))
		if now.Minute() == 0 || now.Add(2*time.Minute).After(stop) {
			first.saveDemand(ctx, now)
		}
	}
	if len(first.stored.unsaved) != 0 {
		t.Fatalf("%d steps left unsaved", len(first.stored.unsaved))
	}

	restarted := storeLoop(t, Config{}, dl)
	restarted.loadDemand(ctx, now)
	rps := &poolState{name: "gpu", first: now}
	restarted.pool["gpu"] = rps
	f, kind := restarted.forecast(rps, now, 0) // a quiet first pass: it must not lower the saved step
	if !strings.HasPrefix(kind, "demand model") || f.Horizon != time.Hour || f.Upper < f.Max {
		t.Fatalf("restarted: first pass forecast %+v, kind %q; want the demand model", f, kind)
	}
	if !sameSteps(rps.model, ps.model) {
		t.Fatalf("restarted with history from %v (%d steps), the first run had %v (%d steps)",
			rps.model.steps.Start, len(rps.model.steps.Values), ps.model.steps.Start, len(ps.model.steps.Values))
	}
	if len(restarted.stored.unsaved) != 0 {
		t.Errorf("a pass below the saved step queued %d steps to save", len(restarted.stored.unsaved))
	}
	if n := testutil.CollectAndCount(restarted.m.demandStore); n != 0 {
		t.Errorf("store errors counted under %d labels", n)
	}

	// Restarted after three hours down: the first step waits for an
	// observation (the watched peak), the next one forecasts with the
	// model on the saved history.
	later := now.Add(3 * time.Hour)
	late := storeLoop(t, Config{}, dl)
	late.loadDemand(ctx, later)
	lps := &poolState{name: "gpu", first: later}
	if _, kind := late.forecast(lps, later, daily(later)); !strings.Contains(kind, "since the gap") {
		t.Errorf("restarted after 3 h: first pass kind %q, want the peak until a step is observed", kind)
	}
	next := later.Truncate(10 * time.Minute).Add(10 * time.Minute)
	if _, kind := late.forecast(lps, next, daily(next)); !strings.HasPrefix(kind, "demand model") {
		t.Errorf("restarted after 3 h: kind %q a step later, want the model", kind)
	}
	if !lps.model.steps.Start.Equal(day0) {
		t.Errorf("restarted after 3 h: history from %v, want %v", lps.model.steps.Start, day0)
	}

	// Without the store, the same restart falls back to the peak.
	bare := storeLoop(t, Config{}, nil)
	if _, kind := bare.forecast(&poolState{name: "gpu", first: now}, now, 0); !strings.Contains(kind, "model after 24h0m0s of demand history") {
		t.Errorf("restart without a store: kind %q", kind)
	}
}

// TestDemandStoreLateLoad: when the saved history cannot be read at first,
// the loop forecasts from what it records, counts the failure, and merges
// the saved history in once a read succeeds; saved steps that are not
// demands are rejected and counted.
func TestDemandStoreLateLoad(t *testing.T) {
	cfg, conn := schematest.Database(t)
	dl, err := demandlog.New(conn, cfg.Database, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var saved []demandlog.Mark
	for at := day0; at.Before(day0.Add(25 * time.Hour)); at = at.Add(10 * time.Minute) {
		saved = append(saved, demandlog.Mark{Partition: "gpu", Step: at, Demand: daily(at)})
	}
	if err := dl.Save(ctx, DefaultCluster, saved); err != nil {
		t.Fatal(err)
	}
	// A step from the future (a clock that went back) is not used.
	future := day0.Add(40 * time.Hour)
	if err := dl.Save(ctx, DefaultCluster, []demandlog.Mark{{Partition: "gpu", Step: future, Demand: 3}}); err != nil {
		t.Fatal(err)
	}

	missing, err := demandlog.New(conn, "no_such_database", nil)
	if err != nil {
		t.Fatal(err)
	}
	l := storeLoop(t, Config{}, missing)
	ps := &poolState{name: "gpu", first: day0}
	l.pool["gpu"] = ps
	now := day0.Add(25 * time.Hour)
	l.loadDemand(ctx, now)
	if _, kind := l.forecast(ps, now, daily(now)); !strings.Contains(kind, "model after 24h0m0s") {
		t.Fatalf("with the history unreadable: kind %q, want the peak", kind)
	}
	if n := testutil.ToFloat64(l.m.demandStore.WithLabelValues("load")); n != 1 || l.stored.loaded {
		t.Fatalf("load errors %v, loaded %v; want 1, false", n, l.stored.loaded)
	}
	l.stored.store = dl // the database is back
	now = now.Add(10 * time.Minute)
	l.loadDemand(ctx, now)
	if !l.stored.loaded || testutil.ToFloat64(l.m.demandRejected) != 1 {
		t.Fatalf("loaded %v, rejected %v; want true, 1", l.stored.loaded, testutil.ToFloat64(l.m.demandRejected))
	}
	if _, kind := l.forecast(ps, now, daily(now)); !strings.HasPrefix(kind, "demand model") {
		t.Fatalf("after the late load: kind %q, want the model", kind)
	}
	if !ps.model.steps.Start.Equal(day0) || ps.model.steps.End().After(now.Add(10*time.Minute)) {
		t.Errorf("merged history spans %v .. %v", ps.model.steps.Start, ps.model.steps.End())
	}
	if n := testutil.ToFloat64(l.m.demandStore.WithLabelValues("load")); n != 1 {
		t.Errorf("load errors %v after the good read, want still 1", n)
	}
}

// TestDemandPut covers how saved steps merge into the recorded history.
func TestDemandPut(t *testing.T) {
	step := 10 * time.Minute
	dm := &demandModel{steps: demand.Series{Step: step}}
	if !dm.put(day0.Add(time.Hour+3*time.Minute), 4, false) {
		t.Fatal("first put did not raise")
	}
	if dm.put(day0.Add(time.Hour+7*time.Minute), 3, false) {
		t.Error("a lower value raised the step")
	}
	if dm.put(day0, 9, false) {
		t.Error("a pass in the past was written")
	}
	if !dm.put(day0, 9, true) || !dm.steps.Start.Equal(day0) || len(dm.steps.Values) != 7 || dm.steps.Values[0] != 9 || dm.steps.Values[6] != 4 {
		t.Fatalf("saved step before the history: start %v values %v", dm.steps.Start, dm.steps.Values)
	}
	if dm.put(day0.Add(-maxDemandHistory), 1, true) {
		t.Error("a saved step older than the kept span was written")
	}
	// A clock that jumps ahead by years starts the history afresh instead
	// of filling the years with unknown steps.
	far := day0.AddDate(5, 0, 0)
	if !dm.put(far, 2, false) || !dm.steps.Start.Equal(far) || len(dm.steps.Values) != 1 {
		t.Fatalf("after a jump: start %v, %d steps", dm.steps.Start, len(dm.steps.Values))
	}
}

// TestDemandRebuild: a new actuator on a cluster whose jobs the pipeline
// already holds rebuilds the demand history from the job records and
// forecasts with the model at its first pass; where a saved history exists,
// only the time before it is rebuilt and the saved steps are kept.
func TestDemandRebuild(t *testing.T) {
	cfg, conn := schematest.Database(t)
	dl, err := demandlog.New(conn, cfg.Database, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	step := 10 * time.Minute
	now := day0.Add(30*time.Hour + 4*time.Minute)
	// Jobs of one 8-GPU node each, daily(s) of them running in each step s
	// since day0; one job pending 16 GPUs in the last hour adds two nodes.
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+cfg.Database+".job_runs (cluster, job_id, partition_name, submit_time, start_time, end_time, nodes, node_count, gpus, version, updated_at)")
	if err != nil {
		t.Fatal(err)
	}
	// The same jobs for cluster "lag", whose records stop two hours early:
	// none ends, starts or is submitted later (ingest lags).
	lagUntil := now.Truncate(step).Add(-2 * time.Hour)
	id := 0
	for s := day0; s.Before(now.Truncate(step)); s = s.Add(step) {
		for i := range int(daily(s)) {
			id++
			node := []string{fmt.Sprintf("n%02d", i)}
			if err := b.Append(DefaultCluster, strconv.Itoa(id), "gpu", s, s, s.Add(step), node, uint32(1), uint32(8), uint64(1), s.Add(step)); err != nil {
				t.Fatal(err)
			}
			switch {
			case !s.Add(step).After(lagUntil):
				err = b.Append("lag", strconv.Itoa(id), "gpu", s, s, s.Add(step), node, uint32(1), uint32(8), uint64(1), s.Add(step))
			case s.Before(lagUntil):
				err = b.Append("lag", strconv.Itoa(id), "gpu", s, s, nil, node, uint32(1), uint32(8), uint64(1), s)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	pendingFrom := now.Truncate(step).Add(-time.Hour)
	if err := b.Append(DefaultCluster, "pending", "gpu", pendingFrom, nil, nil, []string{}, nil, uint32(16), uint64(1), pendingFrom); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	snap := adapter.Snapshot{At: now}
	for i := range 20 {
		snap.Nodes = append(snap.Nodes, adapter.Node{Name: fmt.Sprintf("n%02d", i), Partitions: []string{"gpu"}, GPUs: 8, Power: adapter.PowerOn})
	}
	pools, _ := partitionNodes(snap)
	want := func(s time.Time) float64 {
		v := daily(s)
		if !s.Before(pendingFrom) {
			v += 2
		}
		return v
	}

	l := storeLoop(t, Config{}, dl)
	l.stored.jobs = dl
	l.loadDemand(ctx, now)
	l.rebuildDemand(ctx, now, pools)
	ps := &poolState{name: "gpu", first: now}
	l.pool["gpu"] = ps
	if f, kind := l.forecast(ps, now, want(now)); !strings.HasPrefix(kind, "demand model") || f.Upper < f.Max {
		t.Fatalf("first pass on rebuilt history: forecast %+v, kind %q; want the demand model", f, kind)
	}
	if !ps.model.steps.Start.Equal(day0) {
		t.Errorf("rebuilt history starts %v, want %v", ps.model.steps.Start, day0)
	}
	for k, v := range ps.model.steps.Values {
		if s := ps.model.steps.Start.Add(time.Duration(k) * step); v != want(s) {
			t.Fatalf("step %v: %v, want %v", s, v, want(s))
		}
	}
	if n := testutil.ToFloat64(l.m.demandRebuilt); n != float64(len(ps.model.steps.Values)-1) {
		t.Errorf("rebuilt steps counted %v, want %d", n, len(ps.model.steps.Values)-1)
	}
	if len(l.stored.unsaved) != 1 {
		t.Errorf("%d steps queued to save, want only the one this pass recorded (rebuilt steps are not saved)", len(l.stored.unsaved))
	}
	l.rebuildDemand(ctx, now.Add(step), pools) // once per partition
	if n := testutil.ToFloat64(l.m.demandRebuilt); n != float64(len(ps.model.steps.Values)-1) {
		t.Errorf("a second pass rebuilt again: %v steps counted", n)
	}

	// With six hours saved (one more node than the records say), only the
	// time before them is rebuilt.
	savedFrom := now.Truncate(step).Add(-6 * time.Hour)
	var saved []demandlog.Mark
	for s := savedFrom; s.Before(now.Truncate(step)); s = s.Add(step) {
		saved = append(saved, demandlog.Mark{Partition: "gpu", Step: s, Demand: want(s) + 1})
	}
	if err := dl.Save(ctx, DefaultCluster, saved); err != nil {
		t.Fatal(err)
	}
	r := storeLoop(t, Config{}, dl)
	r.stored.jobs = dl
	r.loadDemand(ctx, now)
	r.rebuildDemand(ctx, now, pools)
	rps := &poolState{name: "gpu", first: now}
	r.pool["gpu"] = rps
	if _, kind := r.forecast(rps, now, want(now)); !strings.HasPrefix(kind, "demand model") {
		t.Fatalf("saved and rebuilt: kind %q, want the demand model", kind)
	}
	for k, v := range rps.model.steps.Values[:len(rps.model.steps.Values)-1] {
		s := rps.model.steps.Start.Add(time.Duration(k) * step)
		w := want(s)
		if !s.Before(savedFrom) {
			w++
		}
		if v != w {
			t.Fatalf("step %v: %v, want %v", s, v, w)
		}
	}
	if n, w := testutil.ToFloat64(r.m.demandRebuilt), float64(savedFrom.Sub(day0)/step); n != w {
		t.Errorf("rebuilt %v steps, want %v (those before the saved history)", n, w)
	}

	// Records that end two hours before now: only the steps they cover are
	// rebuilt, so the first pass cannot forecast with the model (the steps
	// between are unknown) and keeps the watched peak.
	g := storeLoop(t, Config{Cluster: "lag"}, dl)
	g.stored.jobs = dl
	g.loadDemand(ctx, now)
	g.rebuildDemand(ctx, now, pools)
	gps := &poolState{name: "gpu", first: now}
	g.pool["gpu"] = gps
	if _, kind := g.forecast(gps, now, want(now)); strings.HasPrefix(kind, "demand model") {
		t.Errorf("records ending 2 h early: kind %q, want no demand model at the first pass", kind)
	}
	if n, w := testutil.ToFloat64(g.m.demandRebuilt), float64(lagUntil.Sub(day0)/step); n != w {
		t.Errorf("rebuilt %v steps from lagging records, want %v (those they cover)", n, w)
	}
	for k, v := range gps.model.steps.Values {
		s := gps.model.steps.Start.Add(time.Duration(k) * step)
		if s.Before(lagUntil) && v != daily(s) {
			t.Fatalf("lagging records, step %v: %v, want %v", s, v, daily(s))
		}
		if !s.Before(lagUntil) && s.Before(now.Truncate(step)) && !math.IsNaN(v) {
			t.Fatalf("lagging records, step %v after them: %v, want unknown", s, v)
		}
	}

	// Job records that cannot be read: tried for three passes, counted,
	// then left.
	missing, err := demandlog.New(conn, "no_such_database", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := storeLoop(t, Config{}, dl)
	m.stored.jobs = missing
	m.loadDemand(ctx, now)
	for range 5 {
		m.rebuildDemand(ctx, now, pools)
	}
	if n := testutil.ToFloat64(m.m.demandStore.WithLabelValues("rebuild")); n != rebuildTries {
		t.Errorf("rebuild errors %v, want %d", n, rebuildTries)
	}
}

// The ClickHouse demand log is what rebuilds the history in production.
var _ JobRecords = (*demandlog.Log)(nil)
