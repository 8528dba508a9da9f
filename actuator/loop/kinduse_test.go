package loop

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/actuator/demandlog"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestLoopRebuildsKindUse: an actuator restarted on a partition of three
// A100 and three H100 nodes, all powered and idle, just after two jobs ran
// on gpu-h0 and gpu-h1 for an hour (their records in job_runs), keeps its
// two spare nodes on H100s, the kind in use lately, as a loop that watched
// the jobs run does (TestLoopSparesFollowKindUse). Without the records (no
// demand store) it spreads them by node counts, one of each kind. A
// partition of one kind reads no records; a read that fails is counted.
func TestLoopRebuildsKindUse(t *testing.T) {
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	lc := testConfig()
	lc.Forecast, lc.CES.Buffer, lc.KindUseHalfLife = ForecastPeak, 2, 30*time.Minute
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+cfg.Database+".job_runs (cluster, job_id, partition_name, submit_time, start_time, end_time, nodes, node_count, gpus, version, updated_at)")
	if err != nil {
		t.Fatal(err)
	}
	for i, node := range []string{"gpu-h0", "gpu-h1"} {
		if err := b.Append(lc.Cluster, string(rune('a'+i)), "gpu", t0, t0, t0.Add(time.Hour), []string{node}, uint32(1), uint32(8), uint64(1), t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	restart := t0.Add(time.Hour)

	for _, tc := range []struct {
		name    string
		records bool
		want    []string
	}{
		{"rebuilt from the job records", true, []string{"gpu-h1", "gpu-h2"}},
		{"no records", false, []string{"gpu-a2", "gpu-h2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched := idleKinds("gpu-a0", "gpu-a1", "gpu-a2", "gpu-h0", "gpu-h1", "gpu-h2")
			g, err := adapter.NewGuard(adapter.GuardConfig{Apply: true, Partitions: []string{"gpu"}, Nodes: []string{"gpu-*"}}, sched, func() time.Time { return restart })
			if err != nil {
				t.Fatal(err)
			}
			al, err := audit.New(conn, cfg.Database, nil)
			if err != nil {
				t.Fatal(err)
			}
			var store DemandStore
			if tc.records {
				if store, err = demandlog.New(conn, cfg.Database, nil); err != nil {
					t.Fatal(err)
				}
			}
			l, err := New(lc, g, al, nil, store, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			for m := range 15 {
				sched.at(restart.Add(time.Duration(m) * time.Minute))
				if _, err := l.Once(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got := sched.poweredNodes(); !slices.Equal(got, tc.want) {
				t.Errorf("powered after 15 idle minutes: %v; want %v; plans %+v", got, tc.want, l.View().Plans)
			}
			use := l.View().Plans[0].KindUse
			// Two H100 nodes busy for the hour before the restart, none in
			// the hour before that, none since: weighted, about 0.8.
			if tc.records && !(use["h100×8"] > 0.5 && use["a100×8"] == 0) {
				t.Errorf("kind use %v; want h100×8 above 0.5, a100×8 0", use)
			}
		})
	}

	t.Run("one kind, and a failed read", func(t *testing.T) {
		l := storeLoop(t, lc, nil)
		l.stored.jobs = failingRecords{}
		pools := map[string][]adapter.Node{
			"one": idleKinds("gpu-a0", "gpu-a1").snap.Nodes,
			"two": idleKinds("gpu-a0", "gpu-h0").snap.Nodes,
		}
		l.rebuildUse(ctx, restart, pools)
		l.rebuildUse(ctx, restart.Add(time.Minute), pools) // once per partition
		if n := testutil.ToFloat64(l.m.demandStore.WithLabelValues("rebuild_kind_use")); n != 1 {
			t.Errorf("rebuild_kind_use errors %v; want 1 (partition two, once; one kind reads nothing)", n)
		}
		if len(l.pool) != 0 {
			t.Errorf("pool states %v; want none made without records", l.pool)
		}
	})
}

type failingRecords struct{}

func (failingRecords) PastJobs(context.Context, string, string, time.Time, time.Time) (demandlog.Records, error) {
	return demandlog.Records{}, context.DeadlineExceeded
}
