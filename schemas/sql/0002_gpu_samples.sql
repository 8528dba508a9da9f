-- Raw GPU samples: one row per GPU (or MIG instance) per tick. Partitioned by
-- day so that retention drops whole partitions (18.16 has no TTL). Metrics a
-- device does not support are NULL. GPU identity beyond the UUID lives in
-- gpu_inventory.
CREATE TABLE IF NOT EXISTS {database}.gpu_samples (
    ts DateTime('UTC'),
    ts_millis UInt16,
    cluster String,
    host String,
    gpu_index UInt16,
    gpu_uuid String,
    mig_uuid String,
    gpu_util Nullable(UInt8),
    mem_util Nullable(UInt8),
    fb_used_bytes Nullable(UInt64),
    fb_free_bytes Nullable(UInt64),
    fb_total_bytes Nullable(UInt64),
    fb_reserved_bytes Nullable(UInt64),
    power_mw Nullable(UInt32),
    power_limit_mw Nullable(UInt32),
    energy_mj Nullable(UInt64),
    gpu_temp_c Nullable(UInt16),
    mem_temp_c Nullable(UInt16),
    sm_clock_mhz Nullable(UInt32),
    mem_clock_mhz Nullable(UInt32),
    pstate Nullable(UInt8),
    clock_event_reasons Nullable(UInt64),
    pcie_replay Nullable(UInt64),
    ecc_sbe_volatile Nullable(UInt64),
    ecc_dbe_volatile Nullable(UInt64),
    remapped_rows_correctable Nullable(UInt32),
    remapped_rows_uncorrectable Nullable(UInt32),
    sm_active Nullable(Float32),
    sm_occupancy Nullable(Float32),
    tensor_active Nullable(Float32),
    dram_active Nullable(Float32),
    processes Nullable(UInt16),
    kafka_partition UInt32,
    kafka_offset UInt64
) ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
ORDER BY (cluster, host, gpu_uuid, mig_uuid, ts, ts_millis);

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.gpu_samples_ledger_mv TO {database}.ingest_ledger AS
SELECT
    'gpu_samples' AS tbl,
    kafka_partition,
    kafka_offset,
    toYYYYMMDD(ts) AS part_key,
    count() AS rows
FROM {database}.gpu_samples
GROUP BY kafka_partition, kafka_offset, part_key;
