-- Job "jobs": Helios' cluster summary per cluster, VC and user
-- (analytics_summary), the headline figures per cluster
-- (analytics_headline), ended jobs and GPU time by final state
-- (analytics_state), the distribution of run time and queuing delay
-- (analytics_duration) and their CDFs (analytics_duration_cdf), for the jobs
-- submitted in the window. Rates are shares of the ended jobs; GPU time
-- counts ended jobs with a known run time. Quantiles are exact: {q:A:P} is
-- the runner's P-quantile of the sorted array A (linear between closest
-- ranks).
--
-- For speed the window's jobs are read once into {tmp.cube}, one row per
-- cluster, VC, user, CPU/GPU, GPU type and state with counts and the run
-- times, queuing delays and GPU counts as arrays; every scope is a roll-up
-- of it. Scopes: the cluster, each VC, each user, and each GPU type
-- (scope 'gpu_type', scope_value the type the scheduler source recorded,
-- e.g. 'a100'; a job given two types is under both joined, 'a100,v100'):
-- a GPU type's rows count its GPU jobs only, so its 'all' class is its
-- 'gpu' class, and jobs with no type recorded (every trace's) are in no
-- GPU type's rows.

-- The names behind the numeric key cvu (grouping on it is several times
-- faster than on the three strings).
CREATE TABLE {tmp.names} ENGINE = Memory AS
SELECT cvu, any(cluster) AS cluster, any(vc) AS vc, any(user) AS user
FROM {jobs}
WHERE in_window = 1
GROUP BY cvu;

CREATE TABLE {tmp.cube} ENGINE = Memory AS
SELECT cluster, vc, user, gpu, gpu_type,
    transform(state_code, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], ['PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED',
        'TIMEOUT', 'NODE_FAIL', 'PREEMPTED', 'OUT_OF_MEMORY', 'UNKNOWN'], '') AS state,
    multiIf(state = 'COMPLETED', 'completed',
            state IN ('CANCELLED', 'PREEMPTED'), 'cancelled',
            state IN ('FAILED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY'), 'failed',
            state = 'UNKNOWN', 'unknown', '') AS state_class,
    jobs, gt, runs, queues
FROM (
    SELECT cvu, toUInt8(g > 0) AS gpu, gpu_type, state_code,
        count() AS jobs,
        toFloat64(sumIf(g * run_s, run_s >= 0)) AS gt,
        -- values encoded as 2 x value + gpu, so that one sort of a scope's
        -- values orders them for every class (see {tmp.dist})
        groupArrayIf(run_s * 2 + gpu, run_s >= 0) AS runs,
        groupArrayIf(queue_s * 2 + gpu, queue_s >= 0) AS queues
    FROM {jobs}
    WHERE in_window = 1
    GROUP BY cvu, gpu, gpu_type, state_code
) AS counts
ANY LEFT JOIN {tmp.names} USING cvu;

-- GPU jobs by GPU count, for the mean and median GPU count.
CREATE TABLE {tmp.gcount} ENGINE = Memory AS
SELECT cluster, vc, user, gpu_type, g, n
FROM (
    SELECT cvu, gpu_type, g, count() AS n
    FROM {jobs}
    WHERE in_window = 1 AND g > 0
    GROUP BY cvu, gpu_type, g
) AS counts
ANY LEFT JOIN {tmp.names} USING cvu;

-- One row per scope with its counts by class (index 1 CPU, 2 GPU) and its
-- encoded values sorted once ({tmp.scoped}); then one row per scope and
-- job_class with plain sorted values: the class's are the sorted values
-- whose low bit is its flag, still in order ({tmp.dist}).
CREATE TABLE {tmp.scoped} ENGINE = Memory AS
SELECT cluster, scope, scope_value, nk, endedk, n_ck, n_xk, n_fk, n_uk, tk_c, tk_x, tk_f, tk_u, enc_runs, enc_queues, ghk
FROM (
SELECT cluster, scope, scope_value,
    [sumIf(jobs, gpu = 0), sumIf(jobs, gpu = 1)] AS nk,
    [sumIf(jobs, gpu = 0 AND state_class != ''), sumIf(jobs, gpu = 1 AND state_class != '')] AS endedk,
    [sumIf(jobs, gpu = 0 AND state_class = 'completed'), sumIf(jobs, gpu = 1 AND state_class = 'completed')] AS n_ck,
    [sumIf(jobs, gpu = 0 AND state_class = 'cancelled'), sumIf(jobs, gpu = 1 AND state_class = 'cancelled')] AS n_xk,
    [sumIf(jobs, gpu = 0 AND state_class = 'failed'), sumIf(jobs, gpu = 1 AND state_class = 'failed')] AS n_fk,
    [sumIf(jobs, gpu = 0 AND state_class = 'unknown'), sumIf(jobs, gpu = 1 AND state_class = 'unknown')] AS n_uk,
    sumIf(gt, state_class = 'completed') AS tk_c, sumIf(gt, state_class = 'cancelled') AS tk_x,
    sumIf(gt, state_class = 'failed') AS tk_f, sumIf(gt, state_class = 'unknown') AS tk_u,
    arraySort(groupArrayArray(runs)) AS enc_runs, arraySort(groupArrayArray(queues)) AS enc_queues
FROM (
    SELECT cluster, 'cluster' AS scope, '' AS scope_value, gpu, state_class, jobs, gt, runs, queues FROM {tmp.cube}
    UNION ALL
    SELECT cluster, 'vc' AS scope, vc AS scope_value, gpu, state_class, jobs, gt, runs, queues FROM {tmp.cube}
    UNION ALL
    SELECT cluster, 'user' AS scope, user AS scope_value, gpu, state_class, jobs, gt, runs, queues FROM {tmp.cube}
    UNION ALL
    SELECT cluster, 'gpu_type' AS scope, gpu_type AS scope_value, gpu, state_class, jobs, gt, runs, queues FROM {tmp.cube}
    WHERE gpu = 1 AND gpu_type != ''
)
GROUP BY cluster, scope, scope_value
) AS s
ANY LEFT JOIN (
    -- the GPU-count histogram (sorted counts, jobs) of each scope
    SELECT cluster, scope, scope_value, sumMap([g], [n]) AS ghk
    FROM (
        SELECT cluster, 'cluster' AS scope, '' AS scope_value, g, n FROM {tmp.gcount}
        UNION ALL
        SELECT cluster, 'vc' AS scope, vc AS scope_value, g, n FROM {tmp.gcount}
        UNION ALL
        SELECT cluster, 'user' AS scope, user AS scope_value, g, n FROM {tmp.gcount}
        UNION ALL
        SELECT cluster, 'gpu_type' AS scope, gpu_type AS scope_value, g, n FROM {tmp.gcount} WHERE gpu_type != ''
    )
    GROUP BY cluster, scope, scope_value
) AS h USING (cluster, scope, scope_value);

CREATE TABLE {tmp.dist} ENGINE = Memory AS
SELECT cluster, scope, scope_value, job_class,
    multiIf(job_class = 'cpu', nk[1], job_class = 'gpu', nk[2], nk[1] + nk[2]) AS n,
    multiIf(job_class = 'cpu', endedk[1], job_class = 'gpu', endedk[2], endedk[1] + endedk[2]) AS ended,
    multiIf(job_class = 'cpu', n_ck[1], job_class = 'gpu', n_ck[2], n_ck[1] + n_ck[2]) AS n_c,
    multiIf(job_class = 'cpu', n_xk[1], job_class = 'gpu', n_xk[2], n_xk[1] + n_xk[2]) AS n_x,
    multiIf(job_class = 'cpu', n_fk[1], job_class = 'gpu', n_fk[2], n_fk[1] + n_fk[2]) AS n_f,
    multiIf(job_class = 'cpu', n_uk[1], job_class = 'gpu', n_uk[2], n_uk[1] + n_uk[2]) AS n_u,
    -- CPU jobs hold no GPU time: the GPU class has all of it
    if(job_class = 'cpu', 0, tk_c) AS t_c, if(job_class = 'cpu', 0, tk_x) AS t_x,
    if(job_class = 'cpu', 0, tk_f) AS t_f, if(job_class = 'cpu', 0, tk_u) AS t_u,
    arrayMap(x -> intDiv(x, 2), multiIf(job_class = 'cpu', arrayFilter(x -> x % 2 = 0, enc_runs),
        job_class = 'gpu', arrayFilter(x -> x % 2 = 1, enc_runs), enc_runs)) AS runs,
    arrayMap(x -> intDiv(x, 2), multiIf(job_class = 'cpu', arrayFilter(x -> x % 2 = 0, enc_queues),
        job_class = 'gpu', arrayFilter(x -> x % 2 = 1, enc_queues), enc_queues)) AS queues,
    -- the GPU-count histogram: read from the gpu and all rows only
    ghk AS gh
FROM {tmp.scoped}
ARRAY JOIN ['cpu', 'gpu', 'all'] AS job_class
WHERE job_class = 'all' OR multiIf(job_class = 'cpu', nk[1], nk[2]) > 0;

INSERT INTO {out.analytics_summary} (
    window_id, window_start, window_end, cluster, scope, scope_value, gpu_num,
    job_num, cpu_job_num, gpu_job_num,
    avg_run_time_cpu, avg_run_time_gpu, avg_que_time_cpu, avg_que_time_gpu, avg_gpu_num,
    med_run_time_cpu, med_run_time_gpu, med_que_time_cpu, med_que_time_gpu, med_gpu_num,
    complete_rate, cancel_rate, fail_rate, unknown_rate,
    complete_rate_cpu, cancel_rate_cpu, fail_rate_cpu, unknown_rate_cpu,
    complete_rate_gpu, cancel_rate_gpu, fail_rate_gpu, unknown_rate_gpu,
    complete_gpu_time, cancel_gpu_time, fail_gpu_time, unknown_gpu_time,
    ended_job_num, unfinished_job_num, users)
SELECT
    {window_columns}, cluster, scope, scope_value, gpu_num,
    n_all, n_cpu, n_gpu,
    arrayReduce('avg', r_cpu), arrayReduce('avg', r_gpu), arrayReduce('avg', q_cpu), arrayReduce('avg', q_gpu),
    arraySum(arrayMap((v, c) -> v * c, g_gpu.1, g_gpu.2)) / arraySum(g_gpu.2),
    {q:r_cpu:0.5}, {q:r_gpu:0.5}, {q:q_cpu:0.5}, {q:q_gpu:0.5},
    -- the median of the GPU counts from their histogram: the mean of the
    -- values at 0-based ranks floor((n-1)/2) and ceil((n-1)/2)
    if(arraySum(g_gpu.2) = 0, nan,
        (arrayElement(g_gpu.1, arrayFirstIndex(c -> c > intDiv(arraySum(g_gpu.2) - 1, 2), arrayCumSum(g_gpu.2)))
         + arrayElement(g_gpu.1, arrayFirstIndex(c -> c > intDiv(arraySum(g_gpu.2), 2), arrayCumSum(g_gpu.2)))) / 2),
    c[1] / c[5], c[2] / c[5], c[3] / c[5], c[4] / c[5],
    c_cpu[1] / c_cpu[5], c_cpu[2] / c_cpu[5], c_cpu[3] / c_cpu[5], c_cpu[4] / c_cpu[5],
    c_gpu[1] / c_gpu[5], c_gpu[2] / c_gpu[5], c_gpu[3] / c_gpu[5], c_gpu[4] / c_gpu[5],
    t[1], t[2], t[3], t[4],
    c[5], n_all - c[5], users
FROM (
    SELECT cluster, scope, scope_value, n_all, n_cpu, n_gpu, c, c_cpu, c_gpu, t, r_cpu, r_gpu, q_cpu, q_gpu, g_gpu, gpu_num
    FROM (
        SELECT cluster, scope, scope_value,
            sumIf(n, job_class = 'all') AS n_all, sumIf(n, job_class = 'cpu') AS n_cpu, sumIf(n, job_class = 'gpu') AS n_gpu,
            -- completed, cancelled, failed, unknown, ended
            anyIf([n_c, n_x, n_f, n_u, ended], job_class = 'all') AS c,
            anyIf([n_c, n_x, n_f, n_u, ended], job_class = 'cpu') AS c_cpu,
            anyIf([n_c, n_x, n_f, n_u, ended], job_class = 'gpu') AS c_gpu,
            anyIf([t_c, t_x, t_f, t_u], job_class = 'gpu') AS t,
            anyIf(runs, job_class = 'cpu') AS r_cpu, anyIf(runs, job_class = 'gpu') AS r_gpu,
            anyIf(queues, job_class = 'cpu') AS q_cpu, anyIf(queues, job_class = 'gpu') AS q_gpu,
            -- GPU counts of the GPU jobs as (sorted values, jobs)
            anyIf(gh, job_class = 'gpu') AS g_gpu
        FROM {tmp.dist}
        GROUP BY cluster, scope, scope_value
    ) AS d
    ANY LEFT JOIN (
        SELECT cluster, if(vc = '', 'cluster', 'vc') AS scope, vc AS scope_value, gpus AS gpu_num
        FROM {capacity}
    ) AS cap USING (cluster, scope, scope_value)
) AS dc
ANY LEFT JOIN (
    SELECT cluster, 'cluster' AS scope, '' AS scope_value, uniqExact(user) AS users FROM {tmp.cube} GROUP BY cluster
    UNION ALL
    SELECT cluster, 'vc' AS scope, vc AS scope_value, uniqExact(user) AS users FROM {tmp.cube} GROUP BY cluster, vc
    UNION ALL
    SELECT DISTINCT cluster, 'user' AS scope, user AS scope_value, toUInt64(1) AS users FROM {tmp.cube}
    UNION ALL
    SELECT cluster, 'gpu_type' AS scope, gpu_type AS scope_value, uniqExact(user) AS users FROM {tmp.cube}
    WHERE gpu = 1 AND gpu_type != '' GROUP BY cluster, gpu_type
) AS u USING (cluster, scope, scope_value);

INSERT INTO {out.analytics_headline} (
    window_id, window_start, window_end, cluster, jobs, gpu_jobs, users, ended_jobs,
    completed_share, cancelled_share, failed_share, unknown_share,
    gpu_seconds, completed_gpu_time_share, cancelled_gpu_time_share, failed_gpu_time_share, unknown_gpu_time_share,
    duration_jobs, duration_median_s, top5pct_users_gpu_time_share)
SELECT
    {window_columns}, cluster, h_jobs, h_gpu_jobs, users, c[5],
    c[1] / c[5], c[2] / c[5], c[3] / c[5], c[4] / c[5],
    arraySum(t) AS gt, t[1] / gt, t[2] / gt, t[3] / gt, t[4] / gt,
    length(h_runs), {q:h_runs:0.5}, top5
FROM (
    SELECT cluster,
        sumIf(n, job_class = 'all') AS h_jobs, sumIf(n, job_class = 'gpu') AS h_gpu_jobs,
        -- completed, cancelled, failed, unknown, ended
        anyIf([n_c, n_x, n_f, n_u, ended], job_class = 'all') AS c,
        anyIf([t_c, t_x, t_f, t_u], job_class = 'all') AS t,
        anyIf(runs, job_class = 'all') AS h_runs
    FROM {tmp.dist}
    WHERE scope = 'cluster'
    GROUP BY cluster
) AS d
ANY LEFT JOIN (
    -- users, and the GPU time of the top ceil(5% x users) users (integer
    -- arithmetic: no rounding of 0.05 x users)
    SELECT cluster, length(s) AS users, arraySum(arraySlice(s, 1, intDiv(5 * length(s) + 99, 100))) / arraySum(s) AS top5
    FROM (
        SELECT cluster, arrayReverseSort(groupArray(ut)) AS s
        FROM (SELECT cluster, user, sum(gt) AS ut FROM {tmp.cube} GROUP BY cluster, user)
        GROUP BY cluster
    )
) AS u USING cluster;

INSERT INTO {out.analytics_state} (
    window_id, window_start, window_end, cluster, scope, scope_value, job_class,
    state_class, state, jobs, gpu_seconds, job_share, gpu_time_share)
SELECT
    {window_columns}, cluster, scope, scope_value, job_class,
    (arrayJoin(rows) AS r).1, r.2, r.3, r.4, r.3 / total_jobs, r.4 / total_gt
FROM (
    SELECT cluster, scope, scope_value, job_class,
        groupArray((state_class, state, jobs, gt)) AS rows,
        sum(jobs) AS total_jobs,
        sum(gt) AS total_gt
    FROM (
        SELECT cluster,
            -- a GPU type's scope only for its GPU jobs (the empty name
            -- of any other job's is filtered out)
            (arrayJoin(arrayFilter(x -> x.1 != '', [('cluster', ''), ('vc', vc), ('user', user),
                (if(gpu = 1 AND gpu_type != '', 'gpu_type', ''), gpu_type)])) AS sc).1 AS scope,
            sc.2 AS scope_value,
            arrayJoin(['all', if(gpu = 1, 'gpu', 'cpu')]) AS job_class,
            state_class, state, sum(jobs) AS jobs, sum(gt) AS gt
        FROM {tmp.cube}
        WHERE state_class != ''
        GROUP BY cluster, scope, scope_value, job_class, state_class, state
    )
    GROUP BY cluster, scope, scope_value, job_class
);

INSERT INTO {out.analytics_duration} (
    window_id, window_start, window_end, cluster, scope, scope_value, job_class, metric,
    jobs, mean_s, min_s, p10_s, p25_s, p50_s, p75_s, p90_s, p95_s, p99_s, max_s)
SELECT
    {window_columns}, cluster, scope, scope_value, job_class, metric,
    length(a), arrayReduce('avg', a), a[1],
    {q:a:0.1}, {q:a:0.25}, {q:a:0.5}, {q:a:0.75}, {q:a:0.9}, {q:a:0.95}, {q:a:0.99},
    a[-1]
FROM {tmp.dist}
ARRAY JOIN ['run', 'queue'] AS metric, [runs, queues] AS a
WHERE length(a) > 0;

-- The CDF at le_s = 10^(k/10), k = 0..70: each value falls in the first
-- point at or above it (bucket k, found from its log10 and checked against
-- the points themselves so that rounding cannot misplace it; 71 beyond 10^7
-- s; values under 1 s, 0 s included, are bucket 0: log10 reads at least 1,
-- since ClickHouse evaluates both branches of if() and newer versions refuse
-- toInt32 of log10(0) = -inf), then the buckets accumulate. Counted per
-- cluster, VC, GPU type and CPU/GPU, then rolled up to the cluster, each VC
-- and each GPU type (its GPU jobs).
INSERT INTO {out.analytics_duration_cdf} (
    window_id, window_start, window_end, cluster, scope, scope_value, job_class, metric,
    le_s, jobs_le, jobs, cdf)
SELECT
    {window_columns}, cluster, scope, scope_value, job_class, metric,
    exp10(k / 10) AS le_s,
    arraySum(arrayMap(x -> if(x.1 <= k, x.2, 0), buckets)) AS jobs_le,
    total, jobs_le / total
FROM (
    SELECT cluster, scope, scope_value, job_class, metric,
        groupArray((bucket, n)) AS buckets, sum(n) AS total
    FROM (
        SELECT cluster,
            (arrayJoin(arrayFilter(x -> x.1 != '', [('cluster', ''), ('vc', vc),
                (if(gpu = 1 AND gpu_type != '', 'gpu_type', ''), gpu_type)])) AS sc).1 AS scope,
            sc.2 AS scope_value,
            arrayJoin(['all', if(gpu = 1, 'gpu', 'cpu')]) AS job_class,
            metric, bucket, sum(n) AS n
        FROM (
            SELECT cluster, vc, gpu, gpu_type, metric, bucket, count() AS n
            FROM (
                SELECT cluster, vc, toUInt8(g > 0) AS gpu, gpu_type,
                    (arrayJoin([('run', run_s), ('queue', queue_s)]) AS m).1 AS metric,
                    m.2 AS v,
                    ceil(10 * log10(greatest(v, 1))) AS k0,
                    if(v < 1, 0, least(71, toInt32(k0 + (v > exp10(k0 / 10)) - (v <= exp10((k0 - 1) / 10))))) AS bucket
                FROM {jobs}
                WHERE in_window = 1 AND v >= 0
            )
            GROUP BY cluster, vc, gpu, gpu_type, metric, bucket
        )
        GROUP BY cluster, scope, scope_value, job_class, metric, bucket
    )
    GROUP BY cluster, scope, scope_value, job_class, metric
)
ARRAY JOIN range(71) AS k;
