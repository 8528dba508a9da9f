-- Characterization runs (analytics.Runner) and the capacity each run used.
--
-- Every analytics result table (0014-0019) is keyed by a window: the jobs
-- submitted in [window_start, window_end), named by the ISO 8601 interval
-- window_id = '2020-09-01T00:00:00Z/2020-10-01T00:00:00Z'. The result tables are
-- partitioned by window_id, and a run replaces a window's partition atomically
-- (ALTER TABLE … REPLACE PARTITION from a staging table), so re-running a
-- window replaces its rows and never doubles them; readers need no FINAL.
--
-- analytics_runs: one row per (window_id, job) once merged (read with FINAL):
-- when it last ran, up to when it saw data (computed_until = min(window_end,
-- the runner's clock): an open window is recomputed as data arrives), the
-- rows it wrote and how long it took.
CREATE TABLE IF NOT EXISTS {database}.analytics_runs (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    computed_until DateTime('UTC'),
    job String,
    rows_written UInt64,
    seconds Float64,
    run_at DateTime('UTC'),
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (window_id, job);

-- analytics_capacity: the GPUs each cluster (vc = '') and virtual cluster
-- (Slurm partition) had in a window, as the run determined them, and where
-- from (source): 'config' (--analytics.capacity / --analytics.capacity-file),
-- 'config_vcs' (a cluster's configured VCs summed), 'inventory' (GPUs in
-- gpu_inventory seen since the window's start, whole GPUs only), or 'peak'
-- (the most GPUs held at once by running jobs in the window: a lower bound,
-- used for traces and when nothing better is known). Utilization divides by it.
CREATE TABLE IF NOT EXISTS {database}.analytics_capacity (
    window_id String,
    window_start DateTime('UTC'),
    window_end DateTime('UTC'),
    cluster String,
    vc String,
    gpus UInt32,
    source String
) ENGINE = MergeTree
PARTITION BY window_id
ORDER BY (cluster, vc);
