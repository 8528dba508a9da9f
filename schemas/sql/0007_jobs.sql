-- The current state of every job: one row per (cluster, job_id) once merged,
-- the latest event winning (version orders by event time, then SUBMIT <
-- UPDATE < START < END). Partitioned by submit month, which never changes for
-- a job, so that all of a job's rows meet in one partition. Query with FINAL
-- (or argMax by version) for exact answers.
CREATE TABLE IF NOT EXISTS {database}.jobs (
    cluster String,
    job_id String,
    source String,
    array_job_id String,
    array_task_id Nullable(Int64),
    job_name String,
    user String,
    uid Nullable(Int64),
    group_name String,
    account String,
    partition_name String,
    qos String,
    state String,
    exit_code Nullable(Int32),
    priority Nullable(Int64),
    submit_time DateTime('UTC'),
    eligible_time Nullable(DateTime('UTC')),
    start_time Nullable(DateTime('UTC')),
    end_time Nullable(DateTime('UTC')),
    time_limit_s Nullable(UInt32),
    node_count Nullable(UInt32),
    nodes Array(String),
    cpus Nullable(UInt32),
    gpus Nullable(UInt32),
    gpu_type String,
    mem_req_bytes Nullable(UInt64),
    command_hash String,
    work_dir String,
    last_event String,
    updated_at DateTime('UTC'),
    inserted_at DateTime('UTC'),
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(submit_time)
ORDER BY (cluster, job_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.jobs_mv TO {database}.jobs AS
SELECT
    cluster, job_id, source, array_job_id, array_task_id, job_name, user, uid,
    group_name, account, partition_name, qos, state, exit_code, priority,
    submit_time, eligible_time, start_time, end_time, time_limit_s, node_count,
    nodes, cpus, gpus, gpu_type, mem_req_bytes, command_hash, work_dir,
    event_type AS last_event,
    event_ts AS updated_at,
    inserted_at,
    (toUInt64(event_ts) * 1000 + event_ms) * 8
        + multiIf(event_type = 'SUBMIT', 1, event_type = 'UPDATE', 2, event_type = 'START', 3, 4) AS version
FROM {database}.job_events;
