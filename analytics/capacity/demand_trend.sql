-- Trend of weekly GPU demand and a simple growth forecast, per cluster: the
-- weekly mean and 90th percentile of hourly demand (running + pending GPUs,
-- as in demand_weekly) over the whole weeks (Monday, in {tz}) of [since,
-- until), a least-squares line through each (slope in GPUs per week), and the
-- p90 line extended 4, 13, 26 and 52 weeks past the last whole week. A
-- straight line is a first guess: check r2_p90 (1 is a perfect fit) and the
-- weekly figures before buying hardware on it.
SELECT
    cluster, weeks, first_week, last_week, round(last_p90, 1) AS last_week_p90,
    round(b_mean, 2) AS slope_mean_gpus_per_week,
    round(b_p90, 2) AS slope_p90_gpus_per_week,
    round(r2, 3) AS r2_p90,
    round(a_p90 + b_p90 * (last_x + 4), 1) AS p90_in_4w,
    round(a_p90 + b_p90 * (last_x + 13), 1) AS p90_in_13w,
    round(a_p90 + b_p90 * (last_x + 26), 1) AS p90_in_26w,
    round(a_p90 + b_p90 * (last_x + 52), 1) AS p90_in_52w
FROM (
SELECT
    cluster,
    count() AS weeks,
    min(week) AS first_week,
    max(week) AS last_week,
    max(x) AS last_x,
    argMax(p90, x) AS last_p90,
    covarPop(x, mean) / varPop(x) AS b_mean,
    covarPop(x, p90) / varPop(x) AS b_p90,
    avg(p90) - b_p90 * avg(x) AS a_p90,
    pow(corr(x, p90), 2) AS r2
FROM (
    SELECT cluster, week, toFloat64(intDiv(toUInt32(week), 7)) AS x,
        arrayReduce('avg', d) AS mean, {q:d:0.9} AS p90
    FROM (
        SELECT cluster, toMonday(toDateTime(h * 3600), '{tz}') AS week, count() AS hours,
            arraySort(groupArray((busy + wait) / 3600)) AS d
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
    -- whole weeks only (167-169 hours across a daylight-saving change)
    WHERE hours >= 167
)
GROUP BY cluster
)
ORDER BY cluster;
