-- Job "utilization": GPUs held by running jobs and asked for by pending jobs,
-- per hour of [window_start, computed_until), per cluster and VC
-- (analytics_utilization_hourly, every hour, idle ones included); the same by
-- hour of day and day of week in {tz} (analytics_utilization); and the
-- distribution of hourly utilization (analytics_utilization_dist). A job
-- counts for the part of its run (or wait) inside each hour; hours are the
-- hours of {tz}, counted from {hour0}, the start of the one that holds the
-- window's start (off the UTC hour in a zone such as Asia/Kolkata, +05:30).
-- The first hour may begin before the window, and the last end early, at
-- computed_until (now, for an open window): an hour's busy and pending GPUs
-- are means over the seconds of it in [since, computed_until), and the
-- means over several hours weigh each hour by those seconds.

-- GPU-seconds per hour without cutting jobs into hours: with level(t) the
-- GPUs held at time t and F(T) its integral from the window's start, F(T) =
-- T x A(T) - B(T), where A(T) sums +g at each start and -g at each end before
-- T, and B(T) the same terms times their times. So each job adds two events,
-- summed per hour into {tmp.events}; cumulative sums over the hours give F at
-- every hour's end, and the GPU-seconds of hour i are F(end i) - F(end i-1),
-- exact in integers (times relative to {hour0}; nothing is held or waited
-- for before the window's start). kind 1 is held by running jobs, 2 asked
-- for by pending ones.
CREATE TABLE {tmp.events} ENGINE = Memory AS
SELECT cv, toUInt32(intDiv(t, 3600)) AS i, sum(d1) AS sd1, sum(d1 * t) AS sdt1, sum(d2) AS sd2, sum(d2 * t) AS sdt2,
    toUInt64(0) AS subs, toUInt64(0) AS gpu_subs
FROM (
    -- one branch per kind of event, times relative to {hour0}: a hold
    -- starts (+g), a hold ends (-g), a wait starts, a wait ends
    SELECT cv, toInt64(greatest(hold_from, {since})) - {hour0} AS t, toInt64(g) AS d1, toInt64(0) AS d2
    FROM {jobs} WHERE g > 0 AND hold_to > 0 AND greatest(hold_from, {since}) < least(hold_to, {computed_until})
    UNION ALL
    SELECT cv, toInt64(least(hold_to, {computed_until})) - {hour0} AS t, -toInt64(g) AS d1, toInt64(0) AS d2
    FROM {jobs} WHERE g > 0 AND hold_to > 0 AND greatest(hold_from, {since}) < least(hold_to, {computed_until})
    UNION ALL
    SELECT cv, toInt64(greatest(wait_from, {since})) - {hour0} AS t, toInt64(0) AS d1, toInt64(g) AS d2
    FROM {jobs} WHERE g > 0 AND wait_to > 0 AND greatest(wait_from, {since}) < least(wait_to, {computed_until})
    UNION ALL
    SELECT cv, toInt64(least(wait_to, {computed_until})) - {hour0} AS t, toInt64(0) AS d1, -toInt64(g) AS d2
    FROM {jobs} WHERE g > 0 AND wait_to > 0 AND greatest(wait_from, {since}) < least(wait_to, {computed_until})
)
GROUP BY cv, i
UNION ALL
SELECT cv, toUInt32(intDiv(submit_s - {hour0}, 3600)) AS i,
    toInt64(0), toInt64(0), toInt64(0), toInt64(0), count(), countIf(g > 0)
FROM {jobs}
WHERE in_window = 1 AND submit_s < {computed_until}
GROUP BY cv, i;

-- The names behind cv.
CREATE TABLE {tmp.cv_names} ENGINE = Memory AS
SELECT cv, any(cluster) AS cluster, any(vc) AS vc
FROM {jobs}
GROUP BY cv;

INSERT INTO {out.analytics_utilization_hourly} (
    window_id, window_start, window_end, cluster, scope, scope_value, hour_start,
    capacity, busy_gpus, pending_gpus, utilization, submissions, gpu_submissions)
SELECT
    {window_columns}, cluster, scope, scope_value,
    toDateTime(({hour0} + r.1 * 3600) AS h0, 'UTC'),
    -- secs: the seconds of the hour in [since, computed_until)
    cap, busy / (least(h0 + 3600, {computed_until}) - greatest(h0, {since}) AS secs), pend / secs, if(cap = 0, nan, busy / secs / cap),
    r.6, r.7
FROM (
    SELECT cluster, scope, scope_value, any(cap) AS cap,
        -- rows: (i, sd1, sdt1, sd2, sdt2, subs, gpu_subs) of every hour, in order
        arraySort(groupArray((i, sd1, sdt1, sd2, sdt2, subs, gpu_subs))) AS rows,
        arrayMap((x, a, b) -> toInt64(x.1 + 1) * 3600 * a - b, rows,
            arrayCumSum(arrayMap(x -> x.2, rows)), arrayCumSum(arrayMap(x -> x.3, rows))) AS f1,
        arrayMap((x, a, b) -> toInt64(x.1 + 1) * 3600 * a - b, rows,
            arrayCumSum(arrayMap(x -> x.4, rows)), arrayCumSum(arrayMap(x -> x.5, rows))) AS f2,
        arrayMap((a, b) -> a - b, f1, arrayPushFront(arrayPopBack(f1), toInt64(0))) AS busy_h,
        arrayMap((a, b) -> a - b, f2, arrayPushFront(arrayPopBack(f2), toInt64(0))) AS pend_h
    FROM (
        -- every hour of every cluster (vc '') and VC, with its events
        SELECT cluster, scope, scope_value, cap, i,
            sd1, sdt1, sd2, sdt2, subs, gpu_subs
        FROM (
            SELECT cluster, if(vc = '', 'cluster', 'vc') AS scope, vc AS scope_value, gpus AS cap,
                toUInt32(arrayJoin(range(toUInt32(if({computed_until} > {since}, intDiv({computed_until} - {hour0} + 3599, 3600), 0))))) AS i
            FROM {capacity}
        ) AS grid
        ANY LEFT JOIN (
            SELECT cluster, scope, scope_value, i,
                sum(sd1) AS sd1, sum(sdt1) AS sdt1, sum(sd2) AS sd2, sum(sdt2) AS sdt2,
                sum(subs) AS subs, sum(gpu_subs) AS gpu_subs
            FROM (
                SELECT cluster, arrayJoin([('vc', vc), ('cluster', '')]) AS sc, sc.1 AS scope, sc.2 AS scope_value,
                    i, sd1, sdt1, sd2, sdt2, subs, gpu_subs
                FROM {tmp.events}
                ANY LEFT JOIN {tmp.cv_names} USING cv
            )
            GROUP BY cluster, scope, scope_value, i
        ) AS ev USING (cluster, scope, scope_value, i)
    )
    GROUP BY cluster, scope, scope_value
)
ARRAY JOIN rows AS r, busy_h AS busy, pend_h AS pend;

-- Below, secs is the seconds of an hour in [since, computed_until): the
-- means over hours are weighted by it.
INSERT INTO {out.analytics_utilization} (
    window_id, window_start, window_end, cluster, scope, scope_value, tz, slot_kind, slot,
    hours, capacity, busy_gpus, utilization, submissions, submissions_per_hour, gpu_submissions_per_hour)
SELECT
    {window_columns}, cluster, scope, scope_value, '{tz}', slot_kind, slot,
    hours, cap, busy, if(cap = 0, nan, busy / cap), subs, subs * 3600 / covered, gpu_subs * 3600 / covered
FROM (
    -- The weekday is its date's in the zone: toDayOfWeek(t, zone) is 18.16's
    -- form, while current ClickHouse reads a second argument as a week mode.
    SELECT cluster, scope, scope_value,
        (arrayJoin([('hour_of_day', toHour(hour_start, '{tz}')), ('day_of_week', toDayOfWeek(toDate(hour_start, '{tz}')))]) AS ks).1 AS slot_kind,
        ks.2 AS slot,
        toUInt32(count()) AS hours,
        sum(secs) AS covered,
        any(capacity) AS cap,
        sum(busy_gpus * secs) / covered AS busy,
        sum(submissions) AS subs,
        sum(gpu_submissions) AS gpu_subs
    FROM (SELECT *, least(toUInt32(hour_start) + 3600, {computed_until}) - greatest(toUInt32(hour_start), {since}) AS secs FROM {out.analytics_utilization_hourly})
    GROUP BY cluster, scope, scope_value, slot_kind, slot
);

INSERT INTO {out.analytics_utilization_dist} (
    window_id, window_start, window_end, cluster, scope, scope_value, capacity, hours,
    busy_gpus_mean, pending_gpus_mean, util_mean,
    util_min, util_p10, util_p25, util_p50, util_p75, util_p90, util_max)
SELECT
    {window_columns}, cluster, scope, scope_value, cap, hours,
    busy, pending, if(cap = 0, nan, busy / cap),
    if(length(u) = 0, nan, u[1]), {q:u:0.1}, {q:u:0.25}, {q:u:0.5}, {q:u:0.75}, {q:u:0.9}, if(length(u) = 0, nan, u[-1])
FROM (
    SELECT cluster, scope, scope_value,
        any(capacity) AS cap,
        toUInt32(count()) AS hours,
        sum(busy_gpus * secs) / sum(secs) AS busy,
        sum(pending_gpus * secs) / sum(secs) AS pending,
        arraySort(groupArrayIf(utilization, capacity > 0)) AS u
    FROM (SELECT *, least(toUInt32(hour_start) + 3600, {computed_until}) - greatest(toUInt32(hour_start), {since}) AS secs FROM {out.analytics_utilization_hourly})
    GROUP BY cluster, scope, scope_value
);
