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
            arraySort(groupArray(busy_gpus + wait_gpus)) AS d
        FROM (
{part.hourly_demand}
        )
        GROUP BY cluster, week
    )
    -- whole weeks only (167-169 hours across a daylight-saving change)
    WHERE hours >= 167
)
GROUP BY cluster
)
ORDER BY cluster;
