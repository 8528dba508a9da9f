-- Job characterization results (analytics/queries/jobs.sql, summary.sql).
-- Keyed by window (see 0014); a window's jobs are those submitted in
-- [window_start, window_end). Breakdowns carry scope = 'cluster' (scope_value
-- ''), 'vc' (the Slurm partition / trace VC) or 'user'. job_class is 'all',
-- 'gpu' (GPUs > 0) or 'cpu'. GPU counts: the job's GPUs; for a trace that
-- gives none (SWF) its processors play the role of GPUs. Final states are
-- mapped to state_class: completed (COMPLETED), cancelled (CANCELLED,
-- PREEMPTED), failed (FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY; Helios counts
-- TIMEOUT and NODE_FAIL as failed), unknown (UNKNOWN: the source did not say).
-- Run time = end - start, queuing delay = start - submit, both in seconds,
-- known only where the source gave the times. GPU time = GPUs x run time
-- (GPU-seconds). Quantiles are exact: linear interpolation between the closest
-- ranks of the sorted values (numpy's default), so a median of an even count
-- is the mean of the two middle values. NaN where there is nothing to average.

-- analytics_summary: the columns of Helios' cluster summary
-- (helios_cluster_summary.csv) per cluster, VC and user, plus what Helios
-- leaves out (unknown states, unfinished jobs, users). Rates are shares of the
-- ended jobs; *_gpu_time are GPU-seconds of ended GPU jobs; gpu_num is the
-- capacity (analytics_capacity; 0 for a user).
CREATE TABLE IF NOT EXISTS {database}.analytics_summary (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    gpu_num UInt32,
    job_num UInt64,
    cpu_job_num UInt64,
    gpu_job_num UInt64,
    avg_run_time_cpu Float64,
    avg_run_time_gpu Float64,
    avg_que_time_cpu Float64,
    avg_que_time_gpu Float64,
    avg_gpu_num Float64,
    med_run_time_cpu Float64,
    med_run_time_gpu Float64,
    med_que_time_cpu Float64,
    med_que_time_gpu Float64,
    med_gpu_num Float64,
    complete_rate Float64,
    cancel_rate Float64,
    fail_rate Float64,
    unknown_rate Float64,
    complete_rate_cpu Float64,
    cancel_rate_cpu Float64,
    fail_rate_cpu Float64,
    unknown_rate_cpu Float64,
    complete_rate_gpu Float64,
    cancel_rate_gpu Float64,
    fail_rate_gpu Float64,
    unknown_rate_gpu Float64,
    complete_gpu_time Float64,
    cancel_gpu_time Float64,
    fail_gpu_time Float64,
    unknown_gpu_time Float64,
    ended_job_num UInt64,
    unfinished_job_num UInt64,
    users UInt64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value);

-- analytics_headline: one row per cluster and window, the figures `heliostat
-- report --json` prints (analytics.ReadHeadline). jobs: submitted in the
-- window; users: distinct users among them; *_share: shares of the ended jobs
-- by state_class; *_gpu_time_share: shares of their GPU time;
-- duration_median_s: exact median run time of the jobs with a known run time
-- (duration_jobs of them); top5pct_users_gpu_time_share: GPU time of the
-- ceil(5% x users) users with the most, over all GPU time.
CREATE TABLE IF NOT EXISTS {database}.analytics_headline (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    jobs UInt64,
    gpu_jobs UInt64,
    users UInt64,
    ended_jobs UInt64,
    completed_share Float64,
    cancelled_share Float64,
    failed_share Float64,
    unknown_share Float64,
    gpu_seconds Float64,
    completed_gpu_time_share Float64,
    cancelled_gpu_time_share Float64,
    failed_gpu_time_share Float64,
    unknown_gpu_time_share Float64,
    duration_jobs UInt64,
    duration_median_s Float64,
    top5pct_users_gpu_time_share Float64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY cluster;

-- analytics_state: ended jobs and their GPU time by final state, per scope
-- and job_class; job_share and gpu_time_share are shares of the scope's ended
-- jobs of that class (sum them by state_class for Helios' three classes).
CREATE TABLE IF NOT EXISTS {database}.analytics_state (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    job_class String,
    state_class String,
    state String,
    jobs UInt64,
    gpu_seconds Float64,
    job_share Float64,
    gpu_time_share Float64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value, job_class, state_class, state);

-- analytics_duration: distribution of run time (metric 'run') and queuing
-- delay ('queue') per scope and job_class, over the jobs where it is known.
CREATE TABLE IF NOT EXISTS {database}.analytics_duration (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    job_class String,
    metric String,
    jobs UInt64,
    mean_s Float64,
    min_s Float64,
    p10_s Float64,
    p25_s Float64,
    p50_s Float64,
    p75_s Float64,
    p90_s Float64,
    p95_s Float64,
    p99_s Float64,
    max_s Float64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value, job_class, metric);

-- analytics_duration_cdf: the CDF of the same, per cluster and VC, at fixed
-- points le_s = 10^(k/10) s, k = 0..70 (1 s .. 10^7 s, ten a decade):
-- jobs_le of jobs (cdf = jobs_le / jobs) had a value <= le_s.
CREATE TABLE IF NOT EXISTS {database}.analytics_duration_cdf (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    job_class String,
    metric String,
    le_s Float64,
    jobs_le UInt64,
    jobs UInt64,
    cdf Float64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value, job_class, metric, le_s);
