package ingest

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Intents (ingest_intents, migration 0023): before a flush inserts its
// blocks, it records each block's origin, one row per block and Kafka
// partition. An INSERT cut short can leave its rows in the table without
// their ledger rows (see ledger.go); the replica that sent it settles that
// itself while it can (insert asks landed before sending again), but it may
// stop, or lose the partitions to another replica, before ClickHouse answers
// again. Whoever is assigned a partition next therefore settles the intents at
// or after its committed offset (settleIntents) before it reads the ledger.

// intentsKeep is how long ingest_intents partitions (days) are kept. Only the
// intents at or after a partition's committed offset are ever read: these
// are the last seconds of a running ingest, or what it wrote before it
// stopped.
const intentsKeep = 14 * 24 * time.Hour

// writeIntents records the origin of every block in blks, retrying until
// ClickHouse takes them or ctx ends.
func (in *Ingester) writeIntents(ctx context.Context, blks []block) error {
	if len(blks) == 0 {
		return nil
	}
	return in.retryWrite(ctx, "intents", "recording the blocks about to be inserted failed, retrying",
		func() error { return in.sendIntents(ctx, blks) }, "blocks", len(blks))
}

func (in *Ingester) sendIntents(ctx context.Context, blks []block) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	batch, err := in.conn.PrepareBatch(sctx, "INSERT INTO "+in.cfg.ClickHouse.Database+
		".ingest_intents (tbl, part_key, kafka_partition, first_offset, last_offset)")
	if err != nil {
		return fmt.Errorf("prepare ingest_intents insert: %w", err)
	}
	defer batch.Abort()
	for _, b := range blks {
		for _, s := range b.origin().spans {
			if err := batch.Append(b.table(), b.partKey(), uint32(s.partition), uint64(s.first), uint64(s.last)); err != nil {
				return fmt.Errorf("append ingest_intents row: %w", err)
			}
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("send ingest_intents rows: %w", err)
	}
	return nil
}

// settleIntents asks landed about each block recorded for a's partition at or
// after its committed offset whose first message in that partition the
// ledger lacks (done is what loadLedger read). The part of such a block
// that came from a's partition is a doubt of its own: its first message there
// is in the table exactly when the INSERT landed. settleIntents reports
// whether it wrote ledger rows, so that the caller reads the ledger again.
func (in *Ingester) settleIntents(ctx context.Context, a assignment, done map[int64][]uint32) (bool, error) {
	table := a.h.table()
	rows, err := in.conn.Query(ctx, "SELECT DISTINCT part_key, first_offset, last_offset FROM "+in.cfg.ClickHouse.Database+
		".ingest_intents WHERE tbl = ? AND kafka_partition = ? AND last_offset >= ?",
		table, uint32(a.partition), uint64(max(a.offset, 0)))
	if err != nil {
		return false, fmt.Errorf("query ingest intents: %w", err)
	}
	var open []doubt
	for rows.Next() {
		var key uint32
		var first, last uint64
		if err := rows.Scan(&key, &first, &last); err != nil {
			rows.Close()
			return false, fmt.Errorf("scan ingest intents: %w", err)
		}
		if slices.Contains(done[int64(first)], key) {
			continue // landed with its ledger rows
		}
		open = append(open, doubt{table: table, key: key, spans: []span{{partition: a.partition, first: int64(first), last: int64(last)}}})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("scan ingest intents: %w", err)
	}
	wrote := false
	for _, d := range open {
		// The previous owner's INSERT may still be running (it lost the
		// partitions mid-flush): what it writes must be seen first.
		if err := in.awaitInserts(ctx, d); err != nil {
			return wrote, err
		}
		ok, err := in.landed(ctx, d)
		if err != nil {
			return wrote, err
		}
		wrote = wrote || ok
	}
	return wrote, nil
}
