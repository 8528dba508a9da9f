-- Efficiency from telemetry (analytics/queries/efficiency.sql): the
-- jobstats-style job summaries (job_summary, read with FINAL) of the jobs
-- submitted in the window (see 0014), per scope 'cluster', 'vc' or 'user'.
-- Per-job figures stay in job_summary; this holds their aggregates.
--
-- analytics_efficiency: summaries, those with GPU samples (sampled_jobs),
-- their GPU hours; mean GPU utilization weighted by GPU hours (util_mean, %)
-- and its quantiles over jobs (util_p10..p90); SM activity (ratio 0-1) where
-- the GPUs report it (sm_jobs of them); idle-allocated GPU hours (GPUs at 0%
-- for the whole job: zero_util_gpu_hours) and their share of the sampled GPU
-- hours; energy in kWh, in all and per summarized job; jobs carrying each
-- jobstats flag (low_util: mean utilization under 15%, idle_allocated,
-- poor_time_limit: ran under 10% of its limit, no_samples) and every flag
-- with its count in flag_names / flag_jobs.
CREATE TABLE IF NOT EXISTS {database}.analytics_efficiency (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    jobs UInt64,
    sampled_jobs UInt64,
    gpu_hours Float64,
    sampled_gpu_hours Float64,
    util_mean Float64,
    util_p10 Float64,
    util_p50 Float64,
    util_p90 Float64,
    sm_jobs UInt64,
    sm_active_mean Float64,
    idle_gpu_hours Float64,
    idle_share Float64,
    energy_kwh Float64,
    energy_kwh_per_job Float64,
    low_util_jobs UInt64,
    idle_allocated_jobs UInt64,
    poor_time_limit_jobs UInt64,
    no_samples_jobs UInt64,
    flag_names Array(String),
    flag_jobs Array(UInt64)
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value);
