package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/schemas"
)

// Dead letters. An undecodable message goes to the dead-letter topic with
// the flush of its batch, before the batch's intents and rows, and once Kafka
// took it, flush records its offset in ingest_ledger: one row under the tbl
// deadLedgerTable(table) and the part key deadPartKey. A later read of the
// offset (a restart, a flush that failed further on, a rebalance) finds that
// row (loadLedger reads both a table's rows and its dead letters') and skips
// the message instead of sending it again. Only then is it counted. The
// dead-letter topic and ClickHouse share no transaction: when ingest stops
// (or ClickHouse fails) after Kafka took a dead letter and before ClickHouse
// took its ledger row, the message is dead-lettered again by the next read.
// That window is one small INSERT, which flush sends even when the generation
// has just ended.
//
// The rows are not under the source table's tbl: whatever sums ingest_ledger's
// rows by tbl (the dashboards' seed, an operator checking that a table holds
// what was published) counts each table's rows and nothing else.

// deadPartKey is the part key of a dead-lettered message's ledger row. No
// table's part key (a day or a month) is near it, so it never makes a
// decodable message's rows skipped (a message an older version could not
// decode is stored once a newer one can). Its ledger partition (42949672)
// is one of its own, shared by every topic's dead letters: pruneLedger
// drops it once Kafka holds none of their offsets, and until then it keeps
// one row per dead letter.
const deadPartKey uint32 = math.MaxUint32

// deadLedgerPrefix starts the tbl of dead letters' ledger rows.
const deadLedgerPrefix = "deadletter/"

// deadLedgerTable is the tbl of the ledger rows of messages dead-lettered
// from the topic that fills table: "deadletter/<table>".
func deadLedgerTable(table string) string { return deadLedgerPrefix + table }

// ledgerSource returns the table whose Kafka topic a ledger row's tbl names
// offsets of: tbl itself, or the source table of a dead letter's row.
func ledgerSource(tbl string) string { return strings.TrimPrefix(tbl, deadLedgerPrefix) }

// deadFrom is where a dead letter came from and why.
type deadFrom struct {
	table, topic string
	partition    int32
	offset       int64
	kind         string // heliostat_ingest_errors_total's kind
	reason       error
	cut          bool // its value was cut to fit
}

// writeDeadLetters writes b's dead letters to the dead-letter topic, then
// their ledger rows, then counts them. It returns false when ctx ended
// first; what was not recorded is dead-lettered again by the next read.
func (in *Ingester) writeDeadLetters(ctx context.Context, b *batch) bool {
	backoff := newBackoff(100*time.Millisecond, in.cfg.RetryMax)
	limit := deadLetterMaxBytes
	for {
		err := in.dead.WriteMessages(ctx, b.dead...)
		if err == nil {
			in.deadHealth.OK()
			break
		}
		if tooLarge(err) && limit > deadLetterMinBytes {
			// The dead-letter topic takes less (its max.message.bytes).
			limit = max(limit/4, deadLetterMinBytes)
			for i := range b.dead {
				if fitDeadLetter(&b.dead[i], limit) {
					b.deadFrom[i].cut = true
				}
			}
			in.warnf("deadletter-cut", "the dead-letter topic refused a message as too large; cutting dead letters' values", "limit_bytes", limit, "err", err)
			continue
		}
		in.deadHealth.Report(fmt.Errorf("writing dead letters: %w", err))
		in.m.errors.WithLabelValues("deadletter").Inc()
		in.warnf("deadletter-write", "writing dead letters failed, retrying", "messages", len(b.dead), "err", err)
		if !backoff.wait(ctx) {
			return false
		}
	}
	send := func() error { return in.sendDeadLedger(ctx, b.deadFrom) }
	if ctx.Err() != nil {
		// Kafka took them as the generation ended: one attempt, which
		// keeps the next owner from sending them again.
		if err := send(); err != nil {
			in.m.errors.WithLabelValues("ledger").Inc()
			in.warnf("ledger", "recording dead letters in the ingest ledger failed; the next owner of their partitions sends them again", "messages", len(b.dead), "err", err)
			return false
		}
	} else if err := in.retryWrite(ctx, "ledger", "recording dead letters in the ingest ledger failed, retrying", send, "messages", len(b.dead)); err != nil {
		return false
	}
	for _, d := range b.deadFrom {
		in.m.errors.WithLabelValues(d.kind).Inc()
		in.m.messages.WithLabelValues(d.topic, "deadletter").Inc()
		if d.cut {
			in.m.deadCut.Inc()
		}
		in.warnf("deadletter", "undecodable message sent to dead-letter topic", "topic", d.topic,
			"partition", d.partition, "offset", d.offset, "err", d.reason)
	}
	return ctx.Err() == nil
}

// sendDeadLedger writes the ledger rows of dead, one per message with
// deadLedgerTable, deadPartKey and rows 1 (ingest_ledger is a
// SummingMergeTree, which drops rows whose sum is 0).
func (in *Ingester) sendDeadLedger(ctx context.Context, dead []deadFrom) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	batch, err := in.conn.PrepareBatch(sctx, "INSERT INTO "+in.cfg.ClickHouse.Database+
		".ingest_ledger (tbl, kafka_partition, kafka_offset, part_key, rows)")
	if err != nil {
		return fmt.Errorf("prepare ingest_ledger insert: %w", err)
	}
	defer batch.Abort()
	for _, d := range dead {
		if err := batch.Append(deadLedgerTable(d.table), uint32(d.partition), uint64(d.offset), deadPartKey, uint64(1)); err != nil {
			return fmt.Errorf("append ingest_ledger row: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("send %d ingest_ledger rows of dead letters: %w", len(dead), err)
	}
	return nil
}

// deadletter files the undecodable message of it into b's dead letters. Its
// counts and log line wait until the dead letter is written and recorded
// (writeDeadLetters).
func (in *Ingester) deadletter(b *batch, it item) {
	kind := "decode"
	var de *schemas.DecodeError
	if errors.As(it.reason, &de) {
		kind = "decode_" + de.Kind
	}
	m := it.dead
	// The original headers go along (a numbered message's producer says
	// which collector sent it), followed by where and why it failed.
	dl := kafka.Message{
		Key:   m.Key,
		Value: m.Value,
		Headers: append(slices.Clip(m.Headers),
			kafka.Header{Key: schemas.HeaderDeadletterReason, Value: []byte(it.reason.Error())},
			kafka.Header{Key: schemas.HeaderDeadletterTopic, Value: []byte(m.Topic)},
			kafka.Header{Key: schemas.HeaderDeadletterPartition, Value: []byte(strconv.Itoa(m.Partition))},
			kafka.Header{Key: schemas.HeaderDeadletterOffset, Value: []byte(strconv.FormatInt(m.Offset, 10))},
		),
	}
	cut := fitDeadLetter(&dl, deadLetterMaxBytes)
	b.dead = append(b.dead, dl)
	b.deadFrom = append(b.deadFrom, deadFrom{table: it.h.table(), topic: it.h.topic(), partition: it.partition,
		offset: it.offset, kind: kind, reason: it.reason, cut: cut})
}

// deadLetterMaxBytes bounds a dead letter's key, value and headers. A
// message over kafka-go's BatchBytes (1 MiB by default) or the broker's
// max.message.bytes (1,048,588 by default) is refused for good, and a dead
// letter is its original message with more headers, so one near the limit
// would never be written and would hold up every partition of the replica.
const deadLetterMaxBytes = 1_000_000

// deadLetterMinBytes is as far as flush cuts dead letters for a topic that
// refuses deadLetterMaxBytes.
const deadLetterMinBytes = 4096

// fitDeadLetter cuts m's value so that m takes at most limit bytes, and
// says in HeaderDeadletterTruncated how long the value was. It reports
// whether it cut a message it had not cut before (which keeps the length
// its first cut recorded).
func fitDeadLetter(m *kafka.Message, limit int) bool {
	const overhead = 64 // the record's own fields, and a header's lengths
	size := overhead + len(m.Key) + len(m.Value)
	cutBefore := false
	for _, h := range m.Headers {
		size += overhead/4 + len(h.Key) + len(h.Value)
		cutBefore = cutBefore || h.Key == schemas.HeaderDeadletterTruncated
	}
	if size <= limit {
		return false
	}
	orig := strconv.Itoa(len(m.Value))
	if !cutBefore {
		size += overhead/4 + len(schemas.HeaderDeadletterTruncated) + len(orig)
	}
	keep := max(len(m.Value)-(size-limit), 0)
	m.Value = m.Value[:keep:keep]
	if !cutBefore {
		m.Headers = append(slices.Clip(m.Headers), kafka.Header{Key: schemas.HeaderDeadletterTruncated, Value: []byte(orig)})
	}
	return !cutBefore
}

// tooLarge reports whether err says a message was too large for the
// writer or the broker.
func tooLarge(err error) bool {
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		return slices.ContainsFunc(we, tooLarge)
	}
	return errors.Is(err, kafka.MessageSizeTooLarge)
}
