-- The highest message number ingest has stored per producer and key, for each
-- topic partition (collector/publish puts the headers heliostat-producer and
-- heliostat-seq on every message). A collector that resends a message (a
-- write that timed out after the broker stored it, a spool replayed after a
-- crash) resends its producer and number too; ingest drops a message whose
-- number is at or below the one stored here at another offset, which makes
-- the collector → ClickHouse path exactly once. Ingest writes a batch's rows
-- after the batch's table rows and before it commits the Kafka offsets, so a
-- number here always belongs to rows already stored; rows are only added, and
-- the merge keeps the highest number.
--   SELECT producer, msg_key, max(seq), argMax(kafka_offset, seq)
--   FROM ingest_sequences WHERE topic = 't' AND kafka_partition = 0
--   GROUP BY producer, msg_key
CREATE TABLE IF NOT EXISTS {database}.ingest_sequences (
    topic String,
    kafka_partition UInt32,
    producer String,
    msg_key String,
    seq UInt64,
    kafka_offset UInt64,
    written_at DateTime('UTC')
) ENGINE = ReplacingMergeTree(seq)
ORDER BY (topic, kafka_partition, producer, msg_key);
