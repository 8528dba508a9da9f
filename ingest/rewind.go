package ingest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// A rewound partition.
//
// Kafka offsets only grow: a message ingest read or committed lies below the
// partition's log end for good. Two things break that. A topic deleted and
// created again starts its partitions at offset 0, and a broker that lost
// messages (an unclean leader election, a restored disk) writes new messages
// at offsets it had already given out. The partition is then "rewound": the
// group's committed offset or the ledger's rows lie at or past its log end.
//
// Ingest cannot go on by itself. The ledger's rows at the reused offsets
// belong to the old messages: read as they are, they would make ingest skip
// the new messages at those offsets as already stored. Resuming at the log
// end would skip them too. Resuming from the first offset would store again,
// after a lost tail, the messages that Kafka still holds. Which is right
// depends on what happened, which only the operator knows, and Kafka's topic
// ids, which would tell a recreated topic apart, are not in the protocol
// versions kafka-go speaks. So ingest stops reading the partition (others go
// on), keeps it out of readiness, counts it in
// heliostat_ingest_partitions_rewound, logs what it found, and waits for
// `heliostat ingest reset-partition` (ResetPartition), which forgets the
// ledger from an offset the operator names and commits it. The old
// messages' rows stay in the raw tables at offsets the new log gives out
// again; ingest_resets records where, so that a failed insert is not taken
// for landed on an old row's word (witness).
//
// Ingest checks when it is assigned the partition, and whenever the
// partition has yielded nothing for Config.LogCheck while it reads: the
// kafka-go reader, asked for an offset past the log end, waits for it
// without an error. A topic recreated while ingest was stopped may have
// grown past both ingest's old position and its ledger; at assignment
// ingest also fetches the message at the offset of the last head it stored
// (checkHead, heads.go), which must have the digest stored with it. A
// recreated topic grown past the old offsets whose last head's message is
// gone (retention shorter than the time ingest was stopped) is not seen: the
// new messages at the ledger's old offsets are skipped.

// rewind is what was found on a rewound partition.
type rewind struct {
	topic     string
	partition int32
	position  int64  // the offset ingest would read next
	ledger    int64  // the highest offset in the ledger at or past the log end; -1 if none
	first     int64  // the partition's first offset in Kafka
	end       int64  // its log end (high watermark)
	replaced  string // what checkHead found at a head's offset; "" when not checked or the same
}

func (r rewind) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d: the log starts at offset %d and ends at %d", r.topic, r.partition, r.first, r.end)
	if r.position > r.end {
		fmt.Fprintf(&b, " but ingest's position is %d", r.position)
	}
	if r.ledger >= 0 {
		fmt.Fprintf(&b, ", and ingest_ledger holds offset %d", r.ledger)
	}
	if r.replaced != "" {
		b.WriteString(", but " + r.replaced)
	}
	return b.String()
}

// rewinds is the set of rewound partitions this replica owns.
type rewinds struct {
	mu sync.Mutex
	by map[string]rewind // "topic/partition"
}

func (in *Ingester) clearRewinds() {
	in.rewound.mu.Lock()
	in.rewound.by = map[string]rewind{}
	in.rewound.mu.Unlock()
	in.m.rewound.Set(0)
	in.rewindHealth.OK()
}

// reportRewind records r: metric, readiness and an error log telling the
// operator what to do.
func (in *Ingester) reportRewind(r rewind) {
	in.rewound.mu.Lock()
	in.rewound.by[fmt.Sprintf("%s/%d", r.topic, r.partition)] = r
	all := make([]string, 0, len(in.rewound.by))
	for _, x := range in.rewound.by {
		all = append(all, x.String())
	}
	in.rewound.mu.Unlock()
	slices.Sort(all)
	in.m.rewound.Set(float64(len(all)))
	in.rewindHealth.Report(fmt.Errorf("not reading %d rewound partition(s): %s", len(all), strings.Join(all, "; ")))
	from := r.end
	if r.first == 0 {
		from = 0
	}
	in.logger.Error("kafka partition rewound: its log ends below what ingest already read, or holds another message where ingest read one, so the topic was deleted and created again or the broker lost messages; "+
		"not reading it, to skip nothing as already stored. Stop every ingest replica and run `reset_command` (--from 0 for a recreated topic, "+
		"the log end for lost messages; without --yes it only says what it would do)",
		"found", r.String(), "topic", r.topic, "partition", r.partition, "position", r.position, "ledger_offset", r.ledger,
		"log_first", r.first, "log_end", r.end,
		"reset_command", fmt.Sprintf("heliostat ingest reset-partition --ingest.group %s --topic %s --partition %d --from %d --yes", in.cfg.Group, r.topic, r.partition, from))
}

// logBounds returns the first offset and the log end (high watermark) of a
// topic partition.
func logBounds(ctx context.Context, c *kafka.Client, topic string, partition int) (first, end int64, err error) {
	resp, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		topic: {kafka.FirstOffsetOf(partition), kafka.LastOffsetOf(partition)}}})
	if err != nil {
		return 0, 0, fmt.Errorf("list the offsets of %s/%d: %w", topic, partition, err)
	}
	for _, po := range resp.Topics[topic] {
		if po.Partition != partition {
			continue
		}
		if po.Error != nil {
			return 0, 0, fmt.Errorf("list the offsets of %s/%d: %w", topic, partition, po.Error)
		}
		return max(po.FirstOffset, 0), max(po.LastOffset, 0), nil
	}
	return 0, 0, fmt.Errorf("list the offsets of %s/%d: the broker did not answer for the partition", topic, partition)
}

// ledgerPast returns the highest offset of done (the ledger's offsets of a
// partition) at or past end, and -1 when there is none.
func ledgerPast(done map[int64][]uint32, end int64) int64 {
	top := int64(-1)
	for off := range done {
		if off >= end && off > top {
			top = off
		}
	}
	return top
}

// ResetPartition makes the group read topic's partition again from offset
// from, for a partition ingest found rewound (see rewind): it forgets what
// ingest_ledger, ingest_intents and ingest_sequences hold for the partition
// at and after from (they name the old log's messages) and the partition's
// heads, then commits from
// as the group's offset. A copy of a message stored before the reset, sent
// again after it, is stored again unless its mark lies below from. It refuses while the group
// has members, since a running replica would go on from its own position,
// and an offset past the partition's end. An offset below the partition's
// first one is raised to it. With apply false it only checks and logs what
// it would do. The raw tables keep the old messages' rows; they are data.
// Ingest reads them to decide what to skip only after a failed insert
// (landed), which must not take an old row at a reused offset for the new
// block: the reset records the range of offsets whose old rows the table
// keeps in ingest_resets first.
func (in *Ingester) ResetPartition(ctx context.Context, topic string, partition int, from int64, apply bool) error {
	defer in.kt.CloseIdleConnections()
	h, ok := in.byTopic[topic]
	if !ok {
		return fmt.Errorf("reset partition: topic %q is not one ingest reads (%s)", topic, strings.Join(in.Topics(), ", "))
	}
	if partition < 0 {
		return fmt.Errorf("reset partition: partition %d is negative", partition)
	}
	c := in.kafkaClient()
	groups, err := c.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{in.cfg.Group}})
	if err != nil {
		return fmt.Errorf("reset partition: describe group %s: %w", in.cfg.Group, err)
	}
	for _, g := range groups.Groups {
		if g.Error != nil {
			return fmt.Errorf("reset partition: describe group %s: %w", in.cfg.Group, g.Error)
		}
		if len(g.Members) > 0 {
			return fmt.Errorf("reset partition: group %s has %d member(s) (state %s): stop every ingest replica first", in.cfg.Group, len(g.Members), g.GroupState)
		}
	}
	first, end, err := logBounds(ctx, c, topic, partition)
	if err != nil {
		return fmt.Errorf("reset partition: %w", err)
	}
	if from > end {
		return fmt.Errorf("reset partition: offset %d is past the end of %s/%d (its log starts at offset %d and ends at %d)", from, topic, partition, first, end)
	}
	if from < first {
		in.logger.Info("offset below the partition's first; starting at its first offset", "from", from, "first", first)
		from = first
	}
	db := in.cfg.ClickHouse.Database
	var rows uint64
	if err := in.conn.QueryRow(ctx, "SELECT count() FROM "+db+".ingest_ledger WHERE tbl IN (?, ?) AND kafka_partition = ? AND kafka_offset >= ?",
		h.table(), deadLedgerTable(h.table()), uint32(partition), uint64(from)).Scan(&rows); err != nil {
		return fmt.Errorf("reset partition: count ledger rows: %w", err)
	}
	kept, err := in.keptRows(ctx, h.table(), partition, from)
	if err != nil {
		return fmt.Errorf("reset partition: %w", err)
	}
	var keptN uint64
	for _, k := range kept {
		keptN += k.rows
	}
	args := []any{"topic", topic, "partition", partition, "table", h.table(), "group", in.cfg.Group, "from", from,
		"log_first", first, "log_end", end, "ledger_rows_forgotten", rows, "table_rows_kept", keptN}
	if !apply {
		in.logger.Info("would reset the partition (dry run; --yes applies)", args...)
		return nil
	}
	if err := in.forget(ctx, h.table(), topic, partition, from, kept); err != nil {
		return fmt.Errorf("reset partition: %w", err)
	}
	resp, err := c.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: in.cfg.Group, GenerationID: -1,
		Topics: map[string][]kafka.OffsetCommit{topic: {{Partition: partition, Offset: from}}}})
	if err != nil {
		return fmt.Errorf("reset partition: commit offset %d for group %s: %w", from, in.cfg.Group, err)
	}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			return fmt.Errorf("reset partition: commit offset %d for group %s: %w", from, in.cfg.Group, p.Error)
		}
	}
	in.logger.Info("partition reset: ingest reads it from the offset given when it starts", args...)
	return nil
}

// keptRange is a range of offsets, at or after a reset's, whose rows a table
// keeps from the old log, for one part key.
type keptRange struct {
	key         uint32
	first, last int64
	rows        uint64
}

// keptRows returns, by part key, the range of offsets at or after from of
// the rows table holds from partition's messages: the old log's rows at
// offsets a reset gives out again. It reads three columns of every row of
// the partition, which on a large gpu_samples takes a while; a reset is rare.
func (in *Ingester) keptRows(ctx context.Context, table string, partition int, from int64) ([]keptRange, error) {
	in.logger.Info("looking for the old log's rows the table keeps", "table", table, "partition", partition, "from", from)
	rows, err := in.conn.Query(ctx, "SELECT "+partExprs[table]+" AS pk, min(kafka_offset), max(kafka_offset), count() FROM "+
		in.cfg.ClickHouse.Database+"."+table+" WHERE kafka_partition = ? AND kafka_offset >= ? GROUP BY pk ORDER BY pk",
		uint32(partition), uint64(from))
	if err != nil {
		return nil, fmt.Errorf("look for the old log's rows in %s: %w", table, err)
	}
	defer rows.Close()
	var kept []keptRange
	for rows.Next() {
		var (
			k           keptRange
			first, last uint64
		)
		if err := rows.Scan(&k.key, &first, &last, &k.rows); err != nil {
			return nil, fmt.Errorf("look for the old log's rows in %s: %w", table, err)
		}
		k.first, k.last = int64(first), int64(last)
		kept = append(kept, k)
	}
	return kept, rows.Err()
}

// forget is a reset's work in ClickHouse: it records in ingest_resets the
// offsets whose old rows table keeps (kept), then deletes the partition's
// ingest_ledger, ingest_intents and ingest_sequences rows at and after from,
// and all its ingest_heads rows, and waits for the deletes.
func (in *Ingester) forget(ctx context.Context, table, topic string, partition int, from int64, kept []keptRange) error {
	db := in.cfg.ClickHouse.Database
	if len(kept) > 0 {
		b, err := in.conn.PrepareBatch(ctx, "INSERT INTO "+db+".ingest_resets (tbl, kafka_partition, part_key, first_offset, last_offset, rows)")
		if err != nil {
			return fmt.Errorf("record the offsets whose old rows %s keeps: %w", table, err)
		}
		for _, k := range kept {
			if err := b.Append(table, uint32(partition), k.key, uint64(k.first), uint64(k.last), k.rows); err != nil {
				_ = b.Abort()
				return fmt.Errorf("record the offsets whose old rows %s keeps: %w", table, err)
			}
		}
		if err := b.Send(); err != nil {
			return fmt.Errorf("record the offsets whose old rows %s keeps: %w", table, err)
		}
	}
	for _, q := range []struct {
		sql  string
		keys []any
	}{
		// The partition's dead letters too: the new log's messages at
		// their offsets are others.
		{"ALTER TABLE " + db + ".ingest_ledger DELETE WHERE tbl IN (?, ?) AND kafka_partition = ? AND kafka_offset >= ?", []any{table, deadLedgerTable(table)}},
		{"ALTER TABLE " + db + ".ingest_intents DELETE WHERE tbl = ? AND kafka_partition = ? AND last_offset >= ?", []any{table}},
		{"ALTER TABLE " + db + ".ingest_sequences DELETE WHERE topic = ? AND kafka_partition = ? AND kafka_offset >= ?", []any{topic}},
	} {
		if err := in.conn.Exec(ctx, q.sql, append(q.keys, uint32(partition), uint64(from))...); err != nil {
			return fmt.Errorf("forget what ingest holds of %s/%d from offset %d: %w", topic, partition, from, err)
		}
	}
	// Every head goes, below from too: after a topic recreated and reset
	// from an offset past 0, a head below it names an old message that the
	// new log holds another one in place of.
	if err := in.conn.Exec(ctx, "ALTER TABLE "+db+".ingest_heads DELETE WHERE topic = ? AND kafka_partition = ?", topic, uint32(partition)); err != nil {
		return fmt.Errorf("forget the last message ingest read from %s/%d: %w", topic, partition, err)
	}
	return in.awaitMutations(ctx, "ingest_ledger", "ingest_intents", "ingest_sequences", "ingest_heads")
}

// resetRanges returns, by Kafka partition, the ranges of offsets at which
// table keeps old rows of part key key from before a reset (ingest_resets).
func (in *Ingester) resetRanges(ctx context.Context, table string, key uint32) (map[int32][][2]int64, error) {
	rows, err := in.conn.Query(ctx, "SELECT kafka_partition, first_offset, last_offset FROM "+in.cfg.ClickHouse.Database+
		".ingest_resets WHERE tbl = ? AND part_key = ?", table, key)
	if err != nil {
		return nil, fmt.Errorf("query ingest_resets: %w", err)
	}
	defer rows.Close()
	ranges := map[int32][][2]int64{}
	for rows.Next() {
		var (
			p           uint32
			first, last uint64
		)
		if err := rows.Scan(&p, &first, &last); err != nil {
			return nil, fmt.Errorf("scan ingest_resets: %w", err)
		}
		ranges[int32(p)] = append(ranges[int32(p)], [2]int64{int64(first), int64(last)})
	}
	return ranges, rows.Err()
}

// awaitMutations waits until ClickHouse has applied every mutation of the
// given tables (ALTER ... DELETE runs in the background).
func (in *Ingester) awaitMutations(ctx context.Context, tables ...string) error {
	for {
		var n uint64
		if err := in.conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND has(?, table) AND is_done = 0",
			in.cfg.ClickHouse.Database, tables).Scan(&n); err != nil {
			return fmt.Errorf("wait for the deletes: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the deletes: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
