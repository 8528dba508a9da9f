package analytics_test

import (
	"context"
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// Tolerances. Counts and job shares are exact (the same integer division);
// GPU-time shares are sums of floats in another order (1e-12 relative);
// quantiles are exact but computed in floating point (1e-9 relative).
const (
	shareTol    = 1e-12
	quantileTol = 1e-9
)

func near(got, want, rel float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	return math.Abs(got-want) <= rel*math.Max(1, math.Abs(want))
}

// farFuture is a runner clock after every trace: whole windows are computed.
var farFuture = time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)

// TestCharacterizeCTC imports the CTC-SP2 trace (77,222 jobs; processors play
// GPUs), runs every job over its whole span, checks the results against an
// independent computation over the raw file, re-runs the window and checks
// that nothing doubled, and runs the capacity-planning queries.
func TestCharacterizeCTC(t *testing.T) {
	path := sharedData(t, "swf/CTC-SP2-1996-3.1-cln.swf.gz")
	cfg, conn := schematest.Database(t)
	ctx := context.Background()
	db := cfg.Database
	importTrace(t, conn, db, path, "ctc")
	ref := readSWFRaw(t, path)
	want := characterize(ref)

	w, err := analytics.DataSpan(ctx, conn, db, "")
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, conn, db, farFuture)
	res, err := r.RunWindow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if res.WindowJobs != uint64(len(ref)) {
		t.Fatalf("RunWindow: %d jobs in the window; want %d", res.WindowJobs, len(ref))
	}

	t.Run("headline", func(t *testing.T) {
		h, err := analytics.ReadHeadline(ctx, conn, db, w, "ctc")
		if err != nil {
			t.Fatal(err)
		}
		checkHeadline(t, h, want)
	})
	t.Run("summary", func(t *testing.T) {
		checkSummary(t, conn, db, w, "cluster", "", ref)
		byVC := map[string][]refJob{}
		for _, j := range ref {
			byVC[j.vc] = append(byVC[j.vc], j)
		}
		for vc, js := range byVC {
			checkSummary(t, conn, db, w, "vc", vc, js)
		}
	})
	t.Run("duration", func(t *testing.T) {
		for _, m := range []struct {
			metric string
			vals   []int64
		}{{"run", want.runs}, {"queue", want.queues}} {
			var n uint64
			var q [7]float64
			var minV, maxV float64
			if err := conn.QueryRow(ctx, "SELECT jobs, min_s, p10_s, p25_s, p50_s, p75_s, p90_s, p95_s, p99_s, max_s FROM "+db+
				".analytics_duration WHERE window_id = ? AND scope = 'cluster' AND job_class = 'all' AND metric = ?", w.ID(), m.metric).
				Scan(&n, &minV, &q[0], &q[1], &q[2], &q[3], &q[4], &q[5], &q[6], &maxV); err != nil {
				t.Fatal(err)
			}
			if n != uint64(len(m.vals)) || minV != float64(m.vals[0]) || maxV != float64(m.vals[len(m.vals)-1]) {
				t.Errorf("%s: jobs %d, min %v, max %v; want %d, %d, %d", m.metric, n, minV, maxV, len(m.vals), m.vals[0], m.vals[len(m.vals)-1])
			}
			for i, p := range []float64{0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99} {
				if wq := quantile7(m.vals, p); !near(q[i], wq, quantileTol) {
					t.Errorf("%s p%g = %v; want %v", m.metric, p*100, q[i], wq)
				}
			}
		}
	})
	t.Run("cdf", func(t *testing.T) {
		rows, err := conn.Query(ctx, "SELECT le_s, jobs_le, jobs FROM "+db+
			".analytics_duration_cdf WHERE window_id = ? AND scope = 'cluster' AND job_class = 'all' AND metric = 'run' ORDER BY le_s", w.ID())
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		points := 0
		for rows.Next() {
			var le float64
			var n, total uint64
			if err := rows.Scan(&le, &n, &total); err != nil {
				t.Fatal(err)
			}
			points++
			k := sort.Search(len(want.runs), func(i int) bool { return float64(want.runs[i]) > le })
			if n != uint64(k) || total != uint64(len(want.runs)) {
				t.Errorf("CDF at %v s: %d of %d jobs; want %d of %d", le, n, total, k, len(want.runs))
			}
		}
		if points != 71 {
			t.Errorf("CDF has %d points; want 71", points)
		}
	})
	t.Run("gpu_count", func(t *testing.T) {
		wantN := map[uint32]uint64{}
		for _, g := range want.gpuCounts {
			wantN[uint32(g)]++
		}
		got := map[uint32]uint64{}
		var lastCDF float64
		rows, err := conn.Query(ctx, "SELECT gpus, jobs, jobs_cdf FROM "+db+".analytics_gpu_count WHERE window_id = ? AND scope = 'cluster' ORDER BY gpus", w.ID())
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var g uint32
			var n uint64
			if err := rows.Scan(&g, &n, &lastCDF); err != nil {
				t.Fatal(err)
			}
			got[g] = n
		}
		if fmt.Sprint(got) != fmt.Sprint(wantN) {
			t.Errorf("jobs by GPU count differ:\n got %v\nwant %v", got, wantN)
		}
		if !near(lastCDF, 1, shareTol) {
			t.Errorf("jobs_cdf at the largest count = %v; want 1", lastCDF)
		}
	})
	t.Run("state_by_gpus", func(t *testing.T) {
		wantN := map[string]uint64{}
		for _, j := range ref {
			if j.gpus > 0 && j.class != "" {
				b := int64(1)
				for b < j.gpus {
					b *= 2
				}
				wantN[fmt.Sprintf("%d/%s", b, j.class)]++
			}
		}
		got := map[string]uint64{}
		rows, err := conn.Query(ctx, "SELECT gpu_bucket, state_class, jobs FROM "+db+".analytics_state_by_gpus WHERE window_id = ? AND scope = 'cluster'", w.ID())
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var b uint32
			var c string
			var n uint64
			if err := rows.Scan(&b, &c, &n); err != nil {
				t.Fatal(err)
			}
			got[fmt.Sprintf("%d/%s", b, c)] = n
		}
		if fmt.Sprint(got) != fmt.Sprint(wantN) {
			t.Errorf("jobs by GPU bucket and state differ:\n got %v\nwant %v", got, wantN)
		}
	})
	t.Run("monthly", func(t *testing.T) {
		wantN := map[string]uint64{}
		for _, j := range ref {
			if j.gpus == 0 {
				continue
			}
			c := "multi"
			if j.gpus == 1 {
				c = "single"
			}
			wantN[time.Unix(j.submit, 0).UTC().Format("2006-01")+"/"+c]++
		}
		got := map[string]uint64{}
		rows, err := conn.Query(ctx, "SELECT toString(month_start), gpu_class, jobs FROM "+db+".analytics_monthly WHERE window_id = ? AND scope = 'cluster'", w.ID())
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var m, c string
			var n uint64
			if err := rows.Scan(&m, &c, &n); err != nil {
				t.Fatal(err)
			}
			got[m[:7]+"/"+c] = n
		}
		if fmt.Sprint(got) != fmt.Sprint(wantN) {
			t.Errorf("monthly jobs differ:\n got %v\nwant %v", got, wantN)
		}
	})
	t.Run("users", func(t *testing.T) {
		rows, err := conn.Query(ctx, "SELECT user, gpu_seconds, queue_s, gpu_time_rank FROM "+db+".analytics_users WHERE window_id = ? AND scope = 'cluster'", w.ID())
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var u string
			var gt, q float64
			var rank uint32
			if err := rows.Scan(&u, &gt, &q, &rank); err != nil {
				t.Fatal(err)
			}
			n++
			if gt != want.userGPUTime[u] || q != want.userQueue[u] {
				t.Errorf("user %q: GPU time %v, queuing delay %v; want %v, %v", u, gt, q, want.userGPUTime[u], want.userQueue[u])
			}
			if rank == 1 {
				for v, wgt := range want.userGPUTime {
					if wgt > gt {
						t.Errorf("user %q ranks first with %v GPU-s; %q has %v", u, gt, v, wgt)
					}
				}
			}
		}
		if n != want.users {
			t.Errorf("%d users; want %d", n, want.users)
		}
		for _, p := range []int{1, 5, 10, 25} {
			var share float64
			if err := conn.QueryRow(ctx, "SELECT gpu_time_share FROM "+db+".analytics_user_concentration WHERE window_id = ? AND scope = 'cluster' AND top_pct = ?", w.ID(), uint8(p)).Scan(&share); err != nil {
				t.Fatal(err)
			}
			if !near(share, want.topShare[p], shareTol) {
				t.Errorf("top %d%% users hold %v of GPU time; want %v", p, share, want.topShare[p])
			}
		}
	})
	t.Run("utilization", func(t *testing.T) {
		checkHourly(t, conn, db, w, ref)
	})

	t.Run("rerun", func(t *testing.T) {
		before := tableCounts(t, conn, db, w)
		// a later clock: a changed run is swapped in, not added
		r2 := newRunner(t, conn, db, farFuture.Add(time.Hour))
		if _, err := r2.RunWindow(ctx, w); err != nil {
			t.Fatal(err)
		}
		if _, err := r2.RunWindow(ctx, w, "jobs"); err != nil {
			t.Fatal(err)
		}
		after := tableCounts(t, conn, db, w)
		if fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("rows per table after re-runs:\n got %v\nwant %v", after, before)
		}
		h, err := analytics.ReadHeadline(ctx, conn, db, w, "ctc")
		if err != nil {
			t.Fatal(err)
		}
		checkHeadline(t, h, want)
		runs, err := analytics.ReadWindows(ctx, conn, db)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 || runs[0].Window != w || len(runs[0].Jobs) != len(analytics.JobNames()) {
			t.Errorf("ReadWindows = %+v; want one window %s with %d jobs", runs, w, len(analytics.JobNames()))
		}
	})

	t.Run("capacity_queries", func(t *testing.T) {
		for _, q := range analytics.CapacityQueries() {
			if q.Name == "idle_allocated" || q.Name == "energy_monthly" {
				continue // need telemetry: TestEfficiency runs them
			}
			res, err := analytics.RunCapacityQuery(ctx, conn, db, q, w, farFuture, time.UTC, 30*24*time.Hour)
			if err != nil {
				t.Fatalf("%s: %v", q.Name, err)
			}
			if len(res.Rows) == 0 {
				t.Errorf("%s returned no rows", q.Name)
			}
			t.Logf("%s: %d rows, columns %v, first %v", q.Name, len(res.Rows), res.Columns, res.Rows[0])
		}
	})
}

func checkHeadline(t *testing.T, h *analytics.Headline, want *refStats) {
	t.Helper()
	if h.Jobs != uint64(want.jobs) || h.GPUJobs != uint64(want.gpuJobs) || h.Users != uint64(want.users) || h.EndedJobs != uint64(want.ended) {
		t.Errorf("headline jobs %d, GPU jobs %d, users %d, ended %d; want %d, %d, %d, %d",
			h.Jobs, h.GPUJobs, h.Users, h.EndedJobs, want.jobs, want.gpuJobs, want.users, want.ended)
	}
	for _, c := range []string{"completed", "cancelled", "failed"} {
		if ws := float64(want.classJobs[c]) / float64(want.ended); h.StateShare[c] != ws {
			t.Errorf("state_share[%s] = %v; want %v", c, h.StateShare[c], ws)
		}
		if ws := want.classGPUTime[c] / want.gpuTime; !near(h.GPUTimeStateShare[c], ws, shareTol) && !(math.IsNaN(ws) && math.IsNaN(h.GPUTimeStateShare[c])) {
			t.Errorf("gpu_time_state_share[%s] = %v; want %v", c, h.GPUTimeStateShare[c], ws)
		}
	}
	if _, ok := h.StateShare["unknown"]; ok != (want.classJobs["unknown"] > 0) {
		t.Errorf("state_share has unknown: %v; want %v", ok, want.classJobs["unknown"] > 0)
	}
	if h.DurationJobs != uint64(len(want.runs)) || !near(h.DurationMedianS, quantile7(want.runs, 0.5), quantileTol) {
		t.Errorf("duration median %v of %d jobs; want %v of %d", h.DurationMedianS, h.DurationJobs, quantile7(want.runs, 0.5), len(want.runs))
	}
	if !near(h.Top5PctUsersGPUTimeShare, want.topShare[5], shareTol) && !(math.IsNaN(want.topShare[5]) && math.IsNaN(h.Top5PctUsersGPUTimeShare)) {
		t.Errorf("top5pct_users_gpu_time_share = %v; want %v", h.Top5PctUsersGPUTimeShare, want.topShare[5])
	}
}

// checkSummary compares a scope's analytics_summary row with jobs.
func checkSummary(t *testing.T, conn driver.Conn, db string, w analytics.Window, scope, value string, jobs []refJob) {
	t.Helper()
	var (
		n, nGPU, ended               uint64
		complete, fail, medRun, avgG float64
		medQ, medG                   float64
	)
	if err := conn.QueryRow(context.Background(), "SELECT job_num, gpu_job_num, ended_job_num, complete_rate, fail_rate, med_run_time_gpu, avg_gpu_num, med_que_time_gpu, med_gpu_num FROM "+db+
		".analytics_summary WHERE window_id = ? AND scope = ? AND scope_value = ?", w.ID(), scope, value).
		Scan(&n, &nGPU, &ended, &complete, &fail, &medRun, &avgG, &medQ, &medG); err != nil {
		t.Fatalf("summary %s %q: %v", scope, value, err)
	}
	var gpuJobs []refJob
	for _, j := range jobs {
		if j.gpus > 0 {
			gpuJobs = append(gpuJobs, j)
		}
	}
	all, g := characterize(jobs), characterize(gpuJobs)
	var sumG int64
	for _, v := range g.gpuCounts {
		sumG += v
	}
	switch {
	case n != uint64(all.jobs) || nGPU != uint64(all.gpuJobs) || ended != uint64(all.ended):
		t.Errorf("summary %s %q: jobs %d, GPU jobs %d, ended %d; want %d, %d, %d", scope, value, n, nGPU, ended, all.jobs, all.gpuJobs, all.ended)
	case complete != float64(all.classJobs["completed"])/float64(all.ended) || fail != float64(all.classJobs["failed"])/float64(all.ended):
		t.Errorf("summary %s %q: complete %v, fail %v; want %v, %v", scope, value, complete, fail,
			float64(all.classJobs["completed"])/float64(all.ended), float64(all.classJobs["failed"])/float64(all.ended))
	case !near(medRun, quantile7(g.runs, 0.5), quantileTol) || !near(medQ, quantile7(g.queues, 0.5), quantileTol):
		t.Errorf("summary %s %q: median GPU run %v, queue %v; want %v, %v", scope, value, medRun, medQ, quantile7(g.runs, 0.5), quantile7(g.queues, 0.5))
	case !near(medG, quantile7(g.gpuCounts, 0.5), quantileTol) || !near(avgG, float64(sumG)/float64(len(g.gpuCounts)), quantileTol):
		t.Errorf("summary %s %q: GPUs median %v, mean %v; want %v, %v", scope, value, medG, avgG, quantile7(g.gpuCounts, 0.5), float64(sumG)/float64(len(g.gpuCounts)))
	}
}

// checkHourly compares the cluster's hourly busy and pending GPUs with the
// jobs' run and wait intervals cut into hours (means over the seconds of
// each hour inside the window), and its capacity (the peak of GPUs held, for
// a trace) with a sweep over starts and ends.
func checkHourly(t *testing.T, conn driver.Conn, db string, w analytics.Window, jobs []refJob) {
	t.Helper()
	since, until := w.Since.Unix(), w.Until.Unix()
	hours := int((until - since + 3599) / 3600)
	busy, pend := make([]int64, hours), make([]int64, hours)
	add := func(dst []int64, g, s, e int64) {
		s, e = max(s, since), min(e, until)
		for h := (s - since) / 3600; s < e; h++ {
			hEnd := since + (h+1)*3600
			dst[h] += g * (min(e, hEnd) - s)
			s = hEnd
		}
	}
	type ev struct{ t, d int64 }
	var evs []ev
	for _, j := range jobs {
		if j.gpus == 0 {
			continue
		}
		if j.start >= 0 {
			add(pend, j.gpus, j.submit, j.start)
			if j.end >= j.start {
				add(busy, j.gpus, j.start, j.end)
				evs = append(evs, ev{max(j.start, since), j.gpus}, ev{min(j.end, until), -j.gpus})
			}
		}
	}
	sort.Slice(evs, func(a, b int) bool { return evs[a].t < evs[b].t || evs[a].t == evs[b].t && evs[a].d < evs[b].d })
	var level, peak int64
	for _, e := range evs {
		level += e.d
		peak = max(peak, level)
	}
	rows, err := conn.Query(context.Background(), "SELECT toUnixTimestamp(hour_start), capacity, busy_gpus, pending_gpus FROM "+db+
		".analytics_utilization_hourly WHERE window_id = ? AND scope = 'cluster' ORDER BY hour_start", w.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n, bad := 0, 0
	for rows.Next() {
		var hs, capacity uint32
		var b, p float64
		if err := rows.Scan(&hs, &capacity, &b, &p); err != nil {
			t.Fatal(err)
		}
		h := (int64(hs) - since) / 3600
		if int(h) != n {
			t.Fatalf("hour %d is row %d: hours missing", h, n)
		}
		n++
		if capacity != uint32(peak) {
			t.Fatalf("capacity %d; want the peak %d", capacity, peak)
		}
		secs := float64(min(3600, until-int64(hs)))
		if !near(b, float64(busy[h])/secs, quantileTol) || !near(p, float64(pend[h])/secs, quantileTol) {
			if bad++; bad <= 5 {
				t.Errorf("hour %s: busy %v, pending %v GPUs; want %v, %v", time.Unix(int64(hs), 0).UTC(), b, p, float64(busy[h])/secs, float64(pend[h])/secs)
			}
		}
	}
	if n != hours {
		t.Errorf("%d hours; want %d", n, hours)
	}
}

// tableCounts counts each result table's rows of window w.
func tableCounts(t *testing.T, conn driver.Conn, db string, w analytics.Window) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, j := range analytics.Jobs() {
		for _, tbl := range j.Tables {
			var n uint64
			if err := conn.QueryRow(context.Background(), "SELECT count() FROM "+db+"."+tbl+" WHERE window_id = ?", w.ID()).Scan(&n); err != nil {
				t.Fatal(err)
			}
			out[tbl] = n
		}
	}
	return out
}
