package analytics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestInventoryCapacity: the capacity taken from gpu_inventory counts what
// Slurm schedules, one gres/gpu each: a GPU's MIG instances where it has
// any (the collector lists a MIG-enabled GPU as its own row, with an empty
// mig_uuid, and one row per instance), else the whole GPU. Seven jobs on
// the seven instances of one A100 use it fully, not seven times over.
func TestInventoryCapacity(t *testing.T) {
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	w := analytics.Window{Since: day, Until: day.Add(24 * time.Hour)}
	// gpu is one GPU of host h: migs instances (0: MIG off), seen at seen
	type gpu struct {
		host, uuid string
		migs       int
		seen       time.Time
	}
	for _, tc := range []struct {
		name string
		gpus []gpu
		jobs int // 1-GPU jobs running all day
		want uint32
	}{
		{"one A100 as seven 1g.10gb", []gpu{{"h1", "GPU-a", 7, day.Add(time.Hour)}}, 7, 7},
		{"whole GPUs", []gpu{{"h1", "GPU-a", 0, day.Add(time.Hour)}, {"h1", "GPU-b", 0, day.Add(time.Hour)}}, 2, 2},
		{"whole and MIG GPUs on two hosts", []gpu{{"h1", "GPU-a", 0, day.Add(time.Hour)}, {"h1", "GPU-b", 3, day.Add(time.Hour)},
			{"h2", "GPU-c", 2, day.Add(time.Hour)}}, 6, 6},
		{"a GPU last seen before the window", []gpu{{"h1", "GPU-a", 7, day.Add(time.Hour)}, {"h2", "GPU-b", 0, day.Add(-time.Hour)}}, 7, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, conn := schematest.Database(t)
			ctx := context.Background()
			db := cfg.Database
			b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".gpu_inventory (cluster, host, gpu_uuid, mig_uuid, gpu_index, model, gi_id, ci_id, mig_profile, last_seen)")
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range tc.gpus {
				if err := b.Append("c", g.host, g.uuid, "", uint16(i), "A100", int32(-1), int32(-1), "", g.seen); err != nil {
					t.Fatal(err)
				}
				for m := range g.migs {
					if err := b.Append("c", g.host, g.uuid, fmt.Sprintf("MIG-%s-%d", g.uuid, m), uint16(i), "A100", int32(m), int32(0), "1g.10gb", g.seen); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := b.Send(); err != nil {
				t.Fatal(err)
			}
			var rows [][]any
			for i := range tc.jobs {
				rows = append(rows, []any{"c", fmt.Sprint(i), "slurm", "alice", "gpu", "RUNNING", day, &day, uint32(1), "START", day, day, uint64(1)})
			}
			schematest.InsertJobRows(t, conn, db, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, gpus, last_event, updated_at, inserted_at, version", rows...)

			if _, err := newRunner(t, conn, db, day.Add(48*time.Hour)).RunWindow(ctx, w, "capacity", "utilization"); err != nil {
				t.Fatal(err)
			}
			var gpus uint32
			var source string
			if err := conn.QueryRow(ctx, "SELECT gpus, source FROM "+db+".analytics_capacity WHERE window_id = ? AND vc = ''", w.ID()).Scan(&gpus, &source); err != nil {
				t.Fatal(err)
			}
			if gpus != tc.want || source != "inventory" {
				t.Errorf("capacity = %d GPUs (%s); want %d (inventory)", gpus, source, tc.want)
			}
			var util float64
			if err := conn.QueryRow(ctx, "SELECT util_mean FROM "+db+".analytics_utilization_dist WHERE window_id = ? AND scope = 'cluster'", w.ID()).Scan(&util); err != nil {
				t.Fatal(err)
			}
			if want := float64(tc.jobs) / float64(tc.want); util != want {
				t.Errorf("utilization = %v; want %v", util, want)
			}
		})
	}
}
