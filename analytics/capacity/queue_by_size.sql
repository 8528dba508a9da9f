-- Queuing delay by GPU request size, per cluster: the jobs submitted in
-- [since, until) that started, by size bucket (the smallest power of two at
-- or above the GPUs asked for: 1, 2, 4 = 3-4 GPUs, 8 = 5-8, …; 0 for CPU
-- jobs), with the mean, median, 90th and 99th percentile and maximum delay
-- in seconds and the share of jobs that waited more than an hour. Jobs are
-- runs (job_runs): each run of a job Slurm requeued waits from its own
-- submit time (the requeue) to its own start. Read: a size whose p90 grows
-- from month to month is the one the cluster is short of (or that its
-- scheduler cannot place).
SELECT
    cluster,
    gpu_bucket,
    length(q) AS jobs,
    round(arrayReduce('avg', q)) AS mean_s,
    round({q:q:0.5}) AS p50_s,
    round({q:q:0.9}) AS p90_s,
    round({q:q:0.99}) AS p99_s,
    q[-1] AS max_s,
    round(arrayCount(x -> x > 3600, q) / length(q), 3) AS over_1h_share
FROM (
    SELECT cluster,
        if(g = 0, 0, toUInt32(arrayFirst(x -> x >= g, arrayMap(i -> bitShiftLeft(toUInt64(1), i), range(33))))) AS gpu_bucket,
        arraySort(groupArray(toInt64(start_s) - submit_s)) AS q
    FROM (
        SELECT cluster,
            toUInt32(if(isNull(gpus) AND source = 'trace', ifNull(cpus, 0), ifNull(gpus, 0))) AS g,
            toUInt32(submit_time) AS submit_s,
            toUInt32(ifNull(start_time, toDateTime(0))) AS start_s
        FROM {database}.job_runs FINAL
        WHERE submit_time >= toDateTime({since}) AND submit_time < toDateTime({until})
    )
    WHERE start_s >= submit_s
    GROUP BY cluster, gpu_bucket
)
ORDER BY cluster, gpu_bucket;
