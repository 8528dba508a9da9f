-- Energy per month (in {tz}) and cluster in [since, until), in kWh, from two
-- sources: the fleet (every GPU's mean power each minute, gpu_samples_1m,
-- idle GPUs included) and the jobs (energy_j of the run summaries of job runs
-- that ended in the month). GPU-hours of the fleet are the GPU-minutes
-- sampled / 60. jobs_share is the share of the fleet's energy drawn under
-- jobs; the rest went to idle or unattributed GPUs. GPU power only: no CPU,
-- cooling or network.
SELECT
    month,
    cluster,
    round(sum(fleet_j) / 3.6e6, 2) AS fleet_kwh,
    round(sum(gpu_minutes) / 60, 1) AS fleet_gpu_hours,
    round(sum(job_j) / 3.6e6, 2) AS jobs_kwh,
    sum(job_n) AS jobs,
    round(sum(job_j) / sum(fleet_j), 4) AS jobs_share
FROM (
    SELECT toStartOfMonth(minute, '{tz}') AS month, cluster,
        sum(if(isNaN(p), 0, p)) * 60 / 1000 AS fleet_j, toFloat64(count()) AS gpu_minutes,
        toFloat64(0) AS job_j, toUInt64(0) AS job_n
    FROM (
        SELECT minute, cluster, host, gpu_uuid, mig_uuid, avgIfMerge(power_avg) AS p
        FROM {database}.gpu_samples_1m
        WHERE minute >= toDateTime({since}) AND minute < toDateTime({until}) AND mig_uuid = ''
        GROUP BY minute, cluster, host, gpu_uuid, mig_uuid
    )
    GROUP BY month, cluster
    UNION ALL
    SELECT toStartOfMonth(end_time, '{tz}') AS month, cluster,
        toFloat64(0) AS fleet_j, toFloat64(0) AS gpu_minutes,
        sum(ifNull(energy_j, 0)) AS job_j, count() AS job_n
    FROM {database}.job_run_summary FINAL
    WHERE end_time >= toDateTime({since}) AND end_time < toDateTime({until})
    GROUP BY month, cluster
)
GROUP BY month, cluster
ORDER BY month, cluster;
