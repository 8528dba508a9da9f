package ingest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/internal/retention"
)

// ledgerPruneEvery is how often the retention loop prunes ingest_ledger. Its
// partitions are months (years for the tables with monthly part keys), so
// once a day is plenty.
const ledgerPruneEvery = 24 * time.Hour

// pruneLedger drops the ingest_ledger partitions that hold only offsets the
// brokers no longer have, and returns their ids. Ingest never reads a Kafka
// partition below its first offset (resolveStart), so it never asks the
// ledger about those offsets again; kept, the ledger (a row per message and
// part key) would outgrow the raw tables that retention empties.
//
// A ledger partition is kept while any of its rows is for an offset at or
// above its Kafka partition's first offset, or for a table, topic or
// partition whose first offset the brokers did not give. Dead letters' rows
// (deadLedgerTable) are for their source table's topic. Each partition is
// checked just before it is dropped; a ledger row that lands between the
// check and the drop (a late message of that month written in those
// milliseconds) is dropped with it.
func (in *Ingester) pruneLedger(ctx context.Context) ([]string, error) {
	first, err := in.firstOffsets(ctx)
	if err != nil {
		return nil, err
	}
	db := in.cfg.ClickHouse.Database
	parts, err := retention.Partitions(ctx, in.conn, db, "ingest_ledger")
	if err != nil {
		return nil, err
	}
	var dropped []string
	for _, p := range parts {
		expired, err := in.ledgerExpired(ctx, p, first)
		if err != nil {
			return dropped, err
		}
		if !expired {
			continue
		}
		if err := retention.Drop(ctx, in.conn, db, "ingest_ledger", p); err != nil {
			return dropped, err
		}
		dropped = append(dropped, p)
	}
	return dropped, nil
}

// ledgerExpired reports whether every row of ledger partition p is for an
// offset below its Kafka partition's first offset in first (by table, then
// partition).
func (in *Ingester) ledgerExpired(ctx context.Context, p string, first map[string]map[int]int64) (bool, error) {
	id, err := strconv.ParseUint(p, 10, 32)
	if err != nil {
		return false, fmt.Errorf("ledger partition %q: not a partition of intDiv(part_key, 100)", p)
	}
	rows, err := in.conn.Query(ctx, "SELECT tbl, kafka_partition, max(kafka_offset) FROM "+in.cfg.ClickHouse.Database+
		".ingest_ledger WHERE intDiv(part_key, 100) = ? GROUP BY tbl, kafka_partition", uint32(id))
	if err != nil {
		return false, fmt.Errorf("read ledger partition %s: %w", p, err)
	}
	defer rows.Close()
	expired := true
	for rows.Next() {
		var (
			tbl  string
			kp   uint32
			last uint64
		)
		if err := rows.Scan(&tbl, &kp, &last); err != nil {
			return false, fmt.Errorf("read ledger partition %s: %w", p, err)
		}
		f, ok := first[ledgerSource(tbl)][int(kp)]
		if !ok || last >= uint64(f) {
			expired = false
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read ledger partition %s: %w", p, err)
	}
	return expired, nil
}

// kafkaClient returns the client for ingest's requests to the brokers
// outside the consumer group (offsets, metadata, a marked message), over
// ingest's connection security. It is one for the Ingester: each kafka-go
// Transport keeps a connection pool, with a goroutine that refreshes the
// metadata, until its connections are closed, so a client per request
// would leak them.
func (in *Ingester) kafkaClient() *kafka.Client { return in.kc }

// firstOffsets returns the first offset the brokers hold of every partition
// of ingest's topics, by the table each topic fills. A topic or partition the
// brokers cannot answer for is left out.
func (in *Ingester) firstOffsets(ctx context.Context) (map[string]map[int]int64, error) {
	c := in.kafkaClient()
	tableOf := make(map[string]string, len(in.handlers))
	var topics []string
	for _, h := range in.handlers {
		tableOf[h.topic()] = h.table()
		topics = append(topics, h.topic())
	}
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("read the metadata of %v: %w", topics, err)
	}
	req := make(map[string][]kafka.OffsetRequest)
	for _, t := range md.Topics {
		if t.Error != nil {
			continue
		}
		for _, p := range t.Partitions {
			req[t.Name] = append(req[t.Name], kafka.FirstOffsetOf(p.ID))
		}
	}
	first := make(map[string]map[int]int64)
	if len(req) == 0 {
		return first, nil
	}
	resp, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
	if err != nil {
		return nil, fmt.Errorf("list the first offsets of %v: %w", topics, err)
	}
	for topic, pos := range resp.Topics {
		tbl, ok := tableOf[topic]
		if !ok {
			continue
		}
		for _, po := range pos {
			if po.Error != nil || po.FirstOffset < 0 {
				continue
			}
			if first[tbl] == nil {
				first[tbl] = make(map[int]int64)
			}
			first[tbl][po.Partition] = po.FirstOffset
		}
	}
	return first, nil
}
