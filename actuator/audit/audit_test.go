package audit

import (
	"context"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestMain(m *testing.M) { os.Exit(schematest.Main(m)) }

func ptr(v int64) *int64 { return &v }

// TestPlanSettleList writes three actions — one applied, one skipped by the
// dry run, one only planned (as if the process died before acting) — and one
// of another cluster, and reads them back through the filters.
func TestPlanSettleList(t *testing.T) {
	cfg, conn := schematest.Database(t)
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l, err := New(conn, cfg.Database, func() time.Time { return t0.Add(time.Minute) })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prio := Record{Cluster: "c", ID: l.NewID(t0), Adapter: "slurm", Kind: "set_priority", Target: "42", Partition: "batch",
		Value: ptr(3_000_000_000), Previous: ptr(4294901758), Reason: "qssf rank 1 of 2", Basis: `{"predicted_s":60}`, ModelVersion: 7, DecidedAt: t0}
	down := Record{Cluster: "c", ID: l.NewID(t0.Add(time.Second)), Adapter: "slurm", Kind: "power_down", Target: "gpu4",
		Reason: "idle", Basis: `{"target":1}`, DryRun: true, DecidedAt: t0.Add(time.Second)}
	lost := Record{Cluster: "c", ID: l.NewID(t0.Add(2 * time.Second)), Adapter: "slurm", Kind: "power_up", Target: "gpu3", DecidedAt: t0.Add(2 * time.Second)}
	other := Record{Cluster: "d", ID: l.NewID(t0), Adapter: "sim", Kind: "power_up", Target: "n1", DecidedAt: t0}
	if err := l.Plan(ctx, []Record{prio, down, lost, other}); err != nil {
		t.Fatal(err)
	}
	// Before the outcome, the plan is there.
	got, err := l.List(ctx, Query{Cluster: "c", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2].Outcome != Planned || got[2].ID != prio.ID {
		t.Fatalf("List before settle = %+v; want 3 planned, newest first", got)
	}
	prio.Outcome = Applied
	down.Outcome, down.Error = Skipped, "dry run"
	if err := l.Settle(ctx, []Record{prio, down}); err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, []Record{lost}); err == nil {
		t.Error("Settle without an outcome succeeded")
	}
	got, err = l.List(ctx, Query{Cluster: "c", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	wantPrio := prio
	wantPrio.RecordedAt = t0.Add(time.Minute)
	if len(got) != 3 || !reflect.DeepEqual(got[2], wantPrio) {
		t.Fatalf("List()[2] = %+v\nwant %+v", got, wantPrio)
	}
	for i, want := range []struct{ id, outcome, err string }{{lost.ID, Planned, ""}, {down.ID, Skipped, "dry run"}, {prio.ID, Applied, ""}} {
		if got[i].ID != want.id || got[i].Outcome != want.outcome || got[i].Error != want.err {
			t.Errorf("List()[%d] = %s %s %q; want %s %s %q", i, got[i].ID, got[i].Outcome, got[i].Error, want.id, want.outcome, want.err)
		}
	}
	if !got[1].DryRun || got[1].Value != nil {
		t.Errorf("power-down row: dry_run %v value %v; want true, nil", got[1].DryRun, got[1].Value)
	}
	for _, tc := range []struct {
		q    Query
		want []string
	}{
		{Query{Cluster: "c", Limit: 1}, []string{lost.ID}},
		{Query{Cluster: "c", Limit: 10, Since: t0.Add(time.Second)}, []string{lost.ID, down.ID}},
		{Query{Cluster: "c", Limit: 10, Kind: "set_priority"}, []string{prio.ID}},
		{Query{Cluster: "c", Limit: 10, Target: "gpu4"}, []string{down.ID}},
		{Query{Cluster: "d", Limit: 10}, []string{other.ID}},
		{Query{Cluster: "none", Limit: 10}, nil},
	} {
		got, err := l.List(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		if !reflect.DeepEqual(ids, tc.want) {
			t.Errorf("List(%+v) = %v; want %v", tc.q, ids, tc.want)
		}
	}
	if _, err := l.List(ctx, Query{Cluster: "c"}); err == nil {
		t.Error("List with limit 0 succeeded")
	}
}

func TestNewID(t *testing.T) {
	l, err := New(nil, "db", nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_700_000_000, 0)
	a, b := l.NewID(at), l.NewID(at)
	if !(a < b) {
		t.Errorf("NewID twice at one time: %q, %q; want increasing", a, b)
	}
	if c := l.NewID(at.Add(-time.Hour)); !(b < c) {
		t.Errorf("NewID earlier: %q after %q; want increasing", c, b)
	}
	if _, err := New(nil, "bad-name", nil); err == nil {
		t.Error("New accepted a database name that is not an identifier")
	}
}

// TestListWindows reads a history of a year through List's widening
// windows: whatever window answers, the result is the newest Limit actions
// that match, as one read of the whole table would give.
func TestListWindows(t *testing.T) {
	cfg, conn := schematest.Database(t)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l, err := New(conn, cfg.Database, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var all []Record
	add := func(at time.Time, target string) {
		all = append(all, Record{Cluster: "c", Adapter: "slurm", Kind: "power_up", Target: target, DecidedAt: at})
	}
	add(now.Add(time.Hour), "ahead") // a clock ahead of this one
	for i := range 300 {             // one every 6 h for 75 days
		add(now.Add(-time.Duration(i)*6*time.Hour), "recent")
	}
	for i := range 3 {
		add(now.AddDate(-1, 0, -i), "old")
	}
	// Oldest first for the ids, which increase with each call; then newest
	// first, as List answers.
	slices.SortFunc(all, func(a, b Record) int { return a.DecidedAt.Compare(b.DecidedAt) })
	for i := range all {
		all[i].ID = l.NewID(all[i].DecidedAt)
	}
	slices.Reverse(all)
	if err := l.Plan(ctx, all); err != nil {
		t.Fatal(err)
	}
	want := func(q Query) []string {
		var ids []string
		for _, r := range all {
			if (q.Target == "" || r.Target == q.Target) && !r.DecidedAt.Before(q.Since) && len(ids) < q.Limit {
				ids = append(ids, r.ID)
			}
		}
		return ids
	}
	for _, q := range []Query{
		{Cluster: "c", Limit: 1},                                   // the first window
		{Cluster: "c", Limit: 10},                                  // 64 h
		{Cluster: "c", Limit: 250},                                 // 171 d
		{Cluster: "c", Limit: 302},                                 // everything but the oldest two: the whole read
		{Cluster: "c", Limit: MaxLimit},                            // all
		{Cluster: "c", Limit: 10, Target: "old"},                   // a filter that only old actions match
		{Cluster: "c", Limit: 1000, Since: now.AddDate(0, 0, -10)}, // Since inside the fourth window
		{Cluster: "c", Limit: 50, Since: now.AddDate(0, 0, -10)},   // which would hold 50
		{Cluster: "c", Limit: 1000, Since: now.AddDate(0, 0, -100)},
		{Cluster: "c", Limit: 2, Since: now.AddDate(-1, 0, -1), Target: "old"},
	} {
		got, err := l.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		if w := want(q); !slices.Equal(ids, w) {
			t.Errorf("List(limit %d, since %v, target %q): %d actions\n%v\nwant %d\n%v", q.Limit, q.Since, q.Target, len(ids), ids, len(w), w)
		}
	}
}
