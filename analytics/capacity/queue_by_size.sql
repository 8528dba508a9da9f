-- Queuing delay by GPU request size, per cluster: the jobs submitted in
-- [since, until), by size bucket (the smallest power of two at or above the
-- GPUs asked for: 1, 2, 4 = 3-4 GPUs, 8 = 5-8, …; 0 for CPU jobs), with the
-- mean, median, 90th and 99th percentile and maximum delay in seconds and
-- the share of jobs that waited more than an hour. Jobs are runs
-- (job_runs): each run of a job Slurm requeued waits from its own submit
-- time (the requeue) to its own start. A run that never started counts
-- too, with the wait it had so far: a run still pending waits until the
-- window's end (now, for a window still open), one that ended without
-- starting (cancelled while pending) until its end. Those waits are lower
-- bounds, and so is every figure of a bucket where pending (runs still
-- waiting) or left_unstarted (runs that ended without starting) is above
-- 0: they are the longest waits of a congested cluster, which the started
-- runs alone would leave out. Read: a size whose p90 grows from month to
-- month, or that has many runs pending or left unstarted, is the one the
-- cluster is short of (or that its scheduler cannot place).
SELECT
    cluster,
    gpu_bucket,
    length(q) AS jobs,
    round(arrayReduce('avg', q)) AS mean_s,
    round({q:q:0.5}) AS p50_s,
    round({q:q:0.9}) AS p90_s,
    round({q:q:0.99}) AS p99_s,
    q[-1] AS max_s,
    round(arrayCount(x -> x > 3600, q) / length(q), 3) AS over_1h_share,
    pending,
    left_unstarted
FROM (
    SELECT cluster,
        if(g = 0, 0, toUInt32(arrayFirst(x -> x >= g, arrayMap(i -> bitShiftLeft(toUInt64(1), i), range(33))))) AS gpu_bucket,
        arraySort(groupArray(toInt64(wait_to) - submit_s)) AS q,
        countIf(start_s = 0 AND end_s = 0) AS pending,
        countIf(start_s = 0 AND end_s > 0) AS left_unstarted
    FROM (
        -- wait_to as in prepare.sql and hourly_demand.part: the start, else
        -- the end of a run that ended without starting, else (still
        -- pending) computed_until; 0 (unknown: ended, no start, no end) and
        -- a wait that ends before the submit time (bad data, or submitted
        -- after now) leave the run out
        SELECT cluster,
            toUInt32(if(isNull(gpus) AND source = 'trace', ifNull(cpus, 0), ifNull(gpus, 0))) AS g,
            state NOT IN ('PENDING', 'RUNNING') AS ended,
            toUInt32(submit_time) AS submit_s,
            toUInt32(ifNull(start_time, toDateTime(0))) AS start_s,
            toUInt32(ifNull(end_time, toDateTime(0))) AS end_s,
            multiIf(start_s > 0, start_s, end_s > 0, end_s, NOT ended, {computed_until}, 0) AS wait_to
        FROM {database}.job_runs FINAL
        WHERE submit_time >= toDateTime({since}) AND submit_time < toDateTime({until})
    )
    WHERE wait_to > 0 AND wait_to >= submit_s
    GROUP BY cluster, gpu_bucket
)
ORDER BY cluster, gpu_bucket;
