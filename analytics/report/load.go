package report

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/analytics"
)

// ErrNoResults is returned by Load when the analytics jobs have written
// nothing for the window and cluster: run them first (`heliostat analytics
// run --since … --until …`). It wraps analytics.ErrNoResults.
var ErrNoResults = fmt.Errorf("report: %w", analytics.ErrNoResults)

// LoadOptions say what Load reads.
type LoadOptions struct {
	Database string
	Window   analytics.Window
	// Cluster is the cluster to report on; "" means the only cluster with
	// results in the window (an error when there are several).
	Cluster string
	// Users is how many users the user tables list. Default 15.
	Users int
}

// loader reads one window and cluster.
type loader struct {
	conn    driver.Conn
	db      string
	window  string
	cluster string
}

// query runs q with {db} replaced by the database and calls scan for each
// row. Its parameters are args, or, when none are given, the window and the
// cluster.
func (l *loader) query(ctx context.Context, q string, scan func(driver.Rows) error, args ...any) error {
	q = strings.ReplaceAll(q, "{db}", l.db)
	if len(args) == 0 {
		args = []any{l.window, l.cluster}
	}
	rows, err := l.conn.Query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("report: query %s: %w", firstWords(q), err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("report: scan %s: %w", firstWords(q), err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("report: read %s: %w", firstWords(q), err)
	}
	return nil
}

// firstWords names a query in an error by its table.
func firstWords(q string) string {
	if i := strings.Index(q, "FROM "); i >= 0 {
		f := strings.Fields(q[i+5:])
		if len(f) > 0 {
			return f[0]
		}
	}
	return "query"
}

// Clusters lists the clusters with characterization results in a window.
func Clusters(ctx context.Context, conn driver.Conn, database, windowID string) ([]string, error) {
	rows, err := conn.Query(ctx, "SELECT DISTINCT cluster FROM "+database+".analytics_headline WHERE window_id = ? ORDER BY cluster", windowID)
	if err != nil {
		return nil, fmt.Errorf("report: list clusters: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, fmt.Errorf("report: list clusters: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Load reads the characterization of one cluster in one window from the
// analytics result tables into a Report. Title, Source and Generated are
// left for the caller.
func Load(ctx context.Context, conn driver.Conn, o LoadOptions) (*Report, error) {
	if o.Users <= 0 {
		o.Users = figureUsers
	}
	if o.Cluster == "" {
		cs, err := Clusters(ctx, conn, o.Database, o.Window.ID())
		if err != nil {
			return nil, err
		}
		switch len(cs) {
		case 0:
			return nil, fmt.Errorf("%w %s", ErrNoResults, o.Window.ID())
		case 1:
			o.Cluster = cs[0]
		default:
			return nil, fmt.Errorf("report: window %s has results for %d clusters (%s): choose one with --cluster", o.Window.ID(), len(cs), strings.Join(cs, ", "))
		}
	}
	l := &loader{conn: conn, db: o.Database, window: o.Window.ID(), cluster: o.Cluster}
	r := &Report{Clusters: []string{o.Cluster}, From: o.Window.Since, To: o.Window.Until}
	steps := []func(context.Context, *Report) error{
		l.headline, l.durations, l.states, l.utilization, l.capacity, l.heatmap, l.months, l.vcs, l.gpuTypes,
		l.gpuCounts, l.stateByGPUs, l.concentration, l.users, l.telemetry, l.summary,
	}
	for _, step := range steps {
		if err := step(ctx, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (l *loader) headline(ctx context.Context, r *Report) error {
	found := false
	err := l.query(ctx, `SELECT jobs, gpu_jobs, users, ended_jobs,
	completed_share, cancelled_share, failed_share, unknown_share,
	completed_gpu_time_share, cancelled_gpu_time_share, failed_gpu_time_share, unknown_gpu_time_share,
	duration_jobs, duration_median_s, top5pct_users_gpu_time_share
FROM {db}.analytics_headline WHERE window_id = ? AND cluster = ?`, func(rows driver.Rows) error {
		var jobs, gpuJobs, users, ended, durJobs uint64
		var s, g [4]float64
		var median, top5 float64
		if err := rows.Scan(&jobs, &gpuJobs, &users, &ended, &s[0], &s[1], &s[2], &s[3], &g[0], &g[1], &g[2], &g[3], &durJobs, &median, &top5); err != nil {
			return err
		}
		found = true
		h := Headline{Jobs: int64(jobs), GPUJobs: int64(gpuJobs), Users: int64(users),
			StateShare: map[string]float64{}, GPUTimeStateShare: map[string]float64{},
			DurationMedianS: median, Top5pctGPUTime: top5}
		if durJobs == 0 {
			h.DurationMedianS = nan
		}
		for i, st := range States {
			if st == "unknown" && !(s[i] > 0 || g[i] > 0) {
				continue // shown only where the source has unknown outcomes
			}
			// NaN (no ended job, no GPU time) stays: the page shows no data,
			// not 0.
			h.StateShare[st], h.GPUTimeStateShare[st] = s[i], g[i]
		}
		r.Headline = h
		return nil
	})
	if err == nil && !found {
		return fmt.Errorf("%w %s, cluster %q", ErrNoResults, l.window, l.cluster)
	}
	return err
}

func (l *loader) durations(ctx context.Context, r *Report) error {
	byName := map[string]int{}
	err := l.query(ctx, `SELECT scope, scope_value, le_s, cdf FROM {db}.analytics_duration_cdf
WHERE window_id = ? AND cluster = ? AND metric = 'run' AND job_class = 'gpu' AND scope IN ('cluster', 'vc') AND jobs > 0
ORDER BY scope = 'vc', scope_value, le_s`, func(rows driver.Rows) error {
		var scope, value string
		var le, cdf float64
		if err := rows.Scan(&scope, &value, &le, &cdf); err != nil {
			return err
		}
		name := "all GPU jobs"
		if scope == "vc" {
			name = "VC " + value
		}
		i, ok := byName[name]
		if !ok {
			i = len(r.DurationCDF)
			byName[name] = i
			r.DurationCDF = append(r.DurationCDF, CDF{Name: name})
		}
		r.DurationCDF[i].Points = append(r.DurationCDF[i].Points, Point{le, cdf})
		return nil
	})
	if err != nil {
		return err
	}
	r.RunP50S, r.RunP90S = nan, nan
	return l.query(ctx, `SELECT p50_s, p90_s FROM {db}.analytics_duration
WHERE window_id = ? AND cluster = ? AND scope = 'cluster' AND job_class = 'gpu' AND metric = 'run' AND jobs > 0`, func(rows driver.Rows) error {
		return rows.Scan(&r.RunP50S, &r.RunP90S)
	})
}

func (l *loader) states(ctx context.Context, r *Report) error {
	by := map[string]*StateCount{}
	err := l.query(ctx, `SELECT state_class, sum(jobs), sum(gpu_seconds) FROM {db}.analytics_state
WHERE window_id = ? AND cluster = ? AND scope = 'cluster' AND job_class = 'all'
GROUP BY state_class`, func(rows driver.Rows) error {
		var st string
		var jobs uint64
		var gs float64
		if err := rows.Scan(&st, &jobs, &gs); err != nil {
			return err
		}
		by[st] = &StateCount{State: st, Jobs: int64(jobs), GPUTime: gs}
		return nil
	})
	for _, st := range States {
		if c, ok := by[st]; ok && (c.Jobs > 0 || st != "unknown") {
			r.States = append(r.States, *c)
		}
	}
	return err
}

func (l *loader) utilization(ctx context.Context, r *Report) error {
	r.Hours = make([]Period, 24)
	for h := range r.Hours {
		r.Hours[h] = Period{Label: strconv.Itoa(h), Utilization: nan}
	}
	r.Weekdays = make([]Period, 7)
	for d := range r.Weekdays {
		r.Weekdays[d] = Period{Label: weekdayNames[d], Utilization: nan}
	}
	seen := false
	err := l.query(ctx, `SELECT tz, slot_kind, slot, utilization, submissions_per_hour FROM {db}.analytics_utilization
WHERE window_id = ? AND cluster = ? AND scope = 'cluster'`, func(rows driver.Rows) error {
		var tz, kind string
		var slot uint8
		var util, perHour float64
		if err := rows.Scan(&tz, &kind, &slot, &util, &perHour); err != nil {
			return err
		}
		seen = true
		r.timeZone = tz
		switch {
		case kind == "hour_of_day" && slot < 24:
			r.Hours[slot].Utilization, r.Hours[slot].Submissions = util, perHour
		case kind == "day_of_week" && slot >= 1 && slot <= 7:
			r.Weekdays[slot-1].Utilization, r.Weekdays[slot-1].Submissions = util, perHour*24
		}
		return nil
	})
	if !seen {
		r.Hours, r.Weekdays = nil, nil
	}
	return err
}

func (l *loader) capacity(ctx context.Context, r *Report) error {
	return l.query(ctx, `SELECT gpus, source FROM {db}.analytics_capacity WHERE window_id = ? AND cluster = ? AND vc = ''`, func(rows driver.Rows) error {
		var gpus uint32
		if err := rows.Scan(&gpus, &r.CapacitySource); err != nil {
			return err
		}
		r.Capacity = float64(gpus)
		return nil
	})
}

func (l *loader) heatmap(ctx context.Context, r *Report) error {
	for d := range r.HourWeekday {
		for h := range r.HourWeekday[d] {
			r.HourWeekday[d][h] = nan
		}
	}
	tz := r.timeZone
	if tz == "" {
		tz = "UTC"
	}
	// Each hour weighs by its seconds in [window_start, computed_until), as
	// in analytics_utilization: the first hour may begin before the window
	// (its zone's hours need not be whole UTC hours), and the last of an
	// open window end at computed_until.
	return l.query(ctx, `SELECT toDayOfWeek(toDate(hour_start, ?)) AS d, toHour(hour_start, ?) AS h, sum(busy_gpus * secs) / sum(capacity * secs)
FROM (
	SELECT hour_start, busy_gpus, capacity,
		least(toUInt32(hour_start) + 3600, (SELECT toUInt32(max(computed_until)) FROM {db}.analytics_runs FINAL WHERE window_id = ? AND job = 'utilization'))
			- greatest(toUInt32(hour_start), toUInt32(window_start)) AS secs
	FROM {db}.analytics_utilization_hourly
	WHERE window_id = ? AND cluster = ? AND scope = 'cluster' AND capacity > 0
)
GROUP BY d, h`, func(rows driver.Rows) error {
		var d, h uint8
		var util float64
		if err := rows.Scan(&d, &h, &util); err != nil {
			return err
		}
		if d >= 1 && d <= 7 && h < 24 {
			r.HourWeekday[d-1][h] = util
		}
		return nil
	}, tz, tz, l.window, l.window, l.cluster)
}

func (l *loader) months(ctx context.Context, r *Report) error {
	idx := map[string]int{}
	return l.query(ctx, `SELECT toString(month_start), gpu_class, jobs, gpu_seconds FROM {db}.analytics_monthly
WHERE window_id = ? AND cluster = ? AND scope = 'cluster' ORDER BY month_start, gpu_class`, func(rows driver.Rows) error {
		var month, class string
		var jobs uint64
		var gs float64
		if err := rows.Scan(&month, &class, &jobs, &gs); err != nil {
			return err
		}
		month = strings.TrimSuffix(month, "-01")
		i, ok := idx[month]
		if !ok {
			i = len(r.Months)
			idx[month] = i
			r.Months = append(r.Months, Month{Month: month})
		}
		m := &r.Months[i]
		switch class {
		case "single":
			m.SingleGPUJobs, m.SingleGPUTime = int64(jobs), gs
		case "multi":
			m.MultiGPUJobs, m.MultiGPUTime = int64(jobs), gs
		}
		return nil
	})
}

// gpuTypes reads each GPU type's GPU jobs from analytics_summary (scope
// gpu_type), most GPU time first.
func (l *loader) gpuTypes(ctx context.Context, r *Report) error {
	return l.query(ctx, `SELECT scope_value, gpu_job_num, users, avg_gpu_num, med_run_time_gpu, avg_run_time_gpu,
	med_que_time_gpu, avg_que_time_gpu, complete_rate_gpu, fail_rate_gpu,
	complete_gpu_time + cancel_gpu_time + fail_gpu_time + unknown_gpu_time AS gs
FROM {db}.analytics_summary WHERE window_id = ? AND cluster = ? AND scope = 'gpu_type'
ORDER BY gs DESC, scope_value`, func(rows driver.Rows) error {
		var g GPUType
		var jobs, users uint64
		if err := rows.Scan(&g.Name, &jobs, &users, &g.MeanGPUs, &g.MedianRunS, &g.MeanRunS, &g.MedianQueueS, &g.MeanQueueS,
			&g.CompletedShare, &g.FailedShare, &g.GPUTime); err != nil {
			return err
		}
		g.Jobs, g.Users = int64(jobs), int64(users)
		r.GPUTypes = append(r.GPUTypes, g)
		return nil
	})
}

func (l *loader) vcs(ctx context.Context, r *Report) error {
	idx := map[string]int{}
	err := l.query(ctx, `SELECT scope_value, gpu_num, job_num, gpu_job_num, avg_gpu_num, med_run_time_gpu, avg_run_time_gpu, avg_que_time_gpu,
	complete_gpu_time + cancel_gpu_time + fail_gpu_time + unknown_gpu_time AS gs
FROM {db}.analytics_summary WHERE window_id = ? AND cluster = ? AND scope = 'vc'
ORDER BY gs DESC, scope_value`, func(rows driver.Rows) error {
		var v VC
		var capacity uint32
		var jobs, gpuJobs uint64
		if err := rows.Scan(&v.Name, &capacity, &jobs, &gpuJobs, &v.MeanGPUs, &v.MedianRunS, &v.MeanRunS, &v.MeanQueueS, &v.GPUTime); err != nil {
			return err
		}
		v.Capacity, v.Jobs, v.GPUJobs = float64(capacity), int64(jobs), int64(gpuJobs)
		v.UtilMean, v.UtilP50, v.UtilP90 = nan, nan, nan
		idx[v.Name] = len(r.VCs)
		r.VCs = append(r.VCs, v)
		return nil
	})
	if err != nil {
		return err
	}
	return l.query(ctx, `SELECT scope_value, capacity, util_mean, util_p50, util_p90 FROM {db}.analytics_utilization_dist
WHERE window_id = ? AND cluster = ? AND scope = 'vc'`, func(rows driver.Rows) error {
		var name string
		var capacity uint32
		var mean, p50, p90 float64
		if err := rows.Scan(&name, &capacity, &mean, &p50, &p90); err != nil {
			return err
		}
		if i, ok := idx[name]; ok {
			v := &r.VCs[i]
			v.UtilMean, v.UtilP50, v.UtilP90 = mean, p50, p90
			if v.Capacity == 0 {
				v.Capacity = float64(capacity)
			}
		}
		return nil
	})
}

func (l *loader) gpuCounts(ctx context.Context, r *Report) error {
	return l.query(ctx, `SELECT gpus, jobs, gpu_seconds FROM {db}.analytics_gpu_count
WHERE window_id = ? AND cluster = ? AND scope = 'cluster' ORDER BY gpus`, func(rows driver.Rows) error {
		var gpus uint32
		var jobs uint64
		var gs float64
		if err := rows.Scan(&gpus, &jobs, &gs); err != nil {
			return err
		}
		r.GPUCounts = append(r.GPUCounts, GPUCount{GPUs: int64(gpus), Jobs: int64(jobs), GPUTime: gs})
		return nil
	})
}

// bucketLabel names a GPU-count bucket (the smallest power of two ≥ the
// job's GPUs): 1, 2, 3-4, 5-8, …
func bucketLabel(b uint32) string {
	if b <= 2 {
		return strconv.FormatUint(uint64(b), 10)
	}
	return strconv.FormatUint(uint64(b/2+1), 10) + "-" + strconv.FormatUint(uint64(b), 10)
}

func (l *loader) stateByGPUs(ctx context.Context, r *Report) error {
	idx := map[uint32]int{}
	return l.query(ctx, `SELECT gpu_bucket, state_class, jobs FROM {db}.analytics_state_by_gpus
WHERE window_id = ? AND cluster = ? AND scope = 'cluster' ORDER BY gpu_bucket, state_class`, func(rows driver.Rows) error {
		var b uint32
		var st string
		var jobs uint64
		if err := rows.Scan(&b, &st, &jobs); err != nil {
			return err
		}
		i, ok := idx[b]
		if !ok {
			i = len(r.StateByGPUs)
			idx[b] = i
			r.StateByGPUs = append(r.StateByGPUs, GPUStates{Bucket: bucketLabel(b), Jobs: map[string]int64{}})
		}
		r.StateByGPUs[i].Jobs[st] += int64(jobs)
		return nil
	})
}

func (l *loader) concentration(ctx context.Context, r *Report) error {
	return l.query(ctx, `SELECT top_pct, top_users, gpu_time_share FROM {db}.analytics_user_concentration
WHERE window_id = ? AND cluster = ? AND scope = 'cluster' ORDER BY top_pct`, func(rows driver.Rows) error {
		var pct uint8
		var top uint64
		var share float64
		if err := rows.Scan(&pct, &top, &share); err != nil {
			return err
		}
		r.Concentration = append(r.Concentration, Concentration{Pct: float64(pct) / 100, Users: int64(top), Share: share})
		return nil
	})
}

// curvePoints caps the points of the user curve; with more users it keeps
// every k-th (and the last).
const curvePoints = 400

func (l *loader) users(ctx context.Context, r *Report) error {
	var shares []float64
	err := l.query(ctx, `SELECT gpu_time_share FROM {db}.analytics_users
WHERE window_id = ? AND cluster = ? AND scope = 'cluster' ORDER BY gpu_time_rank, user`, func(rows driver.Rows) error {
		var s float64
		if err := rows.Scan(&s); err != nil {
			return err
		}
		shares = append(shares, s)
		return nil
	})
	if err != nil {
		return err
	}
	if slices.ContainsFunc(shares, math.IsNaN) {
		shares = nil // no GPU time to share out: no curve
	}
	step := max(1, len(shares)/curvePoints)
	cum := 0.0
	for i, s := range shares {
		cum += s
		if (i+1)%step == 0 || i == len(shares)-1 {
			r.UserCurve = append(r.UserCurve, Point{float64(i+1) / float64(len(shares)), math.Min(cum, 1)})
		}
	}
	// The share of the GPU jobs' queuing delay (analytics_users' queue_share
	// counts every job's): each user's, and the cluster's, GPU jobs' delay
	// summed back from their count and mean in analytics_duration.
	return l.query(ctx, `SELECT user, jobs, gpu_seconds, gpu_time_share,
	q / (SELECT sum(jobs * mean_s) FROM {db}.analytics_duration
		WHERE window_id = ? AND cluster = ? AND scope = 'cluster' AND job_class = 'gpu' AND metric = 'queue') AS gpu_queue_share,
	complete_rate
FROM (
	SELECT user, jobs, gpu_seconds, gpu_time_share, gpu_time_rank, complete_rate FROM {db}.analytics_users
	WHERE window_id = ? AND cluster = ? AND scope = 'cluster'
) AS u
ANY LEFT JOIN (
	SELECT scope_value AS user, jobs * mean_s AS q FROM {db}.analytics_duration
	WHERE window_id = ? AND cluster = ? AND scope = 'user' AND job_class = 'gpu' AND metric = 'queue'
) AS d USING user
ORDER BY gpu_queue_share DESC, gpu_time_rank, user LIMIT `+strconv.Itoa(figureUsers), func(rows driver.Rows) error {
		var u User
		var jobs uint64
		if err := rows.Scan(&u.Name, &jobs, &u.GPUTime, &u.GPUTimeShare, &u.QueueShare, &u.CompletionRate); err != nil {
			return err
		}
		u.Jobs = int64(jobs)
		r.Users = append(r.Users, u)
		return nil
	}, l.window, l.cluster, l.window, l.cluster, l.window, l.cluster)
}

func (l *loader) telemetry(ctx context.Context, r *Report) error {
	var t *Telemetry
	err := l.query(ctx, `SELECT sampled_jobs, sampled_gpu_hours, util_mean, idle_gpu_hours, energy_kwh, flag_names, flag_jobs
FROM {db}.analytics_efficiency WHERE window_id = ? AND cluster = ? AND scope = 'cluster' AND sampled_jobs > 0`, func(rows driver.Rows) error {
		var jobs uint64
		var names []string
		var counts []uint64
		t = &Telemetry{Flags: map[string]int64{}}
		if err := rows.Scan(&jobs, &t.GPUHours, &t.UtilMean, &t.IdleGPUHours, &t.EnergyKWh, &names, &counts); err != nil {
			return err
		}
		t.Jobs = int64(jobs)
		for i, n := range names {
			if i < len(counts) {
				t.Flags[n] = int64(counts[i])
			}
		}
		return nil
	})
	if err != nil || t == nil {
		return err
	}
	r.Telemetry = t
	return l.query(ctx, `SELECT scope_value, sampled_jobs, sampled_gpu_hours, util_mean, idle_gpu_hours, energy_kwh
FROM {db}.analytics_efficiency WHERE window_id = ? AND cluster = ? AND scope = 'user' AND sampled_jobs > 0
ORDER BY sampled_gpu_hours DESC, scope_value LIMIT `+strconv.Itoa(figureUsers), func(rows driver.Rows) error {
		var u TelemetryUser
		var jobs uint64
		if err := rows.Scan(&u.Name, &jobs, &u.GPUHours, &u.UtilMean, &u.IdleGPUHours, &u.EnergyKWh); err != nil {
			return err
		}
		u.Jobs = int64(jobs)
		t.Users = append(t.Users, u)
		return nil
	})
}

func (l *loader) summary(ctx context.Context, r *Report) error {
	err := l.query(ctx, `SELECT scope, scope_value, gpu_num, job_num, cpu_job_num, gpu_job_num,
	avg_run_time_cpu, avg_run_time_gpu, avg_que_time_cpu, avg_que_time_gpu, avg_gpu_num,
	med_run_time_cpu, med_run_time_gpu, med_que_time_cpu, med_que_time_gpu, med_gpu_num,
	complete_rate, cancel_rate, fail_rate, complete_rate_cpu, cancel_rate_cpu, fail_rate_cpu,
	complete_rate_gpu, cancel_rate_gpu, fail_rate_gpu, complete_gpu_time, cancel_gpu_time, fail_gpu_time
FROM {db}.analytics_summary WHERE window_id = ? AND cluster = ? AND scope IN ('cluster', 'vc')
ORDER BY scope = 'vc', scope_value`, func(rows driver.Rows) error {
		var s Summary
		var scope, value string
		var gpus uint32
		var jobs, cpuJobs, gpuJobs uint64
		if err := rows.Scan(&scope, &value, &gpus, &jobs, &cpuJobs, &gpuJobs,
			&s.AvgRunCPU, &s.AvgRunGPU, &s.AvgQueueCPU, &s.AvgQueueGPU, &s.AvgGPUs,
			&s.MedRunCPU, &s.MedRunGPU, &s.MedQueueCPU, &s.MedQueueGPU, &s.MedGPUs,
			&s.CompleteRate, &s.CancelRate, &s.FailRate, &s.CompleteRateCPU, &s.CancelRateCPU, &s.FailRateCPU,
			&s.CompleteRateGPU, &s.CancelRateGPU, &s.FailRateGPU, &s.CompleteGPUTime, &s.CancelGPUTime, &s.FailGPUTime); err != nil {
			return err
		}
		s.ID = l.cluster
		if scope == "vc" {
			s.ID = "VC " + value
		}
		s.GPUs, s.Jobs, s.CPUJobs, s.GPUJobs = float64(gpus), int64(jobs), int64(cpuJobs), int64(gpuJobs)
		r.Summary = append(r.Summary, s)
		return nil
	})
	return err
}
