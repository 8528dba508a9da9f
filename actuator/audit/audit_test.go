package audit

import (
	"context"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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
	settled := []Record{prio, down}
	if err := l.Settle(ctx, settled); err != nil {
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
	// Settle stamped the records it wrote as List reads them back (what
	// POST /v1/passes answers, and GET /v1/actions then).
	if !reflect.DeepEqual(settled[0], wantPrio) {
		t.Errorf("Settle's record = %+v\nwant %+v", settled[0], wantPrio)
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

// yearOfActions plans a year of actions: one an hour ahead of now (a clock
// ahead of the Log's), one every 6 h for 75 days, five in one second 30 h
// ago, and three a year ago. It returns them newest first, in List's order.
func yearOfActions(t *testing.T, now time.Time) (*Log, []Record) {
	t.Helper()
	cfg, conn := schematest.Database(t)
	l, err := New(conn, cfg.Database, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	var all []Record
	add := func(at time.Time, target string) {
		all = append(all, Record{Cluster: "c", Adapter: "slurm", Kind: "power_up", Target: target, DecidedAt: at})
	}
	add(now.Add(time.Hour), "ahead")
	for i := range 300 {
		add(now.Add(-time.Duration(i)*6*time.Hour), "recent")
	}
	for range 5 {
		add(now.Add(-30*time.Hour), "burst")
	}
	for i := range 3 {
		add(now.AddDate(-1, 0, -i), "old")
	}
	// Oldest first for the ids, which increase with each call; then newest
	// first, as List answers.
	slices.SortStableFunc(all, func(a, b Record) int { return a.DecidedAt.Compare(b.DecidedAt) })
	for i := range all {
		all[i].ID = l.NewID(all[i].DecidedAt)
	}
	slices.Reverse(all)
	if err := l.Plan(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	return l, all
}

// matching returns the ids of the actions of all (newest first) that q
// asks for: what one read of the whole table gives.
func matching(all []Record, q Query) []string {
	ids := []string{}
	for _, r := range all {
		if len(ids) == q.Limit {
			break
		}
		if q.Target != "" && r.Target != q.Target || r.DecidedAt.Before(q.Since) {
			continue
		}
		if b := q.Before; !b.IsZero() {
			if c := r.DecidedAt.Compare(b.DecidedAt); c > 0 || c == 0 && r.ID >= b.ID {
				continue
			}
		}
		ids = append(ids, r.ID)
	}
	return ids
}

func listIDs(t *testing.T, l *Log, q Query) []string {
	t.Helper()
	got, err := l.List(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestListWindows reads a history of a year through List's widening
// windows: whatever window answers, the result is the newest Limit actions
// that match, as one read of the whole table would give.
func TestListWindows(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l, all := yearOfActions(t, now)
	for _, q := range []Query{
		{Cluster: "c", Limit: 1},                                   // the first window
		{Cluster: "c", Limit: 10},                                  // 64 h
		{Cluster: "c", Limit: 250},                                 // 171 d
		{Cluster: "c", Limit: 307},                                 // everything but the oldest two: the whole read
		{Cluster: "c", Limit: MaxLimit},                            // all
		{Cluster: "c", Limit: 10, Target: "old"},                   // a filter that only old actions match
		{Cluster: "c", Limit: 1000, Since: now.AddDate(0, 0, -10)}, // Since inside the fourth window
		{Cluster: "c", Limit: 50, Since: now.AddDate(0, 0, -10)},   // which would hold 50
		{Cluster: "c", Limit: 1000, Since: now.AddDate(0, 0, -100)},
		{Cluster: "c", Limit: 2, Since: now.AddDate(-1, 0, -1), Target: "old"},
	} {
		if ids, w := listIDs(t, l, q), matching(all, q); !slices.Equal(ids, w) {
			t.Errorf("List(limit %d, since %v, target %q): %d actions\n%v\nwant %d\n%v", q.Limit, q.Since, q.Target, len(ids), ids, len(w), w)
		}
	}
}

// TestListPages pages through the year with Next's cursors: each page is
// what one read of the whole table gives after the cursor, and the pages
// together are every matching action once, in order — across the five
// actions that share a second, which only the id orders.
func TestListPages(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l, all := yearOfActions(t, now)
	for _, q := range []Query{
		{Cluster: "c", Limit: 2},
		{Cluster: "c", Limit: 7},
		{Cluster: "c", Limit: 100},
		{Cluster: "c", Limit: 2, Target: "burst"},
		{Cluster: "c", Limit: 1, Target: "old"},
		{Cluster: "c", Limit: 40, Since: now.AddDate(0, 0, -20)},
	} {
		var got []string
		for page := 0; ; page++ {
			ids := listIDs(t, l, q)
			if w := matching(all, q); !slices.Equal(ids, w) {
				t.Fatalf("limit %d target %q, page %d (before %q): %v; want %v", q.Limit, q.Target, page, q.Before, ids, w)
			}
			got = append(got, ids...)
			recs := make([]Record, len(ids))
			for i, id := range ids {
				recs[i] = Record{ID: id, DecidedAt: all[slices.IndexFunc(all, func(r Record) bool { return r.ID == id })].DecidedAt}
			}
			next := Next(q, recs)
			if next.IsZero() {
				break
			}
			if page > len(all) {
				t.Fatalf("limit %d target %q: more pages than actions", q.Limit, q.Target)
			}
			q.Before = next
		}
		q.Before, q.Limit = Cursor{}, MaxLimit
		if w := matching(all, q); !slices.Equal(got, w) {
			t.Errorf("target %q since %v: pages hold %d actions\n%v\nwant %d\n%v", q.Target, q.Since, len(got), got, len(w), w)
		}
	}
}

func TestCursorText(t *testing.T) {
	c := Cursor{DecidedAt: time.Unix(1_777_000_000, 0).UTC(), ID: "0001777000000000000001-a1b2c3"}
	if s := c.String(); s != "1777000000_0001777000000000000001-a1b2c3" {
		t.Errorf("String: %q", s)
	}
	if got, err := ParseCursor(c.String()); err != nil || got != c {
		t.Errorf("ParseCursor(String()) = %v, %v; want %v", got, err, c)
	}
	if (Cursor{}).String() != "" || !(Cursor{}).IsZero() {
		t.Error("the zero cursor is not empty")
	}
	for _, bad := range []string{"", "_", "1777000000", "1777000000_", "x_id", "-1_id", "4294967296_id", "1.5_id"} {
		if _, err := ParseCursor(bad); err == nil {
			t.Errorf("ParseCursor(%q) accepted", bad)
		}
	}
}

// FuzzParseCursor: whatever ParseCursor accepts reads back the same from
// its text form, and it never panics.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"1777000000_0001777000000000000001-a1b2c3", "0_x", "_", "12_a_b", "99999999999_x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			return
		}
		again, err := ParseCursor(c.String())
		if err != nil || again != c {
			t.Fatalf("ParseCursor(%q) = %v; its text %q reads back as %v, %v", s, c, c.String(), again, err)
		}
	})
}

// TestExpiry drops, at its first pass, the months whose every action is
// older than the retention (April 2025 of yearOfActions), and keeps the
// month that still holds one action within it. It counts on the clock it is
// given, the scheduler's, not the Log's (here four years ahead, as a wall
// clock is of a replayed trace).
func TestExpiry(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l, all := yearOfActions(t, now)
	reg := prometheus.NewRegistry()
	keep := 365 * 24 * time.Hour
	l.now = func() time.Time { return now.AddDate(4, 0, 0) }
	e, err := NewExpiry(l, keep, func() time.Time { return now }, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); testutil.ToFloat64(e.dropped) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if n := testutil.ToFloat64(e.dropped); n != 1 {
		t.Errorf("%v partitions dropped; want 1 (202504)", n)
	}
	if n := testutil.ToFloat64(e.failed); n != 0 {
		t.Errorf("%v failures", n)
	}
	var want []Record
	for _, r := range all {
		if r.DecidedAt.After(now.Add(-keep)) || r.DecidedAt.Month() == time.May {
			want = append(want, r)
		}
	}
	if len(want) != len(all)-2 {
		t.Fatalf("the test's history changed: %d of %d actions kept", len(want), len(all))
	}
	q := Query{Cluster: "c", Limit: MaxLimit}
	if ids, w := listIDs(t, l, q), matching(want, q); !slices.Equal(ids, w) {
		t.Errorf("after expiry, %d actions; want %d", len(ids), len(w))
	}
	for _, k := range []time.Duration{keep, 0} {
		if dropped, err := l.Expire(context.Background(), k, now); err != nil || len(dropped) != 0 {
			t.Errorf("Expire(%v) again = %v, %v; want nothing dropped", k, dropped, err)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("metrics lint: %v %v", problems, err)
	}
	if _, err := NewExpiry(l, -time.Hour, time.Now, nil, nil); err == nil {
		t.Error("NewExpiry accepted a negative retention")
	}
}
