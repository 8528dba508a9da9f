package analytics_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestCapacityHistory: the inventory capacity of a window is what reported
// samples in it — GPUs installed, and MIG layouts created, after the window
// do not count when the window is computed again later (report --rerun,
// analytics run over history) — by the same MIG rule as gpu_inventory (a
// GPU's instances where it has any, else the GPU). A cluster without
// samples in the window (a trace, rollups dropped) falls back to
// gpu_inventory; a configured capacity still wins. The GPUs that reported
// in the window's last hour and those that reported only earlier in it
// count alike.
func TestCapacityHistory(t *testing.T) {
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	w := analytics.Window{Since: day, Until: day.Add(24 * time.Hour)}
	// in is early in the window, end in its last hour (the capacity step
	// reads that hour for every GPU, and the rest of the window only for
	// the other GPUs of gpu_inventory)
	in, end, later := day.Add(time.Hour), day.Add(23*time.Hour+30*time.Minute), day.AddDate(0, 0, 30)
	// dev is a GPU (mig "") or a MIG instance of GPU gpu on host, in cluster
	// c, in gpu_inventory with last_seen and reporting samples at each of at
	type dev struct {
		cluster, host, gpu, mig string
		lastSeen                time.Time
		at                      []time.Time
	}
	whole := func(cluster, host, gpu string, at ...time.Time) dev {
		return dev{cluster, host, gpu, "", day.AddDate(0, 0, 40), at}
	}
	migs := func(host, gpu string, n int, at ...time.Time) []dev {
		var out []dev
		for i := range n {
			out = append(out, dev{"c", host, gpu, fmt.Sprintf("MIG-%s-%d", gpu, i), day.AddDate(0, 0, 40), at})
		}
		return out
	}
	cat := func(ds ...[]dev) []dev {
		var out []dev
		for _, d := range ds {
			out = append(out, d...)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		devs     []dev
		jobs     map[string]int // cluster → 1-GPU jobs running all day
		capacity []analytics.Capacity
		want     map[string]string // cluster → "GPUS SOURCE"
	}{
		{"GPUs installed 30 days later", cat(
			[]dev{whole("c", "h1", "GPU-a", in, later), whole("c", "h1", "GPU-b", in, later)},
			[]dev{whole("c", "h2", "GPU-c", later), whole("c", "h2", "GPU-d", later), whole("c", "h2", "GPU-e", later),
				whole("c", "h2", "GPU-f", later), whole("c", "h2", "GPU-g", later), whole("c", "h2", "GPU-h", later)}),
			map[string]int{"c": 2}, nil, map[string]string{"c": "2 inventory"}},
		{"MIG layout created 30 days later", cat(
			[]dev{whole("c", "h1", "GPU-a", in, later)}, migs("h1", "GPU-a", 7, later)),
			map[string]int{"c": 1}, nil, map[string]string{"c": "1 inventory"}},
		{"MIG instances in the window", cat(
			[]dev{whole("c", "h1", "GPU-a", in), whole("c", "h1", "GPU-b", in)}, migs("h1", "GPU-a", 7, in)),
			map[string]int{"c": 8}, nil, map[string]string{"c": "8 inventory"}},
		{"GPUs at the window's end, GPUs down at its end", []dev{whole("c", "h1", "GPU-a", in, end, later),
			whole("c", "h1", "GPU-b", end), whole("c", "h1", "GPU-c", in, later), whole("c", "h2", "GPU-d", in)},
			map[string]int{"c": 2}, nil, map[string]string{"c": "4 inventory"}},
		{"MIG layout created in the window's last hour", cat(
			[]dev{whole("c", "h1", "GPU-a", in), whole("c", "h1", "GPU-b", in, end)}, migs("h1", "GPU-a", 7, end, later)),
			map[string]int{"c": 8}, nil, map[string]string{"c": "8 inventory"}},
		{"a GPU gone before the window", []dev{whole("c", "h1", "GPU-a", in),
			{"c", "h2", "GPU-b", "", day.Add(-time.Hour), []time.Time{day.Add(-time.Hour)}}},
			map[string]int{"c": 1}, nil, map[string]string{"c": "1 inventory"}},
		{"no samples in the window: gpu_inventory", cat(
			[]dev{whole("c", "h1", "GPU-a", in, later), whole("d", "h9", "GPU-x", later), whole("d", "h9", "GPU-y", later)}),
			map[string]int{"c": 1, "d": 2}, nil, map[string]string{"c": "1 inventory", "d": "2 inventory"}},
		{"configured capacity wins", []dev{whole("c", "h1", "GPU-a", in)},
			map[string]int{"c": 1}, []analytics.Capacity{{Cluster: "c", GPUs: 16}}, map[string]string{"c": "16 config"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, conn := schematest.Database(t)
			ctx := context.Background()
			db := cfg.Database
			ib, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".gpu_inventory (cluster, host, gpu_uuid, mig_uuid, gpu_index, model, gi_id, ci_id, mig_profile, last_seen)")
			if err != nil {
				t.Fatal(err)
			}
			sb, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".gpu_samples (ts, cluster, host, gpu_index, gpu_uuid, mig_uuid, kafka_partition, kafka_offset)")
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range tc.devs {
				if err := ib.Append(d.cluster, d.host, d.gpu, d.mig, uint16(0), "A100", int32(-1), int32(-1), "", d.lastSeen); err != nil {
					t.Fatal(err)
				}
				for j, at := range d.at {
					if err := sb.Append(at, d.cluster, d.host, uint16(0), d.gpu, d.mig, uint32(0), uint64(i*10+j)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := ib.Send(); err != nil {
				t.Fatal(err)
			}
			if err := sb.Send(); err != nil {
				t.Fatal(err)
			}
			var rows [][]any
			for cluster, n := range tc.jobs {
				for i := range n {
					rows = append(rows, []any{cluster, fmt.Sprint(i), "slurm", "alice", "gpu", "RUNNING", day, &day, uint32(1), "START", day, day, uint64(1)})
				}
			}
			schematest.InsertJobRows(t, conn, db, "cluster, job_id, source, user, partition_name, state, submit_time, start_time, gpus, last_event, updated_at, inserted_at, version", rows...)

			// computed again 40 days on, every device still reporting
			if _, err := newRunner(t, conn, db, day.AddDate(0, 0, 40), tc.capacity...).RunWindow(ctx, w, "capacity", "utilization"); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			crs, err := conn.Query(ctx, "SELECT cluster, gpus, source FROM "+db+".analytics_capacity WHERE window_id = ? AND vc = ''", w.ID())
			if err != nil {
				t.Fatal(err)
			}
			for crs.Next() {
				var cluster, source string
				var gpus uint32
				if err := crs.Scan(&cluster, &gpus, &source); err != nil {
					t.Fatal(err)
				}
				got[cluster] = fmt.Sprint(gpus, " ", source)
			}
			if err := crs.Err(); err != nil {
				t.Fatal(err)
			}
			crs.Close()
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("capacity (GPUs, source) by cluster = %v; want %v", got, tc.want)
			}
			for cluster, n := range tc.jobs {
				var util float64
				var gpus uint32
				if err := conn.QueryRow(ctx, "SELECT util_mean, capacity FROM "+db+".analytics_utilization_dist WHERE window_id = ? AND scope = 'cluster' AND cluster = ?", w.ID(), cluster).Scan(&util, &gpus); err != nil {
					t.Fatal(err)
				}
				var wantGPUs float64
				fmt.Sscan(tc.want[cluster], &wantGPUs)
				if want := float64(n) / wantGPUs; util != want || float64(gpus) != wantGPUs {
					t.Errorf("cluster %s: utilization = %v of %d GPUs; want %v of %v", cluster, util, gpus, want, wantGPUs)
				}
			}
		})
	}
}
