-- Run preparation (not a job): the window's jobs, read from job_runs FINAL
-- once into a Memory table that every job reads ({jobs}), and the table of
-- candidate capacities ({capacity_all}). The runner then inserts the
-- configured capacities (priority 1-2) into {capacity_all} and runs
-- prepare_capacity.sql, which adds the others and picks the best.
--
-- {jobs}: one row per job run submitted before computed_until that was
-- submitted in the window (in_window = 1) or held or waited for GPUs in it.
-- The runs submitted in [lookback_since, computed_until) are read whole; the
-- earlier ones through a scan of job_runs' end times (a run that may have
-- held or waited in the window has a row with no end or one after since; the
-- scan reads the end_time column of the runs before lookback_since, and
-- FINAL only the runs it found), so that a run that began more than the
-- lookback before the window and ran or waited into it counts too. A run is
-- what `sacct --duplicates` lists: a job Slurm requeued
-- (preemption, node failure, scontrol requeue) is one row per run, each with
-- its own submit time, GPU time, waits and final state (PREEMPTED, NODE_FAIL
-- of the earlier runs), and two jobs that shared an id are two rows; jobs
-- keeps only the latest run of an id. "Jobs" in the results count runs.
-- Times are Unix seconds, 0 where unknown. gpu_type is the GPU type the
-- scheduler source recorded (job_runs.gpu_type; '' for none, types a job
-- was given joined with commas). g is the job's GPUs; where a trace
-- gives none (SWF), its processors play the role of GPUs. state_class maps
-- final states (see 0015_analytics_jobs.sql); '' for a job not ended.
-- run_s and queue_s are -1 where unknown; run_s also for a Slurm job that
-- vanished from squeue (source slurm, state UNKNOWN), whose end is only the
-- last listing that showed it: a lower bound (its GPUs still count as held
-- until then in hold_*). cv and cvu key a cluster's VC and
-- a VC's user; state_code numbers state (every state schemas defines;
-- 0 for another, which job_runs never holds). hold_* is when the job held its GPUs
-- (a running job until computed_until), wait_* when it waited for them (an
-- ended job that never started waited until its end); 0, 0 when unknown.
-- Only submit_time (part of a run's key, fixed for a run) is filtered inside
-- FINAL: a filter on a column that changes between a run's rows would pick
-- stale rows.
CREATE TABLE {jobs} ENGINE = Memory AS
SELECT *
FROM (
    SELECT
        cluster,
        partition_name AS vc,
        user,
        state,
        multiIf(state = 'COMPLETED', 'completed',
                state IN ('CANCELLED', 'PREEMPTED'), 'cancelled',
                state IN ('FAILED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY'), 'failed',
                state = 'UNKNOWN', 'unknown', '') AS state_class,
        toUInt32(submit_time) AS submit_s,
        toUInt32(ifNull(start_time, toDateTime(0))) AS start_s,
        toUInt32(ifNull(end_time, toDateTime(0))) AS end_s,
        toUInt32(if(isNull(gpus) AND source = 'trace', ifNull(cpus, 0), ifNull(gpus, 0))) AS g,
        gpu_type,
        toInt64(if(state_class != '' AND start_s > 0 AND end_s >= start_s AND NOT (source = 'slurm' AND state = 'UNKNOWN'),
            toInt64(end_s) - start_s, -1)) AS run_s,
        toInt64(if(start_s > 0 AND start_s >= submit_s, toInt64(start_s) - submit_s, -1)) AS queue_s,
        toUInt8(submit_s >= {since}) AS in_window,
        -- numeric keys for the jobs' GROUP BYs (hashing strings once here,
        -- not in every job); cityHash64 collisions among a cluster's VCs and
        -- users are not a practical concern
        cityHash64(cluster, vc) AS cv,
        cityHash64(cluster, vc, user) AS cvu,
        toUInt8(transform(state, ['PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL',
            'PREEMPTED', 'OUT_OF_MEMORY', 'UNKNOWN'], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0)) AS state_code,
        if(start_s > 0 AND (end_s >= start_s OR state_class = ''), start_s, 0) AS hold_from,
        if(hold_from = 0, 0, if(end_s > 0, end_s, {computed_until})) AS hold_to,
        submit_s AS wait_from,
        multiIf(start_s > 0, start_s, end_s > 0, end_s, state_class = '', {computed_until}, 0) AS wait_to
    FROM (
        SELECT cluster, partition_name, user, state, source, submit_time, start_time, end_time, gpus, cpus, gpu_type
        FROM {database}.job_runs FINAL
        WHERE submit_time >= toDateTime({lookback_since}) AND submit_time < toDateTime({computed_until})
        UNION ALL
        -- the key (fixed for a run) picks the runs inside FINAL; the end
        -- time, which changes between a run's rows, only outside it
        SELECT cluster, partition_name, user, state, source, submit_time, start_time, end_time, gpus, cpus, gpu_type
        FROM {database}.job_runs FINAL
        WHERE submit_time < toDateTime({lookback_since}) AND (cluster, job_id, submit_time) IN (
            SELECT cluster, job_id, submit_time
            FROM {database}.job_runs
            WHERE submit_time < toDateTime({lookback_since}) AND (end_time IS NULL OR end_time > toDateTime({since})))
    )
)
WHERE in_window = 1 OR hold_to > {since} OR wait_to > {since};

CREATE TABLE {capacity_all} (
    cluster String,
    vc String,
    gpus UInt32,
    source String,
    prio UInt8
) ENGINE = Memory;
