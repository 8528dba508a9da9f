-- The ingest ledger: which Kafka messages each raw table already holds. A
-- materialized view on every raw table writes one row per (partition, offset,
-- part_key) of each insert, in the same INSERT as the rows themselves. Ingest
-- inserts one table partition per INSERT, so a ledger row exists exactly when
-- all of that message's rows for that partition are in the table; on start-up
-- ingest skips what the ledger holds, which makes delivery exactly once.
CREATE TABLE IF NOT EXISTS {database}.ingest_ledger (
    tbl String,
    kafka_partition UInt32,
    kafka_offset UInt64,
    part_key UInt32,
    rows UInt64
) ENGINE = SummingMergeTree(rows)
PARTITION BY intDiv(part_key, 100)
ORDER BY (tbl, kafka_partition, kafka_offset, part_key);
