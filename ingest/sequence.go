package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
// gets a zero Sequence and no error. One that carries a header twice with
// different values gets an error: either number could be the message's, and
// taking the wrong one could drop a new message as a copy.
func sequenceOf(headers []kafka.Header) (schemas.Sequence, error) {
	var producer, seq []byte
	for _, h := range headers {
		var dst *[]byte
		switch h.Key {
		case schemas.HeaderProducer:
			dst = &producer
		case schemas.HeaderSequence:
			dst = &seq
		default:
			continue
		}
		if *dst != nil && !bytes.Equal(*dst, h.Value) {
			return schemas.Sequence{}, fmt.Errorf("ingest: header %s twice, with different values", h.Key)
		}
		*dst = nonNil(h.Value)
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

// Forgetting idle producers.
//
// A producer id is new at each collector start, and job events are keyed by
// job, so marks would pile up for good. Ingest therefore also keeps, per
// partition, when each producer last sent a message there (the message's
// Kafka timestamp, capped at ingest's clock), and stores it in
// ingest_producers. A partition's clock is the latest of those times; a
// producer more than Config.DedupeWindow behind it is forgotten: its marks
// are dropped from memory and deleted from both tables. Message time rather
// than wall time keeps a backlog read after an ingest outage judged by when
// its messages were sent.

// prodKey identifies one producer's messages in one partition.
type prodKey struct {
	topic     string
	partition int32
	producer  string
}

func (k seqKey) prod() prodKey {
	return prodKey{topic: k.topic, partition: k.partition, producer: k.producer}
}

// partKey identifies one partition.
type partKey struct {
	topic     string
	partition int32
}

// producerSeen is when a producer last sent a message to a partition, and
// the time last queued for ingest_producers.
type producerSeen struct {
	last, stored time.Time
}

// producerStoreEvery is how far a producer's time moves before it is stored
// again: ingest_producers gets a row per producer a minute at most.
const producerStoreEvery = time.Minute

// minMessageTime is the earliest Kafka timestamp taken at face value; a
// message without one (-1) counts as sent when ingest read it.
var minMessageTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// messageTime is when a message was sent, as far as forgetting producers
// goes: its timestamp, unless that is missing or ahead of ingest's clock.
func messageTime(ts, now time.Time) time.Time {
	if ts.Before(minMessageTime) || ts.After(now) {
		return now
	}
	return ts
}

// sequences is a generation's deduplication state. The sink goroutine alone
// uses it.
type sequences struct {
	marks     map[seqKey]seqMark
	producers map[prodKey]*producerSeen
	swept     time.Time // wall clock of the last look for idle producers
}

func newSequences() *sequences {
	return &sequences{marks: map[seqKey]seqMark{}, producers: map[prodKey]*producerSeen{}}
}

// seen notes a message of producer k sent at t. When the producer's time
// moved by producerStoreEvery since it was last stored, it goes to pending.
func (s *sequences) seen(k prodKey, t time.Time, pending map[prodKey]time.Time) {
	p := s.producers[k]
	if p == nil {
		p = &producerSeen{}
		s.producers[k] = p
	}
	if t.After(p.last) {
		p.last = t
	}
	if p.last.Sub(p.stored) >= producerStoreEvery {
		p.stored = p.last
		pending[k] = p.last
	}
}

// idle returns the producers whose last message in their partition is more
// than window older than the partition's clock, in no particular order.
func (s *sequences) idle(window time.Duration) []prodKey {
	clocks := map[partKey]time.Time{}
	for k, p := range s.producers {
		pk := partKey{k.topic, k.partition}
		if p.last.After(clocks[pk]) {
			clocks[pk] = p.last
		}
	}
	var out []prodKey
	for k, p := range s.producers {
		if clocks[partKey{k.topic, k.partition}].Sub(p.last) > window {
			out = append(out, k)
		}
	}
	return out
}

// forget drops producers and their marks; it returns how many marks went.
func (s *sequences) forget(producers []prodKey) int {
	gone := make(map[prodKey]bool, len(producers))
	for _, k := range producers {
		gone[k] = true
		delete(s.producers, k)
	}
	n := 0
	for k := range s.marks {
		if gone[k.prod()] {
			delete(s.marks, k)
			n++
		}
	}
	return n
}

// sweepEvery is how often the sink looks for idle producers: hourly, or
// more often for a window under 8 hours.
func sweepEvery(window time.Duration) time.Duration {
	return min(time.Hour, window/8)
}

// sweepSequences forgets the producers idle for longer than the window and
// queues the deletion of their rows in b: the flusher deletes them after the
// batches before b, which may still hold their marks, are written. A failed
// delete is retried at the next assignment, which loads the rows and finds
// the producers idle again.
func (in *Ingester) sweepSequences(s *sequences, b *batch) {
	window := in.cfg.DedupeWindow
	if window <= 0 || time.Since(s.swept) < sweepEvery(window) {
		return
	}
	s.swept = time.Now()
	idle := s.idle(window)
	if len(idle) == 0 {
		return
	}
	if b.forgotAt == nil {
		b.forgotAt = map[prodKey]time.Time{}
	}
	for _, k := range idle {
		b.forgotAt[k] = s.producers[k].last
	}
	n := s.forget(idle)
	b.forget = append(b.forget, idle...)
	in.m.seqForgotten.Add(float64(len(idle)))
	in.m.seqMarks.Set(float64(len(s.marks)))
	in.logger.Info("forgot the sequence marks of producers silent for the dedupe window",
		"producers", len(idle), "marks", n, "window", window)
}

// stillIdle returns the producers of forget that did not send again after
// they were forgotten: none of the batch's messages from them (senders) is
// newer than their last message then (forgotAt). The marks just written for
// one that did must not be deleted with its old ones, since ingest
// remembers it again; the batch may also hold a forgotten producer's older
// messages, which do not count.
func stillIdle(forget []prodKey, forgotAt, senders map[prodKey]time.Time) []prodKey {
	return slices.DeleteFunc(slices.Clone(forget), func(k prodKey) bool {
		at, ok := senders[k]
		return ok && at.After(forgotAt[k])
	})
}

// pruneChunk bounds the producers named in one DELETE, keeping the statement
// well under ClickHouse's max_query_size (256 KiB).
const pruneChunk = 500

// pruneSequences deletes the rows of producers from ingest_sequences and
// then ingest_producers (ALTER … DELETE mutations, which ClickHouse applies
// in the background). Marks go first: if the second delete fails, the
// producer's stored time still shows it idle at the next assignment.
func (in *Ingester) pruneSequences(ctx context.Context, producers []prodKey) error {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for len(producers) > 0 {
		chunk := producers[:min(len(producers), pruneChunk)]
		producers = producers[len(chunk):]
		var list strings.Builder
		for i, k := range chunk {
			if i > 0 {
				list.WriteString(", ")
			}
			fmt.Fprintf(&list, "(%s, %d, %s)", quote(k.topic), k.partition, quote(k.producer))
		}
		for _, table := range []string{"ingest_sequences", "ingest_producers"} {
			q := "ALTER TABLE " + in.cfg.ClickHouse.Database + "." + table +
				" DELETE WHERE (topic, kafka_partition, producer) IN (" + list.String() + ")"
			if err := in.conn.Exec(pctx, q); err != nil {
				return fmt.Errorf("delete %d producers from %s: %w", len(chunk), table, err)
			}
		}
	}
	return nil
}

// loadSequences adds to s the stored marks and producer times of one
// assigned partition. A producer with marks but no stored time (its row was
// not written, or it predates ingest_producers) is given the partition's
// clock, or now when the partition has none, and returned in unrecorded to be
// stored: it is forgotten a window later unless it sends again.
func (in *Ingester) loadSequences(ctx context.Context, a assignment, s *sequences, unrecorded map[prodKey]time.Time) error {
	topic, db := a.h.topic(), in.cfg.ClickHouse.Database
	prows, err := in.conn.Query(ctx, "SELECT producer, max(last_time) FROM "+db+
		".ingest_producers WHERE topic = ? AND kafka_partition = ? GROUP BY producer", topic, uint32(a.partition))
	if err != nil {
		return fmt.Errorf("query ingest_producers: %w", err)
	}
	defer prows.Close()
	var clock time.Time
	recorded := map[string]bool{}
	for prows.Next() {
		var producer string
		var last time.Time
		if err := prows.Scan(&producer, &last); err != nil {
			return fmt.Errorf("scan ingest_producers: %w", err)
		}
		s.producers[prodKey{topic: topic, partition: a.partition, producer: producer}] = &producerSeen{last: last, stored: last}
		recorded[producer] = true
		if last.After(clock) {
			clock = last
		}
	}
	if err := prows.Err(); err != nil {
		return fmt.Errorf("read ingest_producers: %w", err)
	}
	if clock.IsZero() {
		clock = time.Now().UTC().Truncate(time.Second)
	}
	rows, err := in.conn.Query(ctx, "SELECT producer, msg_key, max(seq), argMax(kafka_offset, seq) FROM "+db+
		".ingest_sequences WHERE topic = ? AND kafka_partition = ? GROUP BY producer, msg_key",
		topic, uint32(a.partition))
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
		k := seqKey{topic: topic, partition: a.partition, producer: producer, key: key}
		s.marks[k] = seqMark{seq: seq, offset: int64(off)}
		if pk := k.prod(); !recorded[producer] {
			if s.producers[pk] == nil { // not already given a time by an earlier, failed attempt
				s.producers[pk] = &producerSeen{last: clock, stored: clock}
			}
			unrecorded[pk] = s.producers[pk].last
		}
	}
	return rows.Err()
}

// writeSequences stores a batch's producer times and marks, retrying until
// ClickHouse takes them or ctx ends. Rows are only added (the tables keep
// the highest number and the latest time), so a retry after an uncertain
// failure does no harm.
func (in *Ingester) writeSequences(ctx context.Context, pending map[seqKey]seqMark, producers map[prodKey]time.Time) error {
	if len(pending) == 0 && len(producers) == 0 {
		return nil
	}
	return in.retryWrite(ctx, "sequences", "writing message sequence marks failed, retrying", func() error {
		if err := in.sendProducers(ctx, producers); err != nil {
			return err
		}
		return in.sendSequences(ctx, pending)
	}, "marks", len(pending))
}

func (in *Ingester) sendProducers(ctx context.Context, producers map[prodKey]time.Time) error {
	if len(producers) == 0 {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	batch, err := in.conn.PrepareBatch(sctx, "INSERT INTO "+in.cfg.ClickHouse.Database+
		".ingest_producers (topic, kafka_partition, producer, last_time)")
	if err != nil {
		return fmt.Errorf("prepare ingest_producers insert: %w", err)
	}
	defer batch.Abort()
	for k, t := range producers {
		if err := batch.Append(k.topic, uint32(k.partition), k.producer, t.UTC().Truncate(time.Second)); err != nil {
			return fmt.Errorf("append ingest_producers row: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("send %d ingest_producers rows: %w", len(producers), err)
	}
	return nil
}

func (in *Ingester) sendSequences(ctx context.Context, pending map[seqKey]seqMark) error {
	if len(pending) == 0 {
		return nil
	}
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
