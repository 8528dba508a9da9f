package ingest

import (
	"context"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

// BenchmarkIntents measures what the intents cost ingest. "write": recording
// one flush's blocks, four tables' blocks drawing on six Kafka partitions
// each (24 ingest_intents rows), as every flush does before its INSERTs.
// "settle": what a partition assignment reads when the previous owner's
// last blocks all landed, on an ingest_intents table holding 14 days of one
// such flush a second (29 million rows, the most retention keeps).
func BenchmarkIntents(b *testing.B) {
	in, conn, db := testIngester(b)
	ctx := context.Background()
	tables := []string{"gpu_samples", "gpu_events", "job_events", "gpu_allocations"}
	b.Run("write", func(b *testing.B) {
		blks := make([]block, len(tables))
		for i := range blks {
			blk := &eventBlock{key: 202605}
			for p := range int32(6) {
				blk.from.note(p, 1000)
				blk.from.note(p, 1400)
			}
			blks[i] = blk
		}
		for b.Loop() {
			if err := in.writeIntents(ctx, blks); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("settle", func(b *testing.B) {
		const perSecond = 24
		const rows = 14 * 86400 * perSecond
		if err := conn.Exec(ctx, "TRUNCATE TABLE "+db+".ingest_intents"); err != nil {
			b.Fatal(err)
		}
		// Row n: table n%4, partition n/4%6, offsets 400 a second apart.
		if err := conn.Exec(ctx, "INSERT INTO "+db+".ingest_intents (tbl, part_key, kafka_partition, first_offset, last_offset, written) "+
			"SELECT ['gpu_samples', 'gpu_events', 'job_events', 'gpu_allocations'][number % 4 + 1], 20260510, "+
			"toUInt32(intDiv(number, 4) % 6), intDiv(number, 24) * 400, intDiv(number, 24) * 400 + 399, "+
			"toDateTime(now() - intDiv(? - number, 24)) FROM numbers(?)", uint64(rows), uint64(rows)); err != nil {
			b.Fatal(err)
		}
		last := int64(rows/perSecond-1) * 400
		a := assignment{h: in.byTopic[schemas.TopicGPUSamples], partition: 3, offset: last - 400}
		// The previous owner's last two flushes landed: the ledger holds them.
		done := map[int64][]uint32{last - 400: {20260510}, last: {20260510}}
		for b.Loop() {
			landed, err := in.settleIntents(ctx, a, done)
			if err != nil || landed {
				b.Fatalf("settleIntents = %v, %v; want false, nil", landed, err)
			}
		}
	})
}
