-- One row per ended job, jobstats-style, written by ingest's summarizer once
-- the job's GPU samples have had time to arrive. Per-GPU arrays are aligned
-- (gpu_hosts[i], gpu_indexes[i], gpu_util_mean[i], …). Utilization figures are
-- NULL when no sample of the job's GPUs was found (e.g. an imported trace).
-- util_source says which measure the efficiency flags used: 'sm_active' where
-- the GPUs report it (GPM), else 'gpu_util' (a kernel was running). Rewritten
-- summaries replace older ones (version = computation time in ms).
CREATE TABLE IF NOT EXISTS {database}.job_summary (
    cluster String,
    job_id String,
    user String,
    account String,
    partition_name String,
    state String,
    gpus UInt32,
    submit_time DateTime('UTC'),
    start_time DateTime('UTC'),
    end_time DateTime('UTC'),
    elapsed_s UInt32,
    time_limit_s Nullable(UInt32),
    gpu_hours Float64,
    gpu_hosts Array(String),
    gpu_indexes Array(Int32),
    gpu_util_mean Array(Float32),
    gpu_util_max Array(Float32),
    samples UInt64,
    util_mean Nullable(Float32),
    util_max Nullable(Float32),
    sm_active_mean Nullable(Float32),
    util_source String,
    fb_used_max_bytes Nullable(UInt64),
    power_mean_w Nullable(Float32),
    energy_j Nullable(Float64),
    zero_util_gpu_hours Nullable(Float64),
    flags Array(String),
    computed_at DateTime('UTC'),
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(end_time)
ORDER BY (cluster, job_id);
