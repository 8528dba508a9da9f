-- GPU hours by month, VC and user, per cluster: the GPU time of jobs running
-- in [since, until), split across the months (in {tz}) it fell in (a running
-- job counts up to now), with the jobs that ran in the month and each row's
-- share of its cluster's month. Jobs are runs (job_runs): every run of a job
-- Slurm requeued counts its GPU time, and counts as a job of the month it
-- ran in, as do two jobs that shared an id. VC is the Slurm partition or a
-- trace's VC; a job's GPUs are its processors where a trace gives no GPUs
-- (SWF). Read: who is growing, and which VC needs the next nodes.
SELECT
    month,
    cluster,
    vc,
    user,
    jobs,
    round(gpu_s / 3600, 1) AS gpu_hours,
    round(gpu_s / month_gpu_s, 4) AS share_of_month
FROM (
    SELECT month, cluster, vc, user, uniqExact(job_id, submit_s) AS jobs, sum(gs) AS gpu_s
    FROM (
        SELECT cluster, vc, user, job_id, submit_s, g, s, e,
            arrayJoin(arrayMap(i -> addMonths(toStartOfMonth(toDateTime(s), '{tz}'), i),
                range(toUInt32((toYear(toDateTime(e - 1), '{tz}') * 12 + toMonth(toDateTime(e - 1), '{tz}'))
                    - (toYear(toDateTime(s), '{tz}') * 12 + toMonth(toDateTime(s), '{tz}')) + 1)))) AS month,
            toUInt32(toDateTime(toString(month) || ' 00:00:00', '{tz}')) AS m0,
            toUInt32(toDateTime(toString(addMonths(month, 1)) || ' 00:00:00', '{tz}')) AS m1,
            toFloat64(g) * (least(e, m1) - greatest(s, m0)) AS gs
        FROM (
            SELECT cluster, partition_name AS vc, user, job_id, toUInt32(submit_time) AS submit_s,
                toUInt32(if(isNull(gpus) AND source = 'trace', ifNull(cpus, 0), ifNull(gpus, 0))) AS g,
                state NOT IN ('PENDING', 'RUNNING') AS ended,
                toUInt32(ifNull(start_time, toDateTime(0))) AS start_s,
                toUInt32(ifNull(end_time, toDateTime(0))) AS end_s,
                toUInt32(greatest(start_s, {since})) AS s,
                toUInt32(least(if(end_s > 0, end_s, if(ended, 0, {computed_until})), {computed_until})) AS e
            FROM {part.runs}
        )
        WHERE g > 0 AND start_s > 0 AND s < e
    )
    WHERE gs > 0
    GROUP BY month, cluster, vc, user
) AS usage
ANY LEFT JOIN (
    SELECT month, cluster, sum(gs) AS month_gpu_s
    FROM (
        SELECT cluster, g, s, e,
            arrayJoin(arrayMap(i -> addMonths(toStartOfMonth(toDateTime(s), '{tz}'), i),
                range(toUInt32((toYear(toDateTime(e - 1), '{tz}') * 12 + toMonth(toDateTime(e - 1), '{tz}'))
                    - (toYear(toDateTime(s), '{tz}') * 12 + toMonth(toDateTime(s), '{tz}')) + 1)))) AS month,
            toUInt32(toDateTime(toString(month) || ' 00:00:00', '{tz}')) AS m0,
            toUInt32(toDateTime(toString(addMonths(month, 1)) || ' 00:00:00', '{tz}')) AS m1,
            toFloat64(g) * (least(e, m1) - greatest(s, m0)) AS gs
        FROM (
            SELECT cluster,
                toUInt32(if(isNull(gpus) AND source = 'trace', ifNull(cpus, 0), ifNull(gpus, 0))) AS g,
                state NOT IN ('PENDING', 'RUNNING') AS ended,
                toUInt32(ifNull(start_time, toDateTime(0))) AS start_s,
                toUInt32(ifNull(end_time, toDateTime(0))) AS end_s,
                toUInt32(greatest(start_s, {since})) AS s,
                toUInt32(least(if(end_s > 0, end_s, if(ended, 0, {computed_until})), {computed_until})) AS e
            FROM {part.runs}
        )
        WHERE g > 0 AND start_s > 0 AND s < e
    )
    GROUP BY month, cluster
) AS month_totals USING (month, cluster)
ORDER BY month, cluster, gpu_hours DESC, vc, user;
