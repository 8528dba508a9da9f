package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/schemas"
)

// Deduplication of resent messages.
//
// The collector's publisher numbers its messages per topic and key (headers
// schemas.HeaderProducer and schemas.HeaderSequence) and keeps the numbers
// when it sends a message again, so a copy in Kafka carries the number of a
// message already there. Within a partition a producer's messages of one key
// arrive in order (the publisher never lets one overtake another), so ingest
// only needs the highest number it stored per producer and key: a message at
// or below it, at another offset, is a copy and is dropped.
//
// The highest numbers live in ingest_sequences. A batch writes its marks
// after its table rows and before its offsets are committed, so a stored mark
// always belongs to rows already in ClickHouse: after a crash the partition is
// read again from the committed offset, the marks read at assignment cover
// everything before it, and whatever follows is seen again and marked again.
// A message at the very offset of its mark is the original read once more
// (its rows may be only partly in, which the ledger settles), not a copy.

// seqKey identifies one producer's messages of one key in one partition.
type seqKey struct {
	topic     string
	partition int32
	producer  string
	key       string
}

// seqMark is the highest number seen in a stream and the offset carrying it.
type seqMark struct {
	seq    uint64
	offset int64
}

// sequenceOf reads the sequence headers of a message. A message without them
// gets a zero Sequence and no error.
func sequenceOf(headers []kafka.Header) (schemas.Sequence, error) {
	var producer, seq []byte
	for _, h := range headers {
		switch h.Key {
		case schemas.HeaderProducer:
			producer = nonNil(h.Value)
		case schemas.HeaderSequence:
			seq = nonNil(h.Value)
		}
	}
	s, err := schemas.ParseSequence(producer, seq)
	if errors.Is(err, schemas.ErrNoSequence) {
		return schemas.Sequence{}, nil
	}
	return s, err
}

// nonNil keeps a present but empty header value apart from an absent header.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// verdict is what the sequence numbers say about one message.
type verdict int

const (
	seqNew    verdict = iota // numbered above the mark
	seqResent                // a copy, after the mark, of a message already stored: drop it
	seqStored                // at or below the mark, before its offset: read again, already stored; drop it
	seqAgain                 // the message that set the mark, read again: the ledger settles it
)

// checkSequence judges a message against the marks. A new message raises its
// stream's mark in marks and in the batch's pending marks; gap is the count of
// numbers it skipped (messages lost upstream).
func checkSequence(marks, pending map[seqKey]seqMark, k seqKey, seq uint64, offset int64) (v verdict, gap uint64) {
	m, ok := marks[k]
	switch {
	case ok && seq <= m.seq && offset == m.offset:
		return seqAgain, 0
	case ok && seq <= m.seq && offset < m.offset:
		return seqStored, 0
	case ok && seq <= m.seq:
		return seqResent, 0
	}
	if seq > m.seq+1 {
		gap = seq - m.seq - 1
	}
	marks[k] = seqMark{seq: seq, offset: offset}
	pending[k] = marks[k]
	return seqNew, gap
}

// loadSequences adds to marks the stored marks of one assigned partition.
func (in *Ingester) loadSequences(ctx context.Context, a assignment, marks map[seqKey]seqMark) error {
	rows, err := in.conn.Query(ctx, "SELECT producer, msg_key, max(seq), argMax(kafka_offset, seq) FROM "+in.cfg.ClickHouse.Database+
		".ingest_sequences WHERE topic = ? AND kafka_partition = ? GROUP BY producer, msg_key",
		a.h.topic(), uint32(a.partition))
	if err != nil {
		return fmt.Errorf("query ingest_sequences: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var producer, key string
		var seq, off uint64
		if err := rows.Scan(&producer, &key, &seq, &off); err != nil {
			return fmt.Errorf("scan ingest_sequences: %w", err)
		}
		marks[seqKey{topic: a.h.topic(), partition: a.partition, producer: producer, key: key}] = seqMark{seq: seq, offset: int64(off)}
	}
	return rows.Err()
}

// writeSequences stores a batch's marks, retrying until ClickHouse takes them
// or ctx ends. Rows are only added (the table keeps the highest number), so a
// retry after an uncertain failure does no harm.
func (in *Ingester) writeSequences(ctx context.Context, pending map[seqKey]seqMark) error {
	if len(pending) == 0 {
		return nil
	}
	backoff := newBackoff(100*time.Millisecond, in.cfg.RetryMax)
	for {
		err := in.sendSequences(ctx, pending)
		if err == nil {
			in.m.clickhouseUp.Set(1)
			return nil
		}
		in.m.clickhouseUp.Set(0)
		in.m.errors.WithLabelValues("sequences").Inc()
		in.warnf("sequences", "writing message sequence marks failed, retrying", "marks", len(pending), "err", err)
		if !backoff.wait(ctx) {
			return ctx.Err()
		}
	}
}

func (in *Ingester) sendSequences(ctx context.Context, pending map[seqKey]seqMark) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	batch, err := in.conn.PrepareBatch(sctx, "INSERT INTO "+in.cfg.ClickHouse.Database+
		".ingest_sequences (topic, kafka_partition, producer, msg_key, seq, kafka_offset, written_at)")
	if err != nil {
		return fmt.Errorf("prepare ingest_sequences insert: %w", err)
	}
	defer batch.Abort()
	now := time.Now().UTC().Truncate(time.Second)
	for k, m := range pending {
		if err := batch.Append(k.topic, uint32(k.partition), k.producer, k.key, m.seq, uint64(m.offset), now); err != nil {
			return fmt.Errorf("append ingest_sequences row: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("send %d ingest_sequences rows: %w", len(pending), err)
	}
	return nil
}
