-- The error of each live prediction once its job has ended (predictor/live):
-- one row per predicted job. ran = 0 for a job that never ran (cancelled while
-- pending, or under a second): its error fields are 0 and accuracy queries
-- leave it out. log_ratio = ln(max(predicted_s, 1) / actual_s) (> 0: the
-- prediction was too long); within_2x is max(p/y, y/p) < 2 as in the offline
-- backtest; within_interval is lower_s <= actual_s <= upper_s. A rewritten
-- outcome replaces the older one (version = recorded_at in ms). Accuracy
-- over time, hour by hour:
--   SELECT toStartOfHour(end_time) AS hour, count() AS jobs, avg(within_2x),
--          avg(abs_log_error), avg(within_interval), avg(abs_error_s)
--   FROM prediction_outcomes FINAL WHERE ran = 1 AND after_end = 0
--   GROUP BY hour ORDER BY hour
CREATE TABLE IF NOT EXISTS {database}.prediction_outcomes (
    cluster String,
    job_id String,
    user String,
    gpus UInt32,
    state String,
    submit_time DateTime('UTC'),
    start_time Nullable(DateTime('UTC')),
    end_time DateTime('UTC'),
    model_version UInt64,
    predicted_at DateTime('UTC'),
    after_end UInt8,
    ran UInt8,
    predicted_s Float64,
    lower_s Float64,
    upper_s Float64,
    actual_s Float64,
    abs_error_s Float64,
    log_ratio Float64,
    abs_log_error Float64,
    within_2x UInt8,
    within_interval UInt8,
    recorded_at DateTime('UTC'),
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(submit_time)
ORDER BY (cluster, job_id);
