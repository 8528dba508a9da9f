-- The node demand the actuator's control loop records for its demand model
-- (actuator/loop, actuator/demandlog), so that a restarted actuator
-- forecasts from the history it had instead of watching demand for another
-- --actuator.forecast-min-history first. demand is the largest demand a pass
-- saw within the step that starts at step (busy nodes plus the nodes the
-- partition's pending jobs need). The loop writes a step's row whenever a
-- pass raises that step's largest value, so a step can have several rows:
-- read max(demand) per step. Rows are never updated; drop old monthly
-- partitions to bound the table (the loop reads the last 30 days).
--   SELECT partition_name, step, max(demand) AS demand
--   FROM actuator_demand WHERE cluster = 'c' AND step >= now() - INTERVAL 1 DAY
--   GROUP BY partition_name, step ORDER BY partition_name, step
CREATE TABLE IF NOT EXISTS {database}.actuator_demand (
    cluster String,
    partition_name String,
    step DateTime('UTC'),
    demand Float64,
    recorded_at DateTime('UTC')
) ENGINE = MergeTree()
PARTITION BY toYYYYMM(step)
ORDER BY (cluster, partition_name, step);
