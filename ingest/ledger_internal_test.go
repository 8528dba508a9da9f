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
func testIngester(t *testing.T) (*Ingester, driver.Conn, string) {
	t.Helper()
	ch, conn := schematest.Database(t)
	in, err := New(Config{Brokers: []string{"127.0.0.1:1"}, ClickHouse: ch}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return in, conn, ch.Database
}

// TestSettleDoubts checks that the blocks a generation left in doubt are
// settled against ClickHouse before the next one reads the ledger: one that
// landed keeps its ledger rows, one that landed without them gets them, one
// that never landed gets none, and a doubt ClickHouse cannot answer stays.
func TestSettleDoubts(t *testing.T) {
	in, conn, db := testIngester(t)
	ctx := context.Background()
	month := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	// blockOf is an eventBlock of one event for each of the given messages of
	// Kafka partition 0.
	blockOf := func(offsets ...int64) *eventBlock {
		b := &eventBlock{key: monthKey(month.Unix())}
		for _, off := range offsets {
			b.from.note(0, off)
			b.ts = append(b.ts, month.Unix()+off)
			b.millis = append(b.millis, 0)
			b.cluster, b.host, b.gpuUUID = append(b.cluster, "c"), append(b.host, "h"), append(b.gpuUUID, "GPU-1")
			b.eventType, b.xid = append(b.eventType, "xid"), append(b.xid, 79)
			b.kPartition, b.kOffset = append(b.kPartition, 0), append(b.kOffset, uint64(off))
		}
		return b
	}
	exec := func(q string) {
		t.Helper()
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Offset 4 lies inside the unrecorded block's span but came with its
	// ledger rows (a previous owner wrote it): it must not be counted twice.
	recorded := blockOf(1, 2, 4)
	if err := recorded.insert(ctx, conn, db); err != nil {
		t.Fatal(err)
	}
	unrecorded := blockOf(3, 5) // written while the ledger view was away
	exec("DETACH TABLE " + db + ".gpu_events_ledger_mv")
	if err := unrecorded.insert(ctx, conn, db); err != nil {
		t.Fatal(err)
	}
	exec("ATTACH TABLE " + db + ".gpu_events_ledger_mv")
	absent := blockOf(6)
	for _, b := range []block{recorded, unrecorded, absent} {
		in.addDoubt(doubtOf(b))
	}
	if !in.settleDoubts(ctx) {
		t.Fatal("settleDoubts = false with ClickHouse up")
	}
	if len(in.doubts) != 0 {
		t.Errorf("%d doubts left; want 0", len(in.doubts))
	}
	rows, err := conn.Query(ctx, "SELECT kafka_offset, sum(rows) FROM "+db+".ingest_ledger WHERE tbl = 'gpu_events' GROUP BY kafka_offset ORDER BY kafka_offset")
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for rows.Next() {
		var off, n uint64
		if err := rows.Scan(&off, &n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("ledger counts %d rows at offset %d; want 1", n, off)
		}
		got = append(got, off)
	}
	rows.Close()
	if want := []uint64{1, 2, 3, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("ledger offsets %v; want %v", got, want)
	}
	if n := testutil.ToFloat64(in.m.ledgerRepairs.WithLabelValues("gpu_events", "ledger_written")); n != 1 {
		t.Errorf("ledger repairs = %v; want 1", n)
	}

	// A doubt ClickHouse cannot answer is kept for the next assignment.
	bad := doubtOf(absent)
	bad.table = "no_such_table"
	in.addDoubt(bad)
	if in.settleDoubts(ctx) {
		t.Error("settleDoubts = true for a table that does not exist")
	}
	if len(in.doubts) != 1 {
		t.Errorf("%d doubts left; want the unanswered one", len(in.doubts))
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
