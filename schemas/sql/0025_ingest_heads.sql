-- The last message ingest read from each Kafka partition: its offset and a
-- digest of its key and value (CRC-64/ECMA), written with each flush that
-- read from the partition, before the commit. When ingest is assigned a
-- partition it fetches the message at the highest offset stored here: another
-- message there means the partition's log was replaced (a topic deleted and
-- created again, or a broker that lost messages), even one that has grown past
-- ingest's old position and ledger while ingest was stopped, which neither
-- the committed offset nor the ledger can show. The merge keeps the highest
-- offset per partition; `heliostat ingest reset-partition` deletes the
-- partition's rows.
--   SELECT kafka_offset, digest FROM ingest_heads
--   WHERE topic = 't' AND kafka_partition = 0 ORDER BY kafka_offset DESC LIMIT 1
CREATE TABLE IF NOT EXISTS {database}.ingest_heads (
    topic String,
    kafka_partition UInt32,
    kafka_offset UInt64,
    digest UInt64,
    written DateTime('UTC') DEFAULT now()
) ENGINE = ReplacingMergeTree(kafka_offset)
ORDER BY (topic, kafka_partition);
