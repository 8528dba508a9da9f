package analytics_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// summaryRow is one job_run_summary row the test writes.
type summaryRow struct {
	job, user, vc string
	gpus          uint32
	gpuHours      float64
	samples       uint64
	util, sm      *float32
	energyJ       *float64
	zeroHours     *float64
	flags         []string
	version       uint64
}

func f32(v float32) *float32 { return &v }
func f64(v float64) *float64 { return &v }

// TestEfficiency writes job summaries (one job twice: only its newer summary
// counts) and GPU samples, runs the efficiency job and the telemetry
// capacity queries, and checks the aggregates against the rows written.
func TestEfficiency(t *testing.T) {
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	db := cfg.Database
	submit := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	var rows []summaryRow
	for i := range 40 {
		r := summaryRow{job: fmt.Sprint(i), user: fmt.Sprintf("u%d", i%4), vc: fmt.Sprintf("vc%d", i%2), gpus: uint32(1 + i%8),
			gpuHours: float64(1+i%5) * 0.5, version: 1}
		if i%10 != 9 { // every tenth has no samples
			r.samples = 100
			r.util = f32(float32(i * 2))
			r.energyJ = f64(float64(1000 * (i + 1)))
			r.zeroHours = f64(0)
			if i%7 == 0 {
				r.zeroHours = f64(r.gpuHours / 2)
				r.flags = append(r.flags, "idle_allocated")
			}
			if i%3 == 0 {
				r.sm = f32(float32(i) / 100)
			}
			if *r.util < 15 {
				r.flags = append(r.flags, "low_util")
			}
		} else {
			r.flags = []string{"no_samples"}
		}
		rows = append(rows, r)
	}
	// an older summary of job 5, replaced by the one above
	stale := rows[5]
	stale.version, stale.gpuHours, stale.flags = 0, 1000, []string{"low_util", "poor_time_limit"}
	insert := append([]summaryRow{stale}, rows...)

	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".job_run_summary (cluster, job_id, user, partition_name, state, gpus, submit_time, start_time, end_time, elapsed_s, gpu_hours, samples, util_mean, sm_active_mean, energy_j, zero_util_gpu_hours, flags, computed_at, version)")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range insert {
		if err := b.Append("c", r.job, r.user, r.vc, "COMPLETED", r.gpus, submit, submit.Add(time.Minute), submit.Add(time.Hour), uint32(3540),
			r.gpuHours, r.samples, r.util, r.sm, r.energyJ, r.zeroHours, r.flags, submit, r.version); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	// two GPUs at 100 W and 300 W for 10 minutes
	sb, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".gpu_samples (ts, cluster, host, gpu_index, gpu_uuid, mig_uuid, power_mw, kafka_partition, kafka_offset)")
	if err != nil {
		t.Fatal(err)
	}
	for m := range 10 {
		for g, mw := range []uint32{100_000, 300_000} {
			if err := sb.Append(submit.Add(time.Duration(m)*time.Minute), "c", "h1", uint16(g), fmt.Sprint("GPU-", g), "", &mw, uint32(0), uint64(m)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := sb.Send(); err != nil {
		t.Fatal(err)
	}

	w := analytics.Window{Since: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	r, err := analytics.NewRunner(analytics.Config{Database: db, Lookback: time.Hour}, conn, slog.New(slog.DiscardHandler), reg, func() time.Time { return farFuture })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunWindow(ctx, w, "efficiency"); err != nil {
		t.Fatal(err)
	}

	// expected, cluster scope
	var (
		n, sampled, smJobs, low, idleAlloc, noS int
		gh, sgh, uw, uh, smw, smh, idle, e      float64
		utils                                   []float64
		flagCount                               = map[string]uint64{}
	)
	for _, x := range rows {
		n++
		gh += x.gpuHours
		if x.samples > 0 {
			sampled++
			sgh += x.gpuHours
		}
		if x.util != nil {
			uw += float64(*x.util) * x.gpuHours
			uh += x.gpuHours
			utils = append(utils, float64(*x.util))
		}
		if x.sm != nil {
			smJobs++
			smw += float64(*x.sm) * x.gpuHours
			smh += x.gpuHours
		}
		if x.zeroHours != nil {
			idle += *x.zeroHours
		}
		if x.energyJ != nil {
			e += *x.energyJ
		}
		for _, f := range x.flags {
			flagCount[f]++
			switch f {
			case "low_util":
				low++
			case "idle_allocated":
				idleAlloc++
			case "no_samples":
				noS++
			}
		}
	}
	sort.Float64s(utils)
	var (
		gotN, gotSampled, gotSM, gotLow, gotIdleAlloc, gotNoS, gotPoor uint64
		gotGH, gotSGH, gotUtil, gotP50, gotSMMean, gotIdle, gotShare   float64
		gotKWh                                                         float64
		names                                                          []string
		counts                                                         []uint64
	)
	if err := conn.QueryRow(ctx, `SELECT jobs, sampled_jobs, gpu_hours, sampled_gpu_hours, util_mean, util_p50, sm_jobs, sm_active_mean,
		idle_gpu_hours, idle_share, energy_kwh, low_util_jobs, idle_allocated_jobs, poor_time_limit_jobs, no_samples_jobs, flag_names, flag_jobs
		FROM `+db+`.analytics_efficiency WHERE window_id = ? AND scope = 'cluster'`, w.ID()).Scan(
		&gotN, &gotSampled, &gotGH, &gotSGH, &gotUtil, &gotP50, &gotSM, &gotSMMean, &gotIdle, &gotShare, &gotKWh,
		&gotLow, &gotIdleAlloc, &gotPoor, &gotNoS, &names, &counts); err != nil {
		t.Fatal(err)
	}
	p50 := (utils[len(utils)/2-1] + utils[len(utils)/2]) / 2 // an even count
	if len(utils)%2 == 1 {
		p50 = utils[len(utils)/2]
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"jobs", float64(gotN), float64(n)}, {"sampled_jobs", float64(gotSampled), float64(sampled)},
		{"gpu_hours", gotGH, gh}, {"sampled_gpu_hours", gotSGH, sgh}, {"util_mean", gotUtil, uw / uh}, {"util_p50", gotP50, p50},
		{"sm_jobs", float64(gotSM), float64(smJobs)}, {"sm_active_mean", gotSMMean, smw / smh},
		{"idle_gpu_hours", gotIdle, idle}, {"idle_share", gotShare, idle / sgh}, {"energy_kwh", gotKWh, e / 3.6e6},
		{"low_util_jobs", float64(gotLow), float64(low)}, {"idle_allocated_jobs", float64(gotIdleAlloc), float64(idleAlloc)},
		{"poor_time_limit_jobs", float64(gotPoor), 0}, {"no_samples_jobs", float64(gotNoS), float64(noS)},
	} {
		if !near(c.got, c.want, 1e-6) {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}
	gotFlags := map[string]uint64{}
	for i, f := range names {
		gotFlags[f] = counts[i]
	}
	if fmt.Sprint(gotFlags) != fmt.Sprint(flagCount) {
		t.Errorf("flags %v; want %v", gotFlags, flagCount)
	}
	var users uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+".analytics_efficiency WHERE window_id = ? AND scope = 'user'", w.ID()).Scan(&users); err != nil {
		t.Fatal(err)
	}
	if users != 4 {
		t.Errorf("%d user rows; want 4", users)
	}

	for _, name := range []string{"idle_allocated", "energy_monthly"} {
		var q analytics.CapacityQuery
		for _, c := range analytics.CapacityQueries() {
			if c.Name == name {
				q = c
			}
		}
		res, err := analytics.RunCapacityQuery(ctx, conn, db, q, w, farFuture, time.UTC, 30*24*time.Hour)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(res.Rows) == 0 {
			t.Fatalf("%s returned no rows", name)
		}
		t.Logf("%s:\n%s", name, res.FormatTable())
		if name == "energy_monthly" {
			// fleet: (100 + 300) W x 600 s = 240,000 J = 0.0667 kWh
			if got := res.Rows[0][2]; !near(got.(float64), 0.07, 1e-9) {
				t.Errorf("energy_monthly fleet_kwh = %v; want 0.07 (rounded)", got)
			}
		}
	}

	problems, err := promlint.NewWithMetricFamilies(gather(t, reg)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func gather(t *testing.T, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "heliostat_analytics_") {
			t.Errorf("metric %s lacks the heliostat_analytics_ prefix", mf.GetName())
		}
	}
	if len(mfs) == 0 {
		t.Error("no metrics registered")
	}
	return mfs
}
