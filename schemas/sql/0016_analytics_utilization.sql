-- Utilization results (analytics/queries/utilization.sql). Keyed by window
-- (see 0014). Unlike the per-job tables they count every job that held or
-- waited for GPUs during [window_start, computed_until), whenever it was
-- submitted (up to --analytics.lookback before the window). scope is
-- 'cluster' (scope_value '') or 'vc'. capacity is the scope's GPUs from
-- analytics_capacity; utilization = GPUs held by running jobs / capacity (NaN
-- when the capacity is 0).

-- analytics_utilization_hourly: one row per scope and hour (hour_start, UTC): mean
-- GPUs held by running jobs (busy_gpus = GPU-seconds in the hour / 3600), mean
-- GPUs asked for by pending jobs (pending_gpus; busy + pending is the demand),
-- jobs submitted in the hour (submissions; gpu_submissions of them GPU jobs).
CREATE TABLE IF NOT EXISTS {database}.analytics_utilization_hourly (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    hour_start DateTime('UTC'),
    capacity UInt32,
    busy_gpus Float64,
    pending_gpus Float64,
    utilization Float64,
    submissions UInt64,
    gpu_submissions UInt64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value, hour_start);

-- analytics_utilization: the same by hour of day (slot_kind = 'hour_of_day', slot
-- 0-23) and day of week (slot_kind = 'day_of_week', slot 1 = Monday .. 7 = Sunday)
-- in time zone tz (--analytics.timezone): over the window's hours in that
-- slot, mean busy GPUs, utilization (GPU-seconds held / capacity-seconds), and
-- submissions per hour.
CREATE TABLE IF NOT EXISTS {database}.analytics_utilization (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    tz String,
    slot_kind String,
    slot UInt8,
    hours UInt32,
    capacity UInt32,
    busy_gpus Float64,
    utilization Float64,
    submissions UInt64,
    submissions_per_hour Float64,
    gpu_submissions_per_hour Float64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value, slot_kind, slot);

-- analytics_utilization_dist: the distribution of hourly utilization per
-- cluster and VC over the window's hours (Helios' per-VC utilization boxes),
-- with the mean GPU demand.
CREATE TABLE IF NOT EXISTS {database}.analytics_utilization_dist (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    capacity UInt32,
    hours UInt32,
    busy_gpus_mean Float64,
    pending_gpus_mean Float64,
    util_mean Float64,
    util_min Float64,
    util_p10 Float64,
    util_p25 Float64,
    util_p50 Float64,
    util_p75 Float64,
    util_p90 Float64,
    util_max Float64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value);
