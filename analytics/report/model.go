// Package report renders heliostat's characterization of a cluster's jobs and
// users — the figures of the Helios study (SC'21), computed from the analytics
// result tables — as one self-contained HTML page: inline SVG figures, inline
// CSS, no script, nothing loaded from the network. Load reads a Report from
// ClickHouse; Render writes the page; Handler serves the latest one.
package report

import (
	"math"
	"time"
)

// States are the final states the report shows, in this order. Helios counts
// TIMEOUT and NODE_FAIL as failed; unknown is a trace that does not say.
var States = []string{"completed", "cancelled", "failed", "unknown"}

// Report is everything the page shows. Shares are fractions in [0, 1], times
// in seconds, GPU time in GPU-seconds. Empty sections are left out of the
// page (Telemetry nil: no GPU samples were attributed to jobs).
type Report struct {
	Title     string    // page title
	Source    string    // where the jobs came from: a trace file or a ClickHouse database
	Clusters  []string  // clusters covered
	From, To  time.Time // the window: jobs submitted in [From, To)
	Generated time.Time // when the page was rendered
	// Notes say what the reader must know to read the figures right (e.g.
	// what was assumed of a trace); shown under the title.
	Notes []string

	Headline Headline

	// DurationCDF is the run-time distribution of GPU jobs, one series per
	// group ("all GPU jobs", then each VC).
	DurationCDF []CDF
	// RunP50S and RunP90S are the median and 90th percentile of the run
	// time of GPU jobs; NaN unknown.
	RunP50S, RunP90S float64
	// States are job and GPU-time counts by final state, in States order
	// (unknown only when present).
	States []StateCount

	// Hours are utilization and submissions by hour of day (0..23, 24 rows).
	Hours []Period
	// Weekdays are utilization and submissions by day of week, Monday first
	// (7 rows).
	Weekdays []Period
	// HourWeekday is the mean utilization by day of week (Monday first) and
	// hour of day; NaN where the window has no such hour.
	HourWeekday [7][24]float64
	// Capacity is the cluster's GPUs that utilization divides by, and
	// CapacitySource where that figure came from (analytics_capacity:
	// config, config_vcs, inventory, peak); 0 and "" unknown.
	Capacity       float64
	CapacitySource string
	// timeZone is the zone of the hour and weekday slots ("" for UTC).
	timeZone string

	// Months are single- versus multi-GPU jobs by month of submission.
	Months []Month
	// VCs are the per-VC figures, largest first.
	VCs []VC
	// GPUTypes are the per-GPU-type figures of the GPU jobs whose type the
	// scheduler recorded, most GPU time first; none for a trace.
	GPUTypes []GPUType
	// GPUCounts are jobs and GPU time by the job's GPU count.
	GPUCounts []GPUCount
	// StateByGPUs are final states by GPU-count bucket ("1", "2-4", …).
	StateByGPUs []GPUStates

	// Concentration is the share of GPU time used by the top p of users
	// (top k = ⌈p × users⌉), p ascending; UserCurve is the whole curve
	// (users ranked by GPU time, cumulative share).
	Concentration []Concentration
	UserCurve     []Point
	// Users are the heaviest users by GPU time with their share of all
	// queuing delay and their completion rate.
	Users []User

	Telemetry *Telemetry
	// Summary is one row per cluster with the columns of the Helios
	// cluster summary.
	Summary []Summary
}

// Headline holds the key figures (the JSON of `heliostat report --json`).
// A share is NaN where there is nothing to share out (no ended job, no GPU
// time): the page shows "–".
type Headline struct {
	Jobs              int64              `json:"jobs"`
	GPUJobs           int64              `json:"gpu_jobs"`
	Users             int64              `json:"users"`
	StateShare        map[string]float64 `json:"state_share"`
	GPUTimeStateShare map[string]float64 `json:"gpu_time_state_share"`
	// DurationMedianS is the median run time of every job with a known
	// run time, CPU jobs included, as --json's duration_median_s; the page
	// shows the GPU jobs' (Report.RunP50S).
	DurationMedianS float64 `json:"duration_median_s"`
	Top5pctGPUTime  float64 `json:"top5pct_users_gpu_time_share"`
}

// Point is one point of a curve.
type Point struct{ X, Y float64 }

// CDF is a cumulative distribution: Points ascending in X, Y the fraction
// of items ≤ X.
type CDF struct {
	Name   string
	Points []Point
}

// StateCount is the jobs and GPU time that ended in one state.
type StateCount struct {
	State   string
	Jobs    int64
	GPUTime float64
}

// Period is one hour of day or day of week.
type Period struct {
	Label       string
	Utilization float64 // GPUs held by running jobs ÷ capacity, mean over the window; NaN unknown
	Submissions float64 // jobs submitted in this period, mean per occurrence (per day)
}

// Month is one month of submissions.
type Month struct {
	Month                       string // "2020-09"
	SingleGPUJobs, MultiGPUJobs int64
	SingleGPUTime, MultiGPUTime float64
}

// VC is one virtual cluster (partition, queue).
type VC struct {
	Name          string
	Capacity      float64 // GPUs; 0 unknown
	Jobs, GPUJobs int64
	MeanGPUs      float64 // mean GPU demand of GPU jobs
	MedianRunS    float64
	MeanRunS      float64
	MeanQueueS    float64
	GPUTime       float64
	UtilMean      float64 // NaN unknown
	UtilP50       float64 // median hourly utilization; NaN unknown
	UtilP90       float64
}

// GPUType is the GPU jobs of one GPU type (as the scheduler recorded it:
// the type asked for, or given; "a100,v100" for a job given two).
type GPUType struct {
	Name           string
	Jobs, Users    int64
	MeanGPUs       float64 // mean GPUs per job
	MedianRunS     float64 // NaN unknown
	MeanRunS       float64
	MedianQueueS   float64
	MeanQueueS     float64
	CompletedShare float64 // of the ended jobs; NaN none ended
	FailedShare    float64
	GPUTime        float64 // GPU-seconds of the ended jobs
}

// GPUCount is the jobs and GPU time of jobs with one GPU count.
type GPUCount struct {
	GPUs    int64
	Jobs    int64
	GPUTime float64
}

// GPUStates counts final states within one GPU-count bucket.
type GPUStates struct {
	Bucket string
	Jobs   map[string]int64 // by state
}

// Concentration is the share of GPU time of the top Pct of users.
type Concentration struct {
	Pct   float64 // 0.01, 0.05, …
	Users int64   // ⌈Pct × users⌉
	Share float64 // NaN: no GPU time
}

// User is one user's figures.
type User struct {
	Name           string
	Jobs           int64
	GPUTime        float64
	GPUTimeShare   float64 // NaN: no GPU time
	QueueShare     float64 // of all queuing delay of GPU jobs; NaN: none
	CompletionRate float64
}

// Telemetry is what GPU samples add: efficiency of the jobs that had them.
type Telemetry struct {
	Jobs         int64
	GPUHours     float64
	UtilMean     float64 // GPU-hour weighted mean utilization, %
	IdleGPUHours float64 // GPU hours with zero utilization on allocated GPUs
	EnergyKWh    float64
	Flags        map[string]int64
	Users        []TelemetryUser // heaviest by GPU hours
}

// TelemetryUser is one user's efficiency.
type TelemetryUser struct {
	Name         string
	Jobs         int64
	GPUHours     float64
	UtilMean     float64 // %
	IdleGPUHours float64
	EnergyKWh    float64
}

// Summary is a row of the Helios cluster summary
// (helios_cluster_summary.csv): run and queue times in seconds, rates as
// fractions, GPU time in GPU-seconds.
type Summary struct {
	ID                                             string
	GPUs                                           float64 // capacity; 0 unknown
	Jobs, CPUJobs, GPUJobs                         int64
	AvgRunCPU, AvgRunGPU, AvgQueueCPU, AvgQueueGPU float64
	AvgGPUs                                        float64
	MedRunCPU, MedRunGPU, MedQueueCPU, MedQueueGPU float64
	MedGPUs                                        float64
	CompleteRate, CancelRate, FailRate             float64
	CompleteRateCPU, CancelRateCPU, FailRateCPU    float64
	CompleteRateGPU, CancelRateGPU, FailRateGPU    float64
	CompleteGPUTime, CancelGPUTime, FailGPUTime    float64
}

// NaN is the "unknown" of float figures.
var nan = math.NaN()
