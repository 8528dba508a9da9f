-- GPU device events (XID, ECC) from NVML event sets. Driver events carry no
-- time of their own: ts_received is the collector's clock.
CREATE TABLE IF NOT EXISTS {database}.gpu_events (
    ts_received DateTime('UTC'),
    ts_millis UInt16,
    cluster String,
    host String,
    gpu_uuid String,
    event_type String,
    xid UInt64,
    kafka_partition UInt32,
    kafka_offset UInt64
) ENGINE = MergeTree
PARTITION BY toYYYYMM(ts_received)
ORDER BY (cluster, host, ts_received, gpu_uuid);

CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.gpu_events_ledger_mv TO {database}.ingest_ledger AS
SELECT
    'gpu_events' AS tbl,
    kafka_partition,
    kafka_offset,
    toYYYYMM(ts_received) AS part_key,
    count() AS rows
FROM {database}.gpu_events
GROUP BY kafka_partition, kafka_offset, part_key;
