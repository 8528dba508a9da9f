-- Job events: one row per state change (SUBMIT, UPDATE, START, END) of a job,
-- each carrying the whole job record as known then. Unknown fields are NULL.
-- A ReplacingMergeTree keyed by the event's identity, so that a re-sent event
-- (a source restarted before it saved its state, a trace imported twice)
-- collapses into one row; query with FINAL for exact counts. inserted_at is
-- the ingest time, used to wait for late GPU samples before summarizing.
CREATE TABLE IF NOT EXISTS {database}.job_events (
    event_ts DateTime('UTC'),
    event_ms UInt16,
    event_type String,
    cluster String,
    source String,
    job_id String,
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
    inserted_at DateTime('UTC') DEFAULT now(),
    kafka_partition UInt32,
    kafka_offset UInt64
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(event_ts)
ORDER BY (cluster, job_id, event_ts, event_ms, event_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.job_events_ledger_mv TO {database}.ingest_ledger AS
SELECT
    'job_events' AS tbl,
    kafka_partition,
    kafka_offset,
    toYYYYMM(event_ts) AS part_key,
    count() AS rows
FROM {database}.job_events
GROUP BY kafka_partition, kafka_offset, part_key;
