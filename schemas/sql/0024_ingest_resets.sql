-- Partitions reset by `heliostat ingest reset-partition` (ingest.ResetPartition):
-- for each part key of the table, the range of offsets at or after the
-- reset's offset whose rows the table kept from the old log (a topic deleted
-- and created again, or messages a broker lost), written before the reset
-- forgets the ledger. Kafka gives those offsets out again to new messages,
-- so a row found in the table at one of them may be the old message's:
-- after an INSERT fails and its ledger rows are missing, ingest does not take
-- such a row as proof that the new block landed (see ingest's witness).
-- Never pruned: a few rows per reset.
--   SELECT kafka_partition, part_key, first_offset, last_offset, rows, reset_at
--   FROM ingest_resets WHERE tbl = 'gpu_samples' ORDER BY reset_at
CREATE TABLE IF NOT EXISTS {database}.ingest_resets (
    tbl String,
    kafka_partition UInt32,
    part_key UInt32,
    first_offset UInt64,
    last_offset UInt64,
    rows UInt64,
    reset_at DateTime('UTC') DEFAULT now()
) ENGINE = MergeTree
ORDER BY (tbl, kafka_partition, part_key);
