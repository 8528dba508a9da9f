package ingest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
)

// Heads (ingest_heads, migration 0025): with each flush, before the commit,
// ingest stores for every Kafka partition the flush read from the offset of
// the last message it read there and a digest of that message. When it is
// assigned a partition, it fetches the message at the highest offset stored
// (checkHead): a message with another digest there means the log was
// replaced, even when the new log has grown past ingest's position and its
// ledger while ingest was stopped, so that neither shows it (see rewind).
// Any message serves, numbered or not, stored, skipped as a copy or
// dead-lettered: its offset and content are a fact about the log ingest read.

// headKey names a Kafka partition.
type headKey struct {
	topic     string
	partition int32
}

// head is the last message a batch read from a partition. It keeps the
// message's key and value (kafka-go gives each message its own) and digests
// them only when the batch is written: one message per partition and flush.
type head struct {
	offset     int64
	key, value []byte
}

// storedHead is a head as ingest_heads holds it.
type storedHead struct {
	offset int64
	digest uint64
}

// digest identifies a message by its key and value: CRC-64/ECMA of the key's
// length, the key and the value. It is not a defence against a forger, only
// against a log that now holds another message at an offset.
func digest(key, value []byte) uint64 {
	tab := crc64.MakeTable(crc64.ECMA)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(key)))
	crc := crc64.Update(0, tab, n[:])
	crc = crc64.Update(crc, tab, key)
	return crc64.Update(crc, tab, value)
}

// writeHeads stores the batch's heads, retrying until ClickHouse takes them
// or ctx ends. Rows are only added (the merge keeps the highest offset of a
// partition), so a retry after an uncertain failure does no harm.
func (in *Ingester) writeHeads(ctx context.Context, heads map[headKey]head) error {
	if len(heads) == 0 {
		return nil
	}
	return in.retryWrite(ctx, "heads", "recording the last message read from each partition failed, retrying",
		func() error { return in.sendHeads(ctx, heads) }, "partitions", len(heads))
}

func (in *Ingester) sendHeads(ctx context.Context, heads map[headKey]head) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	batch, err := in.conn.PrepareBatch(sctx, "INSERT INTO "+in.cfg.ClickHouse.Database+
		".ingest_heads (topic, kafka_partition, kafka_offset, digest)")
	if err != nil {
		return fmt.Errorf("prepare ingest_heads insert: %w", err)
	}
	defer batch.Abort()
	for k, h := range heads {
		if err := batch.Append(k.topic, uint32(k.partition), uint64(h.offset), digest(h.key, h.value)); err != nil {
			return fmt.Errorf("append ingest_heads row: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("send %d ingest_heads rows: %w", len(heads), err)
	}
	return nil
}

// loadHead returns the head stored at the highest offset for a's partition,
// with offset -1 when there is none.
func (in *Ingester) loadHead(ctx context.Context, a assignment) (storedHead, error) {
	rows, err := in.conn.Query(ctx, "SELECT kafka_offset, digest FROM "+in.cfg.ClickHouse.Database+
		".ingest_heads WHERE topic = ? AND kafka_partition = ? ORDER BY kafka_offset DESC LIMIT 1",
		a.h.topic(), uint32(a.partition))
	if err != nil {
		return storedHead{offset: -1}, fmt.Errorf("query ingest_heads: %w", err)
	}
	defer rows.Close()
	h := storedHead{offset: -1}
	if rows.Next() {
		var off uint64
		if err := rows.Scan(&off, &h.digest); err != nil {
			return storedHead{offset: -1}, fmt.Errorf("scan ingest_heads: %w", err)
		}
		h.offset = int64(off)
	}
	return h, rows.Err()
}

// checkHead fetches the message at h's offset and returns a rewind when its
// digest is not h's: the partition's log was replaced. A head outside the
// log (none, below the first offset after retention, or at or past the log
// end, which the ledger and committed offset checks cover) tells nothing,
// nor does an offset without a record (compacted, or a transaction marker).
func (in *Ingester) checkHead(ctx context.Context, a assignment, h storedHead, first, end int64) (*rewind, error) {
	if h.offset < first || h.offset >= end {
		return nil, nil
	}
	key, value, ok, err := fetchAt(ctx, in.kafkaClient(), a.h.topic(), int(a.partition), h.offset)
	if err != nil || !ok {
		return nil, err
	}
	if got := digest(key, value); got != h.digest {
		return &rewind{topic: a.h.topic(), partition: a.partition, position: a.offset, ledger: -1, first: first, end: end,
			replaced: fmt.Sprintf("offset %d holds another message than the one ingest read there (digest %016x, stored %016x)",
				h.offset, got, h.digest)}, nil
	}
	return nil, nil
}

// fetchAt returns the key and value of the message at offset of a topic
// partition; ok is false when the log holds no record at that offset (none
// was written there yet, retention dropped it, compaction removed it, or it
// is a transaction marker).
func fetchAt(ctx context.Context, c *kafka.Client, topic string, partition int, offset int64) (key, value []byte, ok bool, err error) {
	resp, err := c.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: partition, Offset: offset,
		MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond})
	if err != nil {
		return nil, nil, false, fmt.Errorf("fetch %s/%d at offset %d: %w", topic, partition, offset, err)
	}
	if errors.Is(resp.Error, kafka.OffsetOutOfRange) {
		return nil, nil, false, nil
	}
	if resp.Error != nil {
		return nil, nil, false, fmt.Errorf("fetch %s/%d at offset %d: %w", topic, partition, offset, resp.Error)
	}
	for {
		rec, err := resp.Records.ReadRecord()
		if errors.Is(err, io.EOF) || err == nil && rec.Offset > offset {
			return nil, nil, false, nil
		}
		if err != nil {
			return nil, nil, false, fmt.Errorf("fetch %s/%d at offset %d: %w", topic, partition, offset, err)
		}
		if rec.Offset < offset {
			continue
		}
		if key, err = kafka.ReadAll(rec.Key); err != nil {
			return nil, nil, false, fmt.Errorf("fetch %s/%d at offset %d: key: %w", topic, partition, offset, err)
		}
		if value, err = kafka.ReadAll(rec.Value); err != nil {
			return nil, nil, false, fmt.Errorf("fetch %s/%d at offset %d: value: %w", topic, partition, offset, err)
		}
		return key, value, true, nil
	}
}
