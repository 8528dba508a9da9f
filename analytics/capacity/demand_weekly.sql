-- Weekly percentiles of concurrent GPU demand, per cluster: for every hour of
-- [since, until) the mean GPUs held by running jobs plus those asked for by
-- pending jobs (GPU-seconds in the hour / 3600), then per week (Monday, in
-- {tz}) the mean, median, 90th and 99th percentile and maximum of those
-- hourly figures, with the 90th percentile of running GPUs alone. Idle hours
-- count as 0. Jobs submitted up to the lookback before since count while
-- they run or wait; a job's GPUs are its processors where a trace gives no
-- GPUs (SWF). Read: size the cluster for demand_p90 or demand_p99; the gap
-- between demand and running is what queued.
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
        arraySort(groupArray((busy + wait) / 3600)) AS d,
        arraySort(groupArray(busy / 3600)) AS r
    FROM (
        SELECT cluster,
            toUInt32(arrayJoin(arrayMap(i -> intDiv({since}, 3600) + i,
                range(toUInt32(greatest(0, intDiv({computed_until} + 3599, 3600) - intDiv({since}, 3600))))))) AS h
        FROM (SELECT DISTINCT cluster FROM {database}.jobs WHERE submit_time >= toDateTime({lookback_since}) AND submit_time < toDateTime({until}))
    )
    ANY LEFT JOIN (
        SELECT cluster,
            toUInt32(arrayJoin(arrayMap(i -> intDiv(s, 3600) + i, range(toUInt32(intDiv(e - 1, 3600) - intDiv(s, 3600) + 1))))) AS h,
            sum(if(kind = 1, toFloat64(g) * (least(e, (h + 1) * 3600) - greatest(s, h * 3600)), 0)) AS busy,
            sum(if(kind = 2, toFloat64(g) * (least(e, (h + 1) * 3600) - greatest(s, h * 3600)), 0)) AS wait
        FROM (
            SELECT cluster, g, iv.1 AS kind,
                toUInt32(greatest(iv.2, {since})) AS s, toUInt32(least(iv.3, {computed_until})) AS e
            FROM (
                SELECT cluster,
                    toUInt32(if(isNull(gpus) AND source = 'trace', ifNull(cpus, 0), ifNull(gpus, 0))) AS g,
                    state NOT IN ('PENDING', 'RUNNING') AS ended,
                    toUInt32(submit_time) AS submit_s,
                    toUInt32(ifNull(start_time, toDateTime(0))) AS start_s,
                    toUInt32(ifNull(end_time, toDateTime(0))) AS end_s,
                    if(start_s > 0 AND (end_s >= start_s OR NOT ended), start_s, 0) AS hold_from,
                    if(hold_from = 0, 0, if(end_s > 0, end_s, {computed_until})) AS hold_to,
                    multiIf(start_s > 0, start_s, end_s > 0, end_s, NOT ended, {computed_until}, 0) AS wait_to
                FROM {database}.jobs FINAL
                WHERE submit_time >= toDateTime({lookback_since}) AND submit_time < toDateTime({until})
            )
            ARRAY JOIN [(1, hold_from, hold_to), (2, submit_s, wait_to)] AS iv
            WHERE g > 0 AND iv.3 > 0 AND greatest(iv.2, {since}) < least(iv.3, {computed_until})
        )
        GROUP BY cluster, h
    ) USING (cluster, h)
    GROUP BY cluster, week
)
ORDER BY cluster, week;
