-- Idle-allocated GPU share by month and VC, per cluster, from the job
-- summaries (job_run_summary, one per run) of job runs that ended in [since, until), months in
-- {tz}: GPU hours of summarized jobs, of those with GPU samples, hours on
-- GPUs that sat at 0% utilization for the whole job (zero_util_gpu_hours)
-- and their share of the sampled hours, and the share of sampled GPU hours
-- in jobs flagged low_util (mean utilization under 15%). Read: GPUs that are
-- allocated but idle are capacity the cluster already has.
SELECT
    month, cluster, vc, jobs,
    round(gh, 1) AS gpu_hours,
    round(sgh, 1) AS sampled_gpu_hours,
    round(idle, 1) AS idle_gpu_hours,
    round(idle / sgh, 4) AS idle_share,
    round(low_gh / sgh, 4) AS low_util_gpu_hours_share
FROM (
    SELECT
        toStartOfMonth(end_time, '{tz}') AS month,
        cluster,
        partition_name AS vc,
        count() AS jobs,
        sum(gpu_hours) AS gh,
        sumIf(gpu_hours, samples > 0) AS sgh,
        sum(ifNull(zero_util_gpu_hours, 0)) AS idle,
        sumIf(gpu_hours, has(flags, 'low_util')) AS low_gh
    FROM {database}.job_run_summary FINAL
    WHERE end_time >= toDateTime({since}) AND end_time < toDateTime({until})
    GROUP BY month, cluster, vc
)
ORDER BY month, cluster, vc;
