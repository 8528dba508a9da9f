-- GPU hours and queuing by GPU type, per cluster and month (in {tz}). For
-- each type: jobs, the runs that held GPUs of it in the month; gpu_hours,
-- their GPU time in [since, until) (a running job up to now, split across
-- months as in gpu_hours_monthly); mean_busy_gpus, those GPU hours over the
-- hours of the month inside the window, to set beside the GPUs of the type
-- the cluster has; share_of_month, the type's share of the cluster's GPU
-- hours in the month. And of the runs submitted in the month: started, how
-- many have started, p50_wait_s and p90_wait_s, their queuing delay (start
-- - submit, exact quantiles; empty when none started), and pending, those
-- still waiting at the window's end (now, for a window still open), whose
-- waits are not in the quantiles. gpu_type is the type the scheduler
-- source recorded (job_runs.gpu_type): the type asked for, or for a request
-- that named none, the type of the GPUs the job was given once it started.
-- A job on several types has them sorted and joined by ',' (a100,v100) and
-- is a row of its own: its GPU time is not split by type. '' is no type
-- known: a trace without types (SWF, Helios), a pending request that names
-- none, a run no source typed. Jobs are runs (job_runs), as in the other
-- queries. Read: a type whose mean_busy_gpus nears the count installed
-- while its p90 wait grows month on month is the one to buy.
SELECT
    month,
    cluster,
    gpu_type,
    jobs,
    round(gpu_s / 3600, 1) AS gpu_hours,
    round(gpu_s / (toInt64(least(toUInt32(toDateTime(toString(addMonths(month, 1)) || ' 00:00:00', '{tz}')), {computed_until}))
        - toInt64(greatest(toUInt32(toDateTime(toString(month) || ' 00:00:00', '{tz}')), {since}))), 1) AS mean_busy_gpus,
    round(gpu_s / month_gpu_s, 4) AS share_of_month,
    length(q) AS started,
    round({q:q:0.5}) AS p50_wait_s,
    round({q:q:0.9}) AS p90_wait_s,
    pending
FROM (
    SELECT month, cluster, gpu_type,
        uniqExactIf(job_id, submit_s, gs > 0) AS jobs,
        sum(gs) AS gpu_s,
        arraySort(groupArrayIf(wait, waited)) AS q,
        countIf(waiting) AS pending
    FROM (
        -- the runs' GPU time, in the months they held GPUs (constants
        -- materialized: 18.16's UNION ALL refuses a constant column
        -- beside a computed one)
        SELECT month, cluster, gpu_type, job_id, submit_s, gs,
            materialize(toInt64(0)) AS wait, materialize(toUInt8(0)) AS waited, materialize(toUInt8(0)) AS waiting
        FROM {part.held_months}
        WHERE gs > 0
        UNION ALL
        -- the runs submitted in the window, in the month of their submit
        SELECT toStartOfMonth(toDateTime(submit_s), '{tz}') AS month, cluster, gpu_type, job_id, submit_s,
            materialize(toFloat64(0)) AS gs,
            toInt64(start_s) - toInt64(submit_s) AS wait,
            toUInt8(start_s > 0 AND start_s >= submit_s) AS waited,
            toUInt8(start_s = 0 AND state IN ('PENDING', 'RUNNING')) AS waiting
        FROM (
            SELECT cluster, gpu_type, job_id, state, toUInt32(submit_time) AS submit_s,
                toUInt32(ifNull(start_time, toDateTime(0))) AS start_s
            FROM {database}.job_runs FINAL
            WHERE submit_time >= toDateTime({since}) AND submit_time < toDateTime({until})
                AND if(isNull(gpus) AND source = 'trace', ifNull(cpus, 0), ifNull(gpus, 0)) > 0
        )
    )
    GROUP BY month, cluster, gpu_type
) AS usage
ANY LEFT JOIN {part.month_totals} AS month_totals USING (month, cluster)
ORDER BY month, cluster, gpu_hours DESC, gpu_type;
