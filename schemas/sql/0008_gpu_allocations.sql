-- GPU ↔ job allocation intervals. A source writes an interval when it opens
-- (alloc_end NULL, version 0) and again when it closes (version = end in ms);
-- the closing row replaces the open one. gpu_index is -1 where only the UUID
-- is known, gpu_uuid '' where only the index is (scheduler records). Analytics
-- joins samples to jobs by host, GPU and time; query with FINAL.
CREATE TABLE IF NOT EXISTS {database}.gpu_allocations (
    cluster String,
    host String,
    gpu_index Int32,
    gpu_uuid String,
    mig_uuid String,
    job_id String,
    user String,
    alloc_start DateTime('UTC'),
    alloc_end Nullable(DateTime('UTC')),
    source String,
    version UInt64,
    kafka_partition UInt32,
    kafka_offset UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(alloc_start)
ORDER BY (cluster, host, gpu_index, gpu_uuid, mig_uuid, job_id, alloc_start, source);

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.gpu_allocations_ledger_mv TO {database}.ingest_ledger AS
SELECT
    'gpu_allocations' AS tbl,
    kafka_partition,
    kafka_offset,
    toYYYYMM(alloc_start) AS part_key,
    count() AS rows
FROM {database}.gpu_allocations
GROUP BY kafka_partition, kafka_offset, part_key;
