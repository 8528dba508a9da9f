-- One-minute rollup of GPU samples, maintained by ClickHouse on every insert,
-- for dashboards over long ranges. Read it with the -Merge combinators, e.g.
-- avgIfMerge(gpu_util_avg), and GROUP BY the key: parts merge lazily.
-- avgIf/maxIf over assumeNotNull keeps NULLs (unsupported metrics) out of the
-- aggregates on every ClickHouse version since 18.16. (maxIfMerge of a metric
-- a GPU never reported is 0: avgIfMerge is nan then, check that.)
CREATE TABLE IF NOT EXISTS {database}.gpu_samples_1m (
    minute DateTime('UTC'),
    cluster String,
    host String,
    gpu_uuid String,
    mig_uuid String,
    samples AggregateFunction(count),
    gpu_util_avg AggregateFunction(avgIf, Float64, UInt8),
    gpu_util_max AggregateFunction(maxIf, Float64, UInt8),
    mem_util_avg AggregateFunction(avgIf, Float64, UInt8),
    fb_used_max AggregateFunction(maxIf, Float64, UInt8),
    power_avg AggregateFunction(avgIf, Float64, UInt8),
    power_max AggregateFunction(maxIf, Float64, UInt8),
    energy_max AggregateFunction(maxIf, Float64, UInt8),
    gpu_temp_max AggregateFunction(maxIf, Float64, UInt8),
    sm_active_avg AggregateFunction(avgIf, Float64, UInt8),
    tensor_active_avg AggregateFunction(avgIf, Float64, UInt8)
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(minute)
ORDER BY (cluster, host, gpu_uuid, mig_uuid, minute);

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.gpu_samples_1m_mv TO {database}.gpu_samples_1m AS
SELECT
    toStartOfMinute(ts) AS minute,
    cluster,
    host,
    gpu_uuid,
    mig_uuid,
    countState() AS samples,
    avgIfState(toFloat64(assumeNotNull(gpu_util)), isNotNull(gpu_util)) AS gpu_util_avg,
    maxIfState(toFloat64(assumeNotNull(gpu_util)), isNotNull(gpu_util)) AS gpu_util_max,
    avgIfState(toFloat64(assumeNotNull(mem_util)), isNotNull(mem_util)) AS mem_util_avg,
    maxIfState(toFloat64(assumeNotNull(fb_used_bytes)), isNotNull(fb_used_bytes)) AS fb_used_max,
    avgIfState(toFloat64(assumeNotNull(power_mw)), isNotNull(power_mw)) AS power_avg,
    maxIfState(toFloat64(assumeNotNull(power_mw)), isNotNull(power_mw)) AS power_max,
    maxIfState(toFloat64(assumeNotNull(energy_mj)), isNotNull(energy_mj)) AS energy_max,
    maxIfState(toFloat64(assumeNotNull(gpu_temp_c)), isNotNull(gpu_temp_c)) AS gpu_temp_max,
    avgIfState(toFloat64(assumeNotNull(sm_active)), isNotNull(sm_active)) AS sm_active_avg,
    avgIfState(toFloat64(assumeNotNull(tensor_active)), isNotNull(tensor_active)) AS tensor_active_avg
FROM {database}.gpu_samples
GROUP BY minute, cluster, host, gpu_uuid, mig_uuid;
