package ingest

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// testIngester returns an Ingester on a fresh database of the test
// ClickHouse, with a connection to it. Its broker is never dialled.
func testIngester(t testing.TB) (*Ingester, driver.Conn, string) {
	t.Helper()
	ch, conn := schematest.Database(t)
	in, err := New(Config{Brokers: []string{"127.0.0.1:1"}, ClickHouse: ch}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return in, conn, ch.Database
}

// TestSettleIntents checks that the blocks recorded in ingest_intents at or
// after a partition's committed offset are settled before its new owner
// reads the ledger: one that landed keeps its ledger rows, one that landed
// without them gets them (each partition's share by that partition's owner),
// one that never landed gets none, and one before the committed offset is
// not read.
func TestSettleIntents(t *testing.T) {
	in, conn, db := testIngester(t)
	ctx := context.Background()
	month := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	// blockOf is an eventBlock of one event for each of the given messages,
	// as partition, offset pairs.
	blockOf := func(msgs ...[2]int64) *eventBlock {
		b := &eventBlock{key: monthKey(month.Unix())}
		for _, m := range msgs {
			p, off := int32(m[0]), m[1]
			b.from.note(p, off)
			b.ts = append(b.ts, month.Unix()+off)
			b.millis = append(b.millis, 0)
			b.cluster, b.host, b.gpuUUID = append(b.cluster, "c"), append(b.host, "h"), append(b.gpuUUID, "GPU-1")
			b.eventType, b.xid = append(b.eventType, "xid"), append(b.xid, 79)
			b.kPartition, b.kOffset = append(b.kPartition, uint32(p)), append(b.kOffset, uint64(off))
		}
		return b
	}
	exec := func(q string) {
		t.Helper()
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// without inserts blk while the ledger view is away: what an INSERT cut
	// short between its parts leaves.
	without := func(blk block) {
		t.Helper()
		exec("DETACH TABLE " + db + ".gpu_events_ledger_mv")
		err := blk.insert(ctx, conn, db)
		exec("ATTACH TABLE " + db + ".gpu_events_ledger_mv")
		if err != nil {
			t.Fatal(err)
		}
	}
	// Offset 4 lies inside the unrecorded block's span but came with its
	// ledger rows (a previous owner wrote it): it must not be counted twice.
	recorded := blockOf([2]int64{0, 1}, [2]int64{0, 2}, [2]int64{0, 4})
	unrecorded := blockOf([2]int64{0, 3}, [2]int64{0, 5}, [2]int64{1, 7})
	absent := blockOf([2]int64{0, 6})
	old := blockOf([2]int64{0, 0}) // before the committed offset
	if err := in.writeIntents(ctx, []block{recorded, unrecorded, absent, old}); err != nil {
		t.Fatal(err)
	}
	if err := recorded.insert(ctx, conn, db); err != nil {
		t.Fatal(err)
	}
	without(unrecorded)
	without(old)

	h := in.byTopic[schemas.TopicGPUEvents]
	ledger := func(p int32) []uint64 {
		t.Helper()
		rows, err := conn.Query(ctx, "SELECT kafka_offset, sum(rows) FROM "+db+".ingest_ledger "+
			"WHERE tbl = 'gpu_events' AND kafka_partition = ? GROUP BY kafka_offset ORDER BY kafka_offset", uint32(p))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []uint64
		for rows.Next() {
			var off, n uint64
			if err := rows.Scan(&off, &n); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("ledger counts %d rows at %d/%d; want 1", n, p, off)
			}
			got = append(got, off)
		}
		return got
	}
	settle := func(a assignment) bool {
		t.Helper()
		done, err := in.loadLedger(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		landed, err := in.settleIntents(ctx, a, done)
		if err != nil {
			t.Fatal(err)
		}
		return landed
	}
	p0 := assignment{h: h, partition: 0, offset: 1}
	if !settle(p0) {
		t.Error("settleIntents(partition 0) = false; want true (it wrote ledger rows)")
	}
	if got, want := ledger(0), []uint64{1, 2, 3, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("partition 0 ledger offsets %v; want %v", got, want)
	}
	if got := ledger(1); len(got) != 0 {
		t.Errorf("partition 1 ledger offsets %v before its owner settled; want none", got)
	}
	if settle(p0) {
		t.Error("settleIntents(partition 0) again = true; want false (nothing left to write)")
	}
	if !settle(assignment{h: h, partition: 1, offset: 0}) {
		t.Error("settleIntents(partition 1) = false; want true")
	}
	if got, want := ledger(1), []uint64{7}; !slices.Equal(got, want) {
		t.Errorf("partition 1 ledger offsets %v; want %v", got, want)
	}
	if n := testutil.ToFloat64(in.m.ledgerRepairs.WithLabelValues("gpu_events", "ledger_written")); n != 2 {
		t.Errorf("ledger repairs = %v; want 2 (one per partition)", n)
	}

	// ClickHouse not answering is an error; recover retries it.
	exec("RENAME TABLE " + db + ".ingest_intents TO " + db + ".intents_away")
	_, err := in.settleIntents(ctx, p0, nil)
	exec("RENAME TABLE " + db + ".intents_away TO " + db + ".ingest_intents")
	if err == nil {
		t.Error("settleIntents without ingest_intents: no error")
	}
}

// TestLandedWithOtherViews checks what landed does with a block that is in
// its table without ledger rows, by the table's other views: write the ledger
// rows when nothing else can be missing, and ask for the block again when
// another view may lack it.
func TestLandedWithOtherViews(t *testing.T) {
	in, conn, db := testIngester(t)
	ctx := context.Background()
	at := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	samples := func(host string, off int64) block {
		b := newSampleBlock(dayKey(at.Unix()))
		batch := &schemas.SampleBatch{Cluster: "c", Host: host, GPUs: []schemas.GPU{{UUID: "GPU-" + host, Minor: -1, GIID: -1, CIID: -1}}}
		for i := range 3 {
			s := schemas.Sample{TSMillis: at.Add(time.Duration(i) * 10 * time.Second).UnixMilli()}
			s.Set(schemas.GPUUtil, 50)
			sec, ms := floorDiv(s.TSMillis)
			b.from.note(0, off)
			b.appendSample(batch, &s, sec, ms, 0, off)
		}
		return b
	}
	jobEvents := func() block {
		b := &jobEventBlock{key: monthKey(at.Unix())}
		e := schemas.JobEvent{JobID: "7", Type: schemas.JobSubmit, State: schemas.StatePending, EventMillis: at.UnixMilli(),
			SubmitMillis: at.UnixMilli(), ArrayTaskID: schemas.Unknown, ExitCode: schemas.Unknown, MemReqBytes: schemas.Unknown}
		b.from.note(1, 40)
		b.add("c", schemas.SourceSlurm, &e, 1, 40)
		return b
	}
	allocs := func() block {
		b := &allocBlock{key: monthKey(at.Unix())}
		b.from.note(1, 50)
		b.cluster, b.host, b.gpuIndex, b.gpuUUID, b.migUUID = []string{"c"}, []string{"gpu1"}, []int32{0}, []string{""}, []string{""}
		b.jobID, b.user, b.start, b.end = []string{"7"}, []string{"alice"}, []int64{at.Unix()}, []*time.Time{nil}
		b.source, b.version, b.kPartition, b.kOffset = []string{"scontrol"}, []uint64{1}, []uint32{1}, []uint64{50}
		return b
	}
	for _, tc := range []struct {
		name     string
		blk      block
		detached []string // views away while the block is written
		landed   bool
		action   string
	}{
		{"gpu_samples with its rollup", samples("a", 10), []string{"gpu_samples_ledger_mv"}, true, "ledger_written"},
		{"gpu_samples without its rollup", samples("b", 11), []string{"gpu_samples_ledger_mv", "gpu_samples_1m_mv"}, false, "sent_again"},
		{"job_events", jobEvents(), []string{"job_events_ledger_mv"}, false, "sent_again"},
		{"gpu_allocations", allocs(), []string{"gpu_allocations_ledger_mv"}, true, "ledger_written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range tc.detached {
				if err := conn.Exec(ctx, "DETACH TABLE "+db+"."+v); err != nil {
					t.Fatal(err)
				}
			}
			err := tc.blk.insert(ctx, conn, db)
			for _, v := range tc.detached {
				if err := conn.Exec(ctx, "ATTACH TABLE "+db+"."+v); err != nil {
					t.Fatal(err)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			d := doubtOf(tc.blk)
			before := testutil.ToFloat64(in.m.ledgerRepairs.WithLabelValues(d.table, tc.action))
			landed, err := in.landed(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if landed != tc.landed {
				t.Errorf("landed = %v; want %v", landed, tc.landed)
			}
			if n := testutil.ToFloat64(in.m.ledgerRepairs.WithLabelValues(d.table, tc.action)) - before; n != 1 {
				t.Errorf("repairs{action=%q} went up by %v; want 1", tc.action, n)
			}
			p, off := d.spans[0].partition, d.spans[0].first
			var n uint64
			if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+".ingest_ledger WHERE tbl = ? AND kafka_partition = ? AND kafka_offset = ?",
				d.table, uint32(p), uint64(off)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if (n > 0) != tc.landed {
				t.Errorf("ledger rows for the block: %d; want them only when landed", n)
			}
		})
	}
}
