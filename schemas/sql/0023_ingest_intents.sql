-- What ingest is about to insert: before each flush's INSERTs, one row per
-- block (one table partition, part_key) and Kafka partition it draws on, with
-- the first and last offset of the messages that gave it rows. ClickHouse
-- commits a table's part and its ledger view's part one after the other, so an
-- INSERT cut short (the server died between them, or a view failed) can leave
-- rows without ledger rows. Whoever owns a partition next reads the intents at
-- or after its committed offset and looks for each one's first message in the
-- table before reading Kafka: rows found without ledger rows get them, so that
-- the block is not stored twice, even when the replica that wrote it stopped
-- or lost the partition before ClickHouse answered again. Daily partitions,
-- dropped after 14 days.
--   SELECT part_key, first_offset, last_offset FROM ingest_intents
--   WHERE tbl = 'gpu_samples' AND kafka_partition = 0 AND last_offset >= 1234
CREATE TABLE IF NOT EXISTS {database}.ingest_intents (
    tbl String,
    part_key UInt32,
    kafka_partition UInt32,
    first_offset UInt64,
    last_offset UInt64,
    written DateTime('UTC') DEFAULT now()
) ENGINE = MergeTree
PARTITION BY toYYYYMMDD(written)
ORDER BY (tbl, kafka_partition, last_offset);
