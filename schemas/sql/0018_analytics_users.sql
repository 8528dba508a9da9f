-- User results (analytics/queries/users.sql). Keyed by window (see 0014); the
-- window's jobs; scope 'cluster' or 'vc'; GPU time and state_class as in 0015.

-- analytics_users: each user's jobs, GPU time and its share of the scope's,
-- rank by GPU time (1 = most), queuing delay (sum over the user's jobs with
-- a known delay) and its share of the scope's, and the user's completion,
-- cancel, fail and unknown rates over the user's ended jobs.
CREATE TABLE IF NOT EXISTS {database}.analytics_users (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    user String,
    jobs UInt64,
    gpu_jobs UInt64,
    ended_jobs UInt64,
    gpu_seconds Float64,
    gpu_time_share Float64,
    gpu_time_rank UInt32,
    queue_s Float64,
    queue_share Float64,
    complete_rate Float64,
    cancel_rate Float64,
    fail_rate Float64,
    unknown_rate Float64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value, user);

-- analytics_user_concentration: the share of the scope's GPU time held by its
-- top top_pct % of users by GPU time, and the share of its queuing delay borne
-- by the top top_pct % by queuing delay; the top k = ceil(top_pct/100 x
-- users), users counting everyone who submitted a job in the window.
CREATE TABLE IF NOT EXISTS {database}.analytics_user_concentration (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    scope String,
    scope_value String,
    top_pct UInt8,
    users UInt64,
    top_users UInt64,
    gpu_time_share Float64,
    queue_share Float64
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, scope, scope_value, top_pct);
