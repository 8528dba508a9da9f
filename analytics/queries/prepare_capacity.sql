-- Run preparation, after the runner inserted the configured capacities into
-- {capacity_all} (priority 1-2): the other sources, then each cluster (vc '')
-- and VC gets the capacity of the best source (lowest prio): config 1,
-- config_vcs 2, inventory 3, peak 4, none 9.

-- Schedulable GPUs (priority 3, source inventory), for the clusters without
-- a configured capacity: per GPU (host, gpu_uuid), its MIG instances (rows
-- with a mig_uuid) where it has any, else the whole GPU (the row with
-- mig_uuid ''). Slurm hands out each MIG instance as one gres/gpu, so that
-- is what jobs' GPU counts count.
-- The GPUs and instances are those that reported samples in [since,
-- computed_until) (gpu_samples_1m): gpu_inventory keeps only a last_seen,
-- so a GPU installed, or a MIG layout created, after the window would count
-- in it when the window is computed again later. A GPU whose MIG instances
-- changed in the window counts those of every layout that reported in it.
-- Reading every rollup row of the window costs a row per GPU and minute
-- (BenchmarkCapacityFromSamples), so {gpus_seen} is filled in two steps
-- that read few: the GPUs that reported in the window's last hour (the
-- primary key (cluster, host, gpu_uuid, mig_uuid, minute) skips the other
-- minutes of each GPU), then, of the GPUs gpu_inventory saw since the
-- window's start, only the others, each read for the whole window through
-- the key (installed after the window, down at its end, or not yet in the
-- rollup for an open window's last minutes).
CREATE TABLE {gpus_seen} ENGINE = Memory AS
SELECT DISTINCT cluster, host, gpu_uuid, mig_uuid
FROM {database}.gpu_samples_1m
WHERE minute >= toStartOfMinute(toDateTime(greatest({since}, {computed_until} - 3600)))
    AND minute < toDateTime({computed_until})
    AND cluster IN (SELECT cluster FROM {jobs}
        WHERE cluster NOT IN (SELECT cluster FROM {capacity_all} WHERE vc = '' AND prio <= 2));

INSERT INTO {gpus_seen} (cluster, host, gpu_uuid, mig_uuid)
SELECT DISTINCT cluster, host, gpu_uuid, mig_uuid
FROM {database}.gpu_samples_1m
WHERE minute >= toStartOfMinute(toDateTime({since})) AND minute < toDateTime({computed_until})
    AND (cluster, host, gpu_uuid, mig_uuid) IN (
        SELECT cluster, host, gpu_uuid, mig_uuid
        FROM {database}.gpu_inventory
        WHERE last_seen >= toDateTime({since})
            AND cluster IN (SELECT cluster FROM {jobs})
            AND cluster NOT IN (SELECT cluster FROM {capacity_all} WHERE vc = '' AND prio <= 2)
            AND (cluster, host, gpu_uuid, mig_uuid) NOT IN (SELECT cluster, host, gpu_uuid, mig_uuid FROM {gpus_seen})
    );

INSERT INTO {capacity_all} (cluster, vc, gpus, source, prio)
SELECT cluster, '', toUInt32(sum(units)), 'inventory', 3
FROM (
    SELECT cluster, host, gpu_uuid, greatest(uniqExactIf(mig_uuid, mig_uuid != ''), 1) AS units
    FROM {gpus_seen}
    GROUP BY cluster, host, gpu_uuid
)
GROUP BY cluster;

-- A cluster without samples in the window (an imported trace, rollup
-- partitions dropped by --retention.rollup) falls back to the GPUs in
-- gpu_inventory seen since the window's start, by the same rule: an upper
-- bound for a window in the past (GPUs added since count too).
INSERT INTO {capacity_all} (cluster, vc, gpus, source, prio)
SELECT cluster, '', toUInt32(sum(units)), 'inventory', 3
FROM (
    SELECT cluster, host, gpu_uuid, greatest(uniqExactIf(mig_uuid, mig_uuid != ''), 1) AS units
    FROM {database}.gpu_inventory
    WHERE last_seen >= toDateTime({since}) AND cluster IN (SELECT cluster FROM {jobs})
        AND cluster NOT IN (SELECT cluster FROM {capacity_all} WHERE vc = '' AND prio <= 3)
    GROUP BY cluster, host, gpu_uuid
)
GROUP BY cluster;

-- The most GPUs held at once by running jobs in [since, computed_until), per
-- cluster and VC (priority 4): the changes of GPUs held (+g at a start, -g
-- at an end) sorted by time, ends before starts at one instant (key 2t for
-- an end, 2t+1 for a start), accumulated, at their maximum.
INSERT INTO {capacity_all} (cluster, vc, gpus, source, prio)
SELECT cluster, scope_vc,
    toUInt32(greatest(0, arrayReduce('max', arrayCumSum(arraySort((d, k) -> k, groupArray(d), groupArray(k)))))),
    'peak', 4
FROM (
    SELECT cluster, arrayJoin([vc, '']) AS scope_vc, k, d
    FROM (
        SELECT cluster, vc, toUInt64(greatest(hold_from, {since})) * 2 + 1 AS k, toInt64(g) AS d
        FROM {jobs}
        WHERE hold_to > 0 AND g > 0 AND greatest(hold_from, {since}) < least(hold_to, {computed_until})
        UNION ALL
        SELECT cluster, vc, toUInt64(least(hold_to, {computed_until})) * 2 AS k, -toInt64(g) AS d
        FROM {jobs}
        WHERE hold_to > 0 AND g > 0 AND greatest(hold_from, {since}) < least(hold_to, {computed_until})
    )
)
GROUP BY cluster, scope_vc;

-- Every cluster and VC of the window gets a row, 0 GPUs where nothing is
-- known (priority 9).
INSERT INTO {capacity_all} (cluster, vc, gpus, source, prio)
SELECT DISTINCT cluster, arrayJoin([vc, '']), toUInt32(0), 'none', 9
FROM {jobs};

CREATE TABLE {capacity} ENGINE = Memory AS
SELECT cluster, vc, argMin(gpus, prio) AS gpus, argMin(source, prio) AS source
FROM {capacity_all}
GROUP BY cluster, vc;
