-- Job "gpus": GPU jobs of the window by month and single/multi-GPU
-- (analytics_monthly), by exact GPU count (analytics_gpu_count), and ended
-- ones by GPU-count bucket and final state (analytics_state_by_gpus), per
-- cluster and VC. GPU time counts jobs with a known run time.

INSERT INTO {out.analytics_monthly} (
    window_id, window_start, window_end, cluster, scope, scope_value, tz, month_start,
    gpu_class, jobs, gpu_seconds, job_share, gpu_time_share)
SELECT
    {window_columns}, cluster, scope, scope_value, '{tz}', month_start,
    (arrayJoin(rows) AS r).1, r.2, r.3, r.2 / total_jobs, r.3 / total_gt
FROM (
    SELECT cluster, scope, scope_value, month_start,
        groupArray((gpu_class, jobs, gt)) AS rows, sum(jobs) AS total_jobs, sum(gt) AS total_gt
    FROM (
        SELECT cluster,
            (arrayJoin([('cluster', ''), ('vc', vc)]) AS sc).1 AS scope,
            sc.2 AS scope_value,
            month_start, gpu_class, sum(n) AS jobs, sum(t) AS gt
        FROM (
            SELECT cluster, vc,
                toStartOfMonth(toDateTime(submit_s), '{tz}') AS month_start,
                if(g = 1, 'single', 'multi') AS gpu_class,
                count() AS n,
                toFloat64(sumIf(g * run_s, run_s >= 0)) AS t
            FROM {jobs}
            WHERE in_window = 1 AND g > 0
            GROUP BY cluster, vc, month_start, gpu_class
        )
        GROUP BY cluster, scope, scope_value, month_start, gpu_class
    )
    GROUP BY cluster, scope, scope_value, month_start
);

INSERT INTO {out.analytics_gpu_count} (
    window_id, window_start, window_end, cluster, scope, scope_value, gpus,
    jobs, gpu_seconds, job_share, gpu_time_share, jobs_cdf, gpu_time_cdf)
SELECT
    {window_columns}, cluster, scope, scope_value,
    (arrayJoin(arrayMap((x, cj, cg) -> (x, cj, cg), rows, cum_jobs, cum_gt)) AS r).1.1 AS gpus,
    r.1.2, r.1.3, r.1.2 / total_jobs, r.1.3 / total_gt, r.2 / total_jobs, r.3 / total_gt
FROM (
    SELECT cluster, scope, scope_value,
        arraySort(groupArray((gpus, jobs, gt))) AS rows,
        arrayCumSum(arrayMap(x -> x.2, rows)) AS cum_jobs,
        arrayCumSum(arrayMap(x -> x.3, rows)) AS cum_gt,
        sum(jobs) AS total_jobs, sum(gt) AS total_gt
    FROM (
        SELECT cluster,
            (arrayJoin([('cluster', ''), ('vc', vc)]) AS sc).1 AS scope,
            sc.2 AS scope_value,
            gpus, sum(n) AS jobs, sum(t) AS gt
        FROM (
            SELECT cluster, vc, g AS gpus, count() AS n, toFloat64(sumIf(g * run_s, run_s >= 0)) AS t
            FROM {jobs}
            WHERE in_window = 1 AND g > 0
            GROUP BY cluster, vc, gpus
        )
        GROUP BY cluster, scope, scope_value, gpus
    )
    GROUP BY cluster, scope, scope_value
);

INSERT INTO {out.analytics_state_by_gpus} (
    window_id, window_start, window_end, cluster, scope, scope_value, gpu_bucket,
    state_class, jobs, gpu_seconds, job_share, gpu_time_share)
SELECT
    {window_columns}, cluster, scope, scope_value, gpu_bucket,
    (arrayJoin(rows) AS r).1, r.2, r.3, r.2 / total_jobs, r.3 / total_gt
FROM (
    SELECT cluster, scope, scope_value, gpu_bucket,
        groupArray((state_class, jobs, gt)) AS rows, sum(jobs) AS total_jobs, sum(gt) AS total_gt
    FROM (
        SELECT cluster,
            (arrayJoin([('cluster', ''), ('vc', vc)]) AS sc).1 AS scope,
            sc.2 AS scope_value,
            gpu_bucket, state_class, sum(n) AS jobs, sum(t) AS gt
        FROM (
            SELECT cluster, vc, gpu_bucket, state_class, count() AS n, toFloat64(sum(gt)) AS t
            FROM (
                SELECT cluster, vc, state_class, if(run_s >= 0, g * run_s, 0) AS gt,
                    -- the smallest power of two >= GPUs: from log2, then
                    -- checked by integer comparison against rounding
                    bitShiftLeft(toUInt64(1), toUInt8(ceil(log2(g)))) AS b0,
                    toUInt32(multiIf(b0 < g, b0 * 2, g > 1 AND intDiv(b0, 2) >= g, intDiv(b0, 2), b0)) AS gpu_bucket
                FROM {jobs}
                WHERE in_window = 1 AND g > 0 AND state_class != ''
            )
            GROUP BY cluster, vc, gpu_bucket, state_class
        )
        GROUP BY cluster, scope, scope_value, gpu_bucket, state_class
    )
    GROUP BY cluster, scope, scope_value, gpu_bucket
);
