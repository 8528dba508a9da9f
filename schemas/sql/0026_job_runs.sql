-- Every run of every job: one row per (cluster, job_id, submit_time) once
-- merged, the run's latest event winning (the version of jobs). Slurm
-- requeues a job (preemption, node failure, scontrol requeue) under the
-- same id, and each run has its own submit time; two different jobs can also
-- share an id (slurmctld restarted with a clean state). jobs keeps one row
-- per id, the latest run; job_runs keeps each run, as `sacct --duplicates`
-- lists them, so that GPU time, hold and wait intervals and final states
-- (PREEMPTED, NODE_FAIL) of the earlier runs count. Same columns as jobs;
-- all of a run's rows share its submit time, so they meet in one partition.
-- Query with FINAL (or argMax by version) for exact answers.
CREATE TABLE IF NOT EXISTS {database}.job_runs (
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
ORDER BY (cluster, job_id, submit_time);

-- The SELECT of jobs_mv (0007), to the letter: ingest's repair of a failed
-- insert (ingest/ledger.go, repairJobs) computes the rows of both tables
-- with it.
CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.job_runs_mv TO {database}.job_runs AS
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

-- One-time backfill of the events stored before the view existed. It runs
-- after the view is created, so no event is missed; an event inserted in
-- between is written by both, and a part applying this migration at the same
-- time as another writes every row again: the copies have the same key and
-- version and collapse under FINAL and in merges.
INSERT INTO {database}.job_runs (
    cluster, job_id, source, array_job_id, array_task_id, job_name, user, uid,
    group_name, account, partition_name, qos, state, exit_code, priority,
    submit_time, eligible_time, start_time, end_time, time_limit_s, node_count,
    nodes, cpus, gpus, gpu_type, mem_req_bytes, command_hash, work_dir,
    last_event, updated_at, inserted_at, version)
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
