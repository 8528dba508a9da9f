package demandlog

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestRebuild(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	pool := Pool{Partition: "gpu", Nodes: 4, GPUsPerNode: 8}
	tests := []struct {
		name         string
		jobs         []PastJob
		pool         Pool
		since, until time.Time
		first        time.Time // first step expected
		want         []float64
	}{
		{name: "no records", pool: pool, since: at(0), until: at(60)},
		{
			name:  "pending then running on two nodes",
			jobs:  []PastJob{{Submit: at(0), Start: at(25), End: at(60), Nodes: []string{"n1", "n2"}, GPUs: 16}},
			pool:  pool,
			since: at(0), until: at(70), first: at(0),
			want: []float64{2, 2, 2, 2, 2, 2, 0},
		},
		{
			name: "a node shared by two jobs counts once",
			jobs: []PastJob{
				{Submit: at(0), Start: at(0), End: at(30), Nodes: []string{"n1"}, GPUs: 2},
				{Submit: at(10), Start: at(10), End: at(40), Nodes: []string{"n1"}, GPUs: 2},
			},
			pool:  pool,
			since: at(0), until: at(50), first: at(0),
			want: []float64{1, 1, 1, 1, 0},
		},
		{
			name: "pending GPUs fill nodes, rounded up, capped at the pool",
			jobs: []PastJob{
				{Submit: at(0), Start: at(0), End: at(60), Nodes: []string{"n1", "n2", "n3"}, GPUs: 24},
				{Submit: at(5), GPUs: 4},  // never started
				{Submit: at(12), GPUs: 8}, // never started
			},
			pool:  pool,
			since: at(0), until: at(30), first: at(0),
			want: []float64{4, 4, 4}, // 3 + ⌈4/8⌉ = 4; 3 + ⌈12/8⌉ = 5, capped
		},
		{
			name:  "steps before the first record are left out",
			jobs:  []PastJob{{Submit: at(12), Start: at(12), End: at(14), NodeCount: 3, GPUs: 24}},
			pool:  pool,
			since: at(10), until: at(30), first: at(20),
			// The first record is submitted at 10:12, so the step at 10:10
			// is left out: the records may not cover its start.
			want: []float64{0},
		},
		{
			name: "a short run inside a step raises it",
			jobs: []PastJob{
				{Submit: at(0), Start: at(1), End: at(2), Nodes: []string{"n1"}},
				{Submit: at(12), Start: at(12), End: at(14), NodeCount: 3, GPUs: 24},
			},
			pool:  pool,
			since: at(0), until: at(30), first: at(0),
			want: []float64{1, 3, 0},
		},
		{
			name: "a pending multi-node job needs whole nodes, as the loop counts it",
			jobs: []PastJob{
				{Submit: at(0), Start: at(20), End: at(30), NodeCount: 3, GPUs: 3}, // 3 nodes of 1 GPU
				{Submit: at(0), End: at(20), GPUs: 4},                              // cancelled while pending
			},
			pool:  Pool{Partition: "gpu", Nodes: 8, GPUsPerNode: 8},
			since: at(0), until: at(40), first: at(0),
			want: []float64{4, 4, 3, 0}, // 3 whole + ⌈4/8⌉; then its 3 nodes running
		},
		{
			name:  "cancelled while pending: pending until its end",
			jobs:  []PastJob{{Submit: at(0), End: at(15), GPUs: 9}},
			pool:  pool,
			since: at(0), until: at(30), first: at(0),
			want: []float64{2, 2, 0},
		},
		{
			name:  "no end recorded: running until the end of the read",
			jobs:  []PastJob{{Submit: at(0), Start: at(0), Nodes: []string{"n1", "n2"}}},
			pool:  pool,
			since: at(0), until: at(30), first: at(0),
			want: []float64{2, 2, 2},
		},
		{
			name:  "no GPUs asked counts one pending GPU, as the loop does",
			jobs:  []PastJob{{Submit: at(0), Start: at(10), End: at(20), NodeCount: 0}},
			pool:  pool,
			since: at(0), until: at(30), first: at(0),
			want: []float64{1, 1, 0},
		},
		{
			name:  "a step that does not end by until is left out",
			jobs:  []PastJob{{Submit: at(0), Start: at(0), End: at(20), Nodes: []string{"n1"}}},
			pool:  pool,
			since: at(0), until: at(25), first: at(0),
			want: []float64{1, 1},
		},
		{
			name:  "an end before the start is not a run",
			jobs:  []PastJob{{Submit: at(0), Start: at(20), End: at(10), Nodes: []string{"n1"}, GPUs: 8}},
			pool:  pool,
			since: at(0), until: at(30), first: at(0),
			want: []float64{1, 1, 0}, // pending until its start, no run
		},
		{
			name:  "no usable node: nothing",
			jobs:  []PastJob{{Submit: at(0), Start: at(0), End: at(20), Nodes: []string{"n1"}}},
			pool:  Pool{Partition: "gpu", GPUsPerNode: 8},
			since: at(0), until: at(30),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Rebuild(tc.jobs, tc.pool, tc.since, tc.until, 10*time.Minute)
			var vals []float64
			for i, m := range got {
				if m.Partition != tc.pool.Partition {
					t.Errorf("mark %d: partition %q", i, m.Partition)
				}
				if want := tc.first.Add(time.Duration(i) * 10 * time.Minute); !m.Step.Equal(want) {
					t.Errorf("mark %d: step %s, want %s", i, m.Step.Format("15:04"), want.Format("15:04"))
				}
				if err := m.Check(tc.until); err != nil {
					t.Errorf("mark %d: %v", i, err)
				}
				vals = append(vals, m.Demand)
			}
			if !slices.Equal(vals, tc.want) {
				t.Errorf("demand %v, want %v", vals, tc.want)
			}
		})
	}
}

// TestPastJobs reads job records back from the job_runs table: the latest
// row of each run wins (FINAL), every run of a requeued job counts, unknown
// times, nodes and GPUs come back as zero, and only the cluster's
// partition's jobs pending or running within the period are read. Rebuild on
// them gives the partition's demand.
func TestPastJobs(t *testing.T) {
	cfg, conn := schematest.Database(t)
	l, err := New(conn, cfg.Database, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	type row struct {
		cluster, id, part string
		submit            time.Time
		start, end        *time.Time
		nodes             []string
		count, gpus       *uint32
		version           uint64
	}
	tp := func(v time.Time) *time.Time { return &v }
	u32 := func(v uint32) *uint32 { return &v }
	rows := []row{
		// Pending at 12:00, then running on two nodes 12:05–12:25 (the
		// START row is superseded by the END row).
		{"c", "1", "gpu", at(0), nil, nil, nil, nil, u32(16), 1},
		{"c", "1", "gpu", at(0), tp(at(5)), nil, []string{"n1", "n2"}, u32(2), u32(16), 2},
		{"c", "1", "gpu", at(0), tp(at(5)), tp(at(25)), []string{"n1", "n2"}, u32(2), u32(16), 3},
		// Still running, its nodes unnamed.
		{"c", "2", "gpu", at(12), tp(at(12)), nil, nil, u32(1), nil, 1},
		// Ended before the period: not read.
		{"c", "3", "gpu", at(-90), tp(at(-80)), tp(at(-70)), []string{"n3"}, u32(1), u32(8), 1},
		// Another partition and another cluster: not read.
		{"c", "4", "cpu", at(0), tp(at(0)), nil, []string{"c1"}, u32(1), nil, 1},
		{"d", "1", "gpu", at(0), tp(at(0)), nil, []string{"n9"}, u32(1), u32(8), 1},
		// Submitted after the period: not read.
		{"c", "5", "gpu", at(40), nil, nil, nil, nil, u32(8), 1},
		// Pending on a list of partitions: read for each one it lists.
		{"c", "6", "cpu,gpu", at(15), nil, nil, nil, u32(1), u32(8), 1},
		{"c", "7", "cpu,gpux", at(15), nil, nil, nil, u32(1), u32(8), 1},
		// Requeued: its first run held n4 from 11:45 until it was requeued
		// at 12:10, its second is pending from 12:12. jobs keeps only the
		// second; the first run's node counts all the same.
		{"c", "8", "gpu", at(-20), tp(at(-15)), tp(at(10)), []string{"n4"}, u32(1), u32(8), 3},
		{"c", "8", "gpu", at(12), nil, nil, nil, u32(1), u32(8), 4},
	}
	var ins [][]any
	for _, r := range rows {
		updated := r.submit // the row's event: its latest time
		for _, t := range []*time.Time{r.start, r.end} {
			if t != nil && t.After(updated) {
				updated = *t
			}
		}
		ins = append(ins, []any{r.cluster, r.id, r.part, r.submit, r.start, r.end, r.nodes, r.count, r.gpus, r.version, updated})
	}
	schematest.InsertJobRows(t, conn, cfg.Database, "cluster, job_id, partition_name, submit_time, start_time, end_time, nodes, node_count, gpus, version, updated_at", ins...)
	recs, err := l.PastJobs(ctx, "c", "gpu", at(-30), at(30))
	if err != nil {
		t.Fatal(err)
	}
	// The newest event of the cluster, in any partition and period.
	if !recs.Newest.Equal(at(40)) {
		t.Errorf("newest job event of c: %v, want %v", recs.Newest, at(40))
	}
	for cluster, want := range map[string]time.Time{"d": at(0), "none": {}} {
		if r, err := l.PastJobs(ctx, cluster, "gpu", at(-30), at(30)); err != nil || !r.Newest.Equal(want) {
			t.Errorf("newest job event of %s: %v, %v; want %v", cluster, r.Newest, err, want)
		}
	}
	got := recs.Jobs
	if len(got) != 5 {
		t.Fatalf("read %d job runs, want 5: %+v", len(got), got)
	}
	slices.SortFunc(got, func(a, b PastJob) int { return a.Submit.Compare(b.Submit) })
	want := []PastJob{
		{Submit: at(-20), Start: at(-15), End: at(10), Nodes: []string{"n4"}, NodeCount: 1, GPUs: 8},
		{Submit: at(0), Start: at(5), End: at(25), Nodes: []string{"n1", "n2"}, NodeCount: 2, GPUs: 16},
		{Submit: at(12), Start: at(12), NodeCount: 1},
		{Submit: at(12), NodeCount: 1, GPUs: 8},
		{Submit: at(15), NodeCount: 1, GPUs: 8},
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.Submit.Equal(w.Submit) || !g.Start.Equal(w.Start) || !g.End.Equal(w.End) || !slices.Equal(g.Nodes, w.Nodes) ||
			g.NodeCount != w.NodeCount || g.GPUs != w.GPUs {
			t.Errorf("job %d: %+v, want %+v", i, g, w)
		}
	}
	marks := Rebuild(got, Pool{Partition: "gpu", Nodes: 8, GPUsPerNode: 8}, at(-30), at(30), 10*time.Minute)
	var vals []float64
	for _, m := range marks {
		vals = append(vals, m.Demand)
	}
	// From 11:40 (the first submit) the requeued job's first run: pending,
	// then on n4 until 12:10; 12:00 two nodes' worth pending, then two
	// nodes running; the unnamed job adds one from 12:12 and the second run
	// one pending, the pending one of "cpu,gpu" one from 12:15; 12:25 the
	// first ends.
	if w := []float64{1, 1, 3, 5, 5}; !slices.Equal(vals, w) {
		t.Errorf("rebuilt demand %v, want %v", vals, w)
	}
	if _, err := l.PastJobs(ctx, "c", "gpu", at(30), at(30)); err == nil {
		t.Error("PastJobs of an empty period: no error")
	}
}
