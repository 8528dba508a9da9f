-- Live duration predictions (predictor/live): one row per job, written once
-- while the job is pending or running (after_end = 1 when the predictor first
-- saw the job after it had already ended). predicted_s is the point estimate,
-- [lower_s, upper_s] its 80% interval, gpu_service_s = predicted_s ×
-- max(gpus, 1), the key of shortest-predicted-service-first ordering. The
-- features behind a prediction use only jobs that had ended before the job's
-- submit time. A job predicted twice (a retried insert, two predictor
-- replicas) collapses to one row per (cluster, job_id); the first prediction
-- wins, because version = 2^63 - predicted_at in ms. Query with FINAL.
CREATE TABLE IF NOT EXISTS {database}.predictions (
    cluster String,
    job_id String,
    user String,
    partition_name String,
    gpus UInt32,
    time_limit_s Nullable(UInt32),
    submit_time DateTime('UTC'),
    model_version UInt64,
    segment String,
    fitted UInt8,
    predicted_s Float64,
    lower_s Float64,
    upper_s Float64,
    gpu_service_s Float64,
    after_end UInt8,
    predicted_at DateTime('UTC'),
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(submit_time)
ORDER BY (cluster, job_id);
