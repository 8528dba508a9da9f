-- Weekly percentiles of concurrent GPU demand, per cluster: for every hour of
-- [since, until) the mean GPUs held by running jobs plus those asked for by
-- pending jobs (GPU-seconds in the hour / its seconds in the window, which
-- for the current hour end now), then per week (Monday, in {tz}) the mean,
-- median, 90th and 99th percentile and maximum of those hourly figures, with
-- the 90th percentile of running GPUs alone. Idle hours count as 0. Jobs
-- submitted before since count while they run or wait, however long before;
-- a job's GPUs are its processors where a trace gives no GPUs (SWF). Read: size
-- the cluster for demand_p90 or demand_p99; the gap between demand and
-- running is what queued.
SELECT
    cluster,
    week,
    hours,
    round(arrayReduce('avg', d), 1) AS demand_mean,
    round({q:d:0.5}, 1) AS demand_p50,
    round({q:d:0.9}, 1) AS demand_p90,
    round({q:d:0.99}, 1) AS demand_p99,
    round(d[-1], 1) AS demand_max,
    round({q:r:0.9}, 1) AS running_p90
FROM (
    SELECT cluster, toMonday(toDateTime(h * 3600), '{tz}') AS week, count() AS hours,
        arraySort(groupArray(busy_gpus + wait_gpus)) AS d,
        arraySort(groupArray(busy_gpus)) AS r
    FROM (
{part.hourly_demand}
    )
    GROUP BY cluster, week
)
ORDER BY cluster, week;
