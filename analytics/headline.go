package analytics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ErrNoResults: the window has not been characterized (no run wrote its
// headline), or the cluster had no jobs in it.
var ErrNoResults = errors.New("analytics: no results for the window")

// Headline is the figures `heliostat report --json` prints for one cluster
// and window (analytics_headline).
type Headline struct {
	Cluster string `json:"cluster"`
	Window  string `json:"window"`
	// Jobs submitted in the window; GPUJobs of them asked for GPUs (for an
	// SWF trace, processors); Users submitted them.
	Jobs    uint64 `json:"jobs"`
	GPUJobs uint64 `json:"gpu_jobs"`
	Users   uint64 `json:"users"`
	// EndedJobs have a final state; the shares are of them.
	EndedJobs uint64 `json:"ended_jobs"`
	// StateShare is the share of ended jobs by state class, keys completed,
	// cancelled, failed, and unknown where some job's outcome is unknown.
	StateShare map[string]float64 `json:"state_share"`
	// GPUTimeStateShare is the share of GPU time (GPUs × run time) by the
	// same classes.
	GPUTimeStateShare map[string]float64 `json:"gpu_time_state_share"`
	// GPUSeconds is the GPU time of the ended jobs with a known run time.
	GPUSeconds float64 `json:"gpu_seconds"`
	// DurationJobs have a known run time; DurationMedianS is their exact
	// median (the mean of the two middle values for an even count).
	DurationJobs    uint64  `json:"duration_jobs"`
	DurationMedianS float64 `json:"duration_median_s"`
	// Top5PctUsersGPUTimeShare is the share of GPU time of the ⌈5% × Users⌉
	// users with the most.
	Top5PctUsersGPUTimeShare float64 `json:"top5pct_users_gpu_time_share"`
}

// MarshalJSON writes h with NaN figures (nothing to take a median or share
// of, e.g. run times of a trace that gives none) as null: JSON has no NaN.
func (h Headline) MarshalJSON() ([]byte, error) {
	type plainHeadline Headline
	num := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	nums := func(m map[string]float64) map[string]*float64 {
		out := make(map[string]*float64, len(m))
		for k, v := range m {
			out[k] = num(v)
		}
		return out
	}
	return json.Marshal(struct {
		plainHeadline
		StateShare               map[string]*float64 `json:"state_share"`
		GPUTimeStateShare        map[string]*float64 `json:"gpu_time_state_share"`
		GPUSeconds               *float64            `json:"gpu_seconds"`
		DurationMedianS          *float64            `json:"duration_median_s"`
		Top5PctUsersGPUTimeShare *float64            `json:"top5pct_users_gpu_time_share"`
	}{plainHeadline(h), nums(h.StateShare), nums(h.GPUTimeStateShare), num(h.GPUSeconds), num(h.DurationMedianS), num(h.Top5PctUsersGPUTimeShare)})
}

// ReadHeadlines returns the headline of every cluster characterized for
// window w, by cluster name; ErrNoResults when there is none.
func ReadHeadlines(ctx context.Context, conn driver.Conn, database string, w Window) ([]Headline, error) {
	return readHeadlines(ctx, conn, database, w, "", false)
}

// ReadHeadline returns the headline of one cluster for window w;
// ErrNoResults when it has none.
func ReadHeadline(ctx context.Context, conn driver.Conn, database string, w Window, cluster string) (*Headline, error) {
	hs, err := readHeadlines(ctx, conn, database, w, cluster, true)
	if err != nil {
		return nil, err
	}
	return &hs[0], nil
}

func readHeadlines(ctx context.Context, conn driver.Conn, database string, w Window, cluster string, one bool) ([]Headline, error) {
	if !identifier.MatchString(database) {
		return nil, fmt.Errorf("analytics: database %q is not a plain identifier", database)
	}
	q := `SELECT cluster, jobs, gpu_jobs, users, ended_jobs,
		completed_share, cancelled_share, failed_share, unknown_share,
		gpu_seconds, completed_gpu_time_share, cancelled_gpu_time_share, failed_gpu_time_share, unknown_gpu_time_share,
		duration_jobs, duration_median_s, top5pct_users_gpu_time_share
	FROM ` + database + `.analytics_headline
	WHERE window_id = ? AND (? = 0 OR cluster = ?)
	ORDER BY cluster`
	flag := uint8(0)
	if one {
		flag = 1
	}
	rows, err := conn.Query(ctx, q, w.ID(), flag, cluster)
	if err != nil {
		return nil, fmt.Errorf("analytics: read headline: %w", err)
	}
	defer rows.Close()
	var out []Headline
	for rows.Next() {
		h := Headline{Window: w.ID()}
		var s, t [4]float64
		if err := rows.Scan(&h.Cluster, &h.Jobs, &h.GPUJobs, &h.Users, &h.EndedJobs,
			&s[0], &s[1], &s[2], &s[3],
			&h.GPUSeconds, &t[0], &t[1], &t[2], &t[3],
			&h.DurationJobs, &h.DurationMedianS, &h.Top5PctUsersGPUTimeShare); err != nil {
			return nil, fmt.Errorf("analytics: read headline: %w", err)
		}
		h.StateShare, h.GPUTimeStateShare = shares(s, s[3] > 0), shares(t, s[3] > 0)
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("analytics: read headline: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w %s (cluster %q)", ErrNoResults, w.ID(), cluster)
	}
	return out, nil
}

// shares maps the four class shares to their keys; unknown only where some
// ended job's outcome is unknown.
func shares(v [4]float64, unknown bool) map[string]float64 {
	m := map[string]float64{"completed": v[0], "cancelled": v[1], "failed": v[2]}
	if unknown {
		m["unknown"] = v[3]
	}
	return m
}

// WindowRun is a window that has been characterized (analytics_runs).
type WindowRun struct {
	Window        Window
	ComputedUntil time.Time // the data it saw ends here (< Window.Until for a window still open)
	RunAt         time.Time // the runner's clock at its latest job
	Jobs          []string  // jobs that ran for it
}

// ReadWindows lists the characterized windows, the latest start first.
func ReadWindows(ctx context.Context, conn driver.Conn, database string) ([]WindowRun, error) {
	if !identifier.MatchString(database) {
		return nil, fmt.Errorf("analytics: database %q is not a plain identifier", database)
	}
	rows, err := conn.Query(ctx, `SELECT window_start, window_end, min(computed_until), max(run_at), groupArray(job)
		FROM `+database+`.analytics_runs FINAL
		GROUP BY window_start, window_end
		ORDER BY window_start DESC, window_end DESC`)
	if err != nil {
		return nil, fmt.Errorf("analytics: read windows: %w", err)
	}
	defer rows.Close()
	var out []WindowRun
	for rows.Next() {
		var wr WindowRun
		if err := rows.Scan(&wr.Window.Since, &wr.Window.Until, &wr.ComputedUntil, &wr.RunAt, &wr.Jobs); err != nil {
			return nil, fmt.Errorf("analytics: read windows: %w", err)
		}
		wr.Window.Since, wr.Window.Until = wr.Window.Since.UTC(), wr.Window.Until.UTC()
		out = append(out, wr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("analytics: read windows: %w", err)
	}
	return out, nil
}

// DataSpan returns the whole days (UTC) that hold the submit times of every
// job run in the job_runs table (a requeued job's earlier runs included), or
// of cluster's when cluster is not "": the default window of an on-demand
// run. ErrNoResults when there are none.
func DataSpan(ctx context.Context, conn driver.Conn, database, cluster string) (Window, error) {
	if !identifier.MatchString(database) {
		return Window{}, fmt.Errorf("analytics: database %q is not a plain identifier", database)
	}
	var (
		n        uint64
		min, max time.Time
	)
	if err := conn.QueryRow(ctx, "SELECT count(), min(submit_time), max(submit_time) FROM "+database+".job_runs WHERE ? = '' OR cluster = ?", cluster, cluster).Scan(&n, &min, &max); err != nil {
		return Window{}, fmt.Errorf("analytics: span of the jobs: %w", err)
	}
	if n == 0 {
		return Window{}, fmt.Errorf("%w: the job_runs table is empty", ErrNoResults)
	}
	since := min.UTC().Truncate(24 * time.Hour)
	until := max.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	return Window{Since: since, Until: until}, nil
}
