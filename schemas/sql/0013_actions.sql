-- The actuator's audit log (actuator/audit): every action it decides on —
-- set a job's priority, power a node down or up — with what it rests on.
-- Each action is written twice: once with outcome 'planned' (version 1)
-- BEFORE it is sent to the scheduler, and once with its outcome (version 2)
-- after: 'applied', 'failed' or 'skipped' (dry run, not allowlisted, rate
-- limit, node busy), error saying why. Under FINAL an action shows its
-- outcome; one still 'planned' was cut off between the two writes (the
-- process died), so whether it was applied is unknown. target is the job id
-- or node name; value the new priority (NULL for power actions), previous the
-- priority it replaced. basis is JSON: the prediction (predicted_s, source
-- model or time_limit, QSSF rank and GPU service time) or the power plan's
-- forecast and target behind the action. dry_run = 1 when --actuator.apply
-- was not set. History, newest first:
--   SELECT decided_at, kind, target, outcome, error, reason
--   FROM actions FINAL WHERE cluster = 'c' ORDER BY decided_at DESC, action_id DESC LIMIT 100
CREATE TABLE IF NOT EXISTS {database}.actions (
    cluster String,
    action_id String,
    adapter String,
    kind String,
    target String,
    partition_name String,
    value Nullable(Int64),
    previous Nullable(Int64),
    reason String,
    basis String,
    model_version UInt64,
    dry_run UInt8,
    outcome String,
    error String,
    decided_at DateTime('UTC'),
    recorded_at DateTime('UTC'),
    version UInt8
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(decided_at)
ORDER BY (cluster, decided_at, action_id);
