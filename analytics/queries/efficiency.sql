-- Job "efficiency": the jobstats-style summaries of job runs
-- (job_run_summary FINAL, one per run, the runs submitted in the window)
-- aggregated per cluster, VC and user into analytics_efficiency. Each run of
-- a requeued job, and each job of a reused id, counts as a job with its own
-- GPU hours, idle hours and energy, in the window of its own submit time, as
-- the other analytics jobs count job_runs. GPU utilization is in percent;
-- sm_active a ratio. Filtering on submit_time inside FINAL is safe: it is in
-- the table's key, so every row of a run has the run's submit time and no
-- older row can win where the newer is filtered out.
INSERT INTO {out.analytics_efficiency} (
    window_id, window_start, window_end, cluster, scope, scope_value,
    jobs, sampled_jobs, gpu_hours, sampled_gpu_hours, util_mean, util_p10, util_p50, util_p90,
    sm_jobs, sm_active_mean, idle_gpu_hours, idle_share, energy_kwh, energy_kwh_per_job,
    low_util_jobs, idle_allocated_jobs, poor_time_limit_jobs, no_samples_jobs, flag_names, flag_jobs)
SELECT
    {window_columns}, cluster, scope, scope_value,
    n_jobs, sampled_jobs, gh, sgh, util_w / util_h, {q:u:0.1}, {q:u:0.5}, {q:u:0.9},
    sm_jobs, sm_w / sm_h, idle, idle / sgh, kwh, kwh / n_jobs,
    low, idle_alloc, poor, nos, arrayMap(x -> x.1, fl), arrayMap(x -> x.2, fl)
FROM (
    SELECT
        cluster,
        (arrayJoin([('cluster', ''), ('vc', partition_name), ('user', user)]) AS sc).1 AS scope,
        sc.2 AS scope_value,
        count() AS n_jobs,
        countIf(samples > 0) AS sampled_jobs,
        sum(gpu_hours) AS gh,
        sumIf(gpu_hours, samples > 0) AS sgh,
        sumIf(toFloat64(assumeNotNull(util_mean)) * gpu_hours, isNotNull(util_mean)) AS util_w,
        sumIf(gpu_hours, isNotNull(util_mean)) AS util_h,
        arraySort(groupArrayIf(toFloat64(assumeNotNull(util_mean)), isNotNull(util_mean))) AS u,
        countIf(isNotNull(sm_active_mean)) AS sm_jobs,
        sumIf(toFloat64(assumeNotNull(sm_active_mean)) * gpu_hours, isNotNull(sm_active_mean)) AS sm_w,
        sumIf(gpu_hours, isNotNull(sm_active_mean)) AS sm_h,
        sum(ifNull(zero_util_gpu_hours, 0)) AS idle,
        sum(ifNull(energy_j, 0)) / 3.6e6 AS kwh,
        countIf(has(flags, 'low_util')) AS low,
        countIf(has(flags, 'idle_allocated')) AS idle_alloc,
        countIf(has(flags, 'poor_time_limit')) AS poor,
        countIf(has(flags, 'no_samples')) AS nos
    FROM {database}.job_run_summary FINAL
    WHERE submit_time >= toDateTime({since}) AND submit_time < toDateTime({computed_until})
    GROUP BY cluster, scope, scope_value
) AS sums
ANY LEFT JOIN (
    -- every flag with the jobs carrying it, sorted by flag
    SELECT cluster, scope, scope_value, arraySort(groupArray((flag, n))) AS fl
    FROM (
        SELECT
            cluster,
            (arrayJoin([('cluster', ''), ('vc', partition_name), ('user', user)]) AS sc).1 AS scope,
            sc.2 AS scope_value,
            arrayJoin(flags) AS flag,
            count() AS n
        FROM {database}.job_run_summary FINAL
        WHERE submit_time >= toDateTime({since}) AND submit_time < toDateTime({computed_until})
        GROUP BY cluster, scope, scope_value, flag
    )
    GROUP BY cluster, scope, scope_value
) AS flag_counts USING (cluster, scope, scope_value);
