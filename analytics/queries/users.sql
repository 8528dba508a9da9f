-- Job "users": each user's GPU time, rank, queuing delay and completion rate
-- (analytics_users) and the concentration of GPU time and queuing delay on
-- the top users (analytics_user_concentration), per cluster and VC, over the
-- jobs submitted in the window.

-- Per cluster, VC and user (counts c: jobs, GPU jobs, ended, completed,
-- cancelled, failed, unknown; sums t: GPU time, queuing delay), rolled up
-- to each scope below.
CREATE TABLE {tmp.per_vc} ENGINE = Memory AS
SELECT any(cluster) AS cluster, any(vc) AS vc, any(user) AS user,
    [count(), countIf(g > 0), countIf(state_class != ''), countIf(state_class = 'completed'),
     countIf(state_class = 'cancelled'), countIf(state_class = 'failed'), countIf(state_class = 'unknown')] AS c,
    [toFloat64(sumIf(g * run_s, run_s >= 0)), toFloat64(sumIf(queue_s, queue_s >= 0))] AS t
FROM {jobs}
WHERE in_window = 1
GROUP BY cvu;

INSERT INTO {out.analytics_users} (
    window_id, window_start, window_end, cluster, scope, scope_value, user,
    jobs, gpu_jobs, ended_jobs, gpu_seconds, gpu_time_share, gpu_time_rank,
    queue_s, queue_share, complete_rate, cancel_rate, fail_rate, unknown_rate)
SELECT
    {window_columns}, cluster, scope, scope_value,
    (arrayJoin(ranked) AS r).2.1 AS user,
    r.2.2, r.2.3, r.2.4, r.2.5, r.2.5 / total_gt, toUInt32(r.1),
    r.2.6, r.2.6 / total_q,
    r.2.7 / r.2.4, r.2.8 / r.2.4, r.2.9 / r.2.4, r.2.10 / r.2.4
FROM (
    -- (rank, user row); only this array is joined, so no other array is
    -- copied to every user's row
    SELECT cluster, scope, scope_value, total_gt, total_q,
        arrayMap((x, i) -> (i, x), rows, arrayEnumerate(rows)) AS ranked
    FROM (
    SELECT cluster, scope, scope_value,
        -- rank by GPU time, most first; ties by user name
        arraySort(x -> (-x.5, x.1), groupArray((user, jobs, gpu_jobs, ended, gt, q, n_c, n_x, n_f, n_u))) AS rows,
        sum(gt) AS total_gt, sum(q) AS total_q
    FROM (
        SELECT cluster, scope, scope_value, user,
            sum(c[1]) AS jobs, sum(c[2]) AS gpu_jobs, sum(c[3]) AS ended, sum(t[1]) AS gt, sum(t[2]) AS q,
            sum(c[4]) AS n_c, sum(c[5]) AS n_x, sum(c[6]) AS n_f, sum(c[7]) AS n_u
        FROM (
            SELECT cluster, 'cluster' AS scope, '' AS scope_value, user, c, t FROM {tmp.per_vc}
            UNION ALL
            SELECT cluster, 'vc' AS scope, vc AS scope_value, user, c, t FROM {tmp.per_vc}
        )
        GROUP BY cluster, scope, scope_value, user
    )
    GROUP BY cluster, scope, scope_value
    )
);

-- The top k = ceil(p% x users) by integer arithmetic (no rounding of p x
-- users as a fraction).
INSERT INTO {out.analytics_user_concentration} (
    window_id, window_start, window_end, cluster, scope, scope_value, top_pct,
    users, top_users, gpu_time_share, queue_share)
SELECT
    {window_columns}, cluster, scope, scope_value, top_pct,
    users, k, arraySum(arraySlice(gt, 1, k)) / arraySum(gt), arraySum(arraySlice(q, 1, k)) / arraySum(q)
FROM (
    SELECT cluster, scope, scope_value,
        arrayReverseSort(groupArray(gt)) AS gt,
        arrayReverseSort(groupArray(q)) AS q,
        length(gt) AS users
    FROM (
        SELECT cluster, scope, scope_value, user, sum(t[1]) AS gt, sum(t[2]) AS q
        FROM (
            SELECT cluster, 'cluster' AS scope, '' AS scope_value, user, t FROM {tmp.per_vc}
            UNION ALL
            SELECT cluster, 'vc' AS scope, vc AS scope_value, user, t FROM {tmp.per_vc}
        )
        GROUP BY cluster, scope, scope_value, user
    )
    GROUP BY cluster, scope, scope_value
)
ARRAY JOIN [1, 5, 10, 25] AS top_pct, arrayMap(p -> toUInt64(intDiv(p * users + 99, 100)), [1, 5, 10, 25]) AS k;
