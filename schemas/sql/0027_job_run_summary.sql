-- One row per ended run of every job, jobstats-style: the columns of
-- job_summary (0009), written by ingest's summarizer once the run's GPU
-- samples have had time to arrive. Slurm requeues a job (preemption, node
-- failure, scontrol requeue) under the same id, each run with its own submit
-- time, and two different jobs can share an id (slurmctld restarted with a
-- clean state). job_summary, keyed (cluster, job_id), kept one summary per id,
-- of the latest run only, so the GPU hours, idle hours and energy of the
-- earlier runs were lost to the efficiency analytics while every other
-- analytics job counts runs (job_runs, 0026). This table keeps one summary
-- per run, keyed as job_runs is. A run summarized again at a later end (a
-- lost run listed again) replaces its earlier summary (version = computation
-- time in ms; the summarizer deletes the summary at the earlier end, which
-- may lie in another partition). Query with FINAL.
--
-- From this version on the summarizer writes job_run_summary only:
-- job_summary is no longer written and is kept for reading old data.
CREATE TABLE IF NOT EXISTS {database}.job_run_summary (
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
ORDER BY (cluster, job_id, submit_time);

-- One-time backfill: each summary job_summary holds is a correct summary of
-- one run, the run jobs showed when it was written (its latest), by that
-- run's submit time, so it is that run's summary here. The summarizer finds
-- it by (cluster, job_id, submit_time, end_time, state) and leaves it, and
-- summarizes at its first pass the runs that have none (the earlier runs of
-- requeued jobs and of reused ids). FINAL reads one summary per job, the
-- newest, where an older one still waits for its delete. Applying this again
-- (a part migrating at the same time, a retry) writes copies with the same
-- key and version, which collapse under FINAL and in merges.
INSERT INTO {database}.job_run_summary (
    cluster, job_id, user, account, partition_name, state, gpus,
    submit_time, start_time, end_time, elapsed_s, time_limit_s, gpu_hours,
    gpu_hosts, gpu_indexes, gpu_util_mean, gpu_util_max, samples,
    util_mean, util_max, sm_active_mean, util_source, fb_used_max_bytes,
    power_mean_w, energy_j, zero_util_gpu_hours, flags, computed_at, version)
SELECT
    cluster, job_id, user, account, partition_name, state, gpus,
    submit_time, start_time, end_time, elapsed_s, time_limit_s, gpu_hours,
    gpu_hosts, gpu_indexes, gpu_util_mean, gpu_util_max, samples,
    util_mean, util_max, sm_active_mean, util_source, fb_used_max_bytes,
    power_mean_w, energy_j, zero_util_gpu_hours, flags, computed_at, version
FROM {database}.job_summary FINAL;
