-- When each producer (collector/publish's heliostat-producer header) last sent
-- a message to each topic partition: the message's Kafka timestamp, capped at
-- ingest's clock, kept to the minute. A partition's clock is the latest such
-- time. Ingest forgets a producer that has sent nothing to the partition for
-- --dedupe.window (7 days) of that clock: its rows here and in
-- ingest_sequences are deleted, so the marks stay bounded although a
-- producer id is new at each collector start and job events are keyed by
-- job. A copy of one of its messages sent later than that is stored again.
--   SELECT producer, max(last_time) FROM ingest_producers
--   WHERE topic = 't' AND kafka_partition = 0 GROUP BY producer
CREATE TABLE IF NOT EXISTS {database}.ingest_producers (
    topic String,
    kafka_partition UInt32,
    producer String,
    last_time DateTime('UTC')
) ENGINE = ReplacingMergeTree(last_time)
ORDER BY (topic, kafka_partition, producer);
