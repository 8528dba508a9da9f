-- Results by GPU count (analytics/queries/gpus.sql). Keyed by window (see
-- 0014); the window's jobs, scope 'cluster' or 'vc', GPU counts and
-- state_class as in 0015. Shares of GPU time count ended jobs with a known
-- run time.

-- analytics_monthly: per month_start (the first day, in time zone tz) of submission,
-- GPU jobs split into single-GPU (gpu_class 'single') and multi-GPU
-- ('multi'): jobs and GPU-seconds, and their shares of the month's GPU jobs
-- and GPU time.
CREATE TABLE IF NOT EXISTS {database}.analytics_monthly (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    tz String,
    month_start Date,
    gpu_class String,
    jobs UInt64,
    gpu_seconds Float64,
    job_share Float64,
    gpu_time_share Float64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value, month_start, gpu_class);

-- analytics_gpu_count: GPU jobs by their exact GPU count: jobs, GPU-seconds,
-- shares, and the cumulative shares up to this count (the CDFs of GPU demand
-- by jobs and by GPU time).
CREATE TABLE IF NOT EXISTS {database}.analytics_gpu_count (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    gpus UInt32,
    jobs UInt64,
    gpu_seconds Float64,
    job_share Float64,
    gpu_time_share Float64,
    jobs_cdf Float64,
    gpu_time_cdf Float64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value, gpus);

-- analytics_state_by_gpus: ended GPU jobs by GPU-count bucket (gpu_bucket =
-- the smallest power of two >= GPUs: 1, 2, 4 = 3-4 GPUs, 8 = 5-8, …) and
-- state_class: jobs and GPU-seconds, and their shares within the bucket.
CREATE TABLE IF NOT EXISTS {database}.analytics_state_by_gpus (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    gpu_bucket UInt32,
    state_class String,
    jobs UInt64,
    gpu_seconds Float64,
    job_share Float64,
    gpu_time_share Float64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value, gpu_bucket, state_class);
