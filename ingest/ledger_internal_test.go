package ingest

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// testIngester returns an Ingester on a fresh database of the test
// ClickHouse, with a connection to it. Its broker is never dialled.
func testIngester(t testing.TB) (*Ingester, driver.Conn, string) {
	t.Helper()
	return testIngesterOn(t, "127.0.0.1:1")
}

// testIngesterOn is testIngester with the broker at addr.
func testIngesterOn(t testing.TB, addr string) (*Ingester, driver.Conn, string) {
	t.Helper()
	ch, conn := schematest.Database(t)
	in, err := New(Config{Brokers: []string{addr}, ClickHouse: ch}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
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

// kmsgAt is a Kafka message's partition and offset.
type kmsgAt struct {
	partition int32
	offset    int64
}

// sampleBlockOf returns a gpu_samples block of host's one GPU with three
// samples, 10 s apart from at, from each of msgs.
func sampleBlockOf(at time.Time, host string, msgs ...kmsgAt) *sampleBlock {
	return sampleBlockFrom(dayKey(at.Unix()), sampleBatchOf(at, host), msgs...)
}

// sampleBlockFrom returns a gpu_samples block of part key key with batch's
// samples from each of msgs.
func sampleBlockFrom(key uint32, batch *schemas.SampleBatch, msgs ...kmsgAt) *sampleBlock {
	b := newSampleBlock(key)
	for _, m := range msgs {
		for i := range batch.Samples {
			s := &batch.Samples[i]
			sec, ms := floorDiv(s.TSMillis)
			b.from.note(m.partition, m.offset)
			b.appendSample(batch, s, s.Present, sec, ms, m.partition, m.offset)
		}
	}
	return b
}

// sampleBatchOf is the message whose rows sampleBlockOf files: three
// samples of host's one GPU, 10 s apart from time at.
func sampleBatchOf(at time.Time, host string) *schemas.SampleBatch {
	batch := &schemas.SampleBatch{Cluster: "c", Host: host, GPUs: []schemas.GPU{{UUID: "GPU-" + host, Minor: -1, GIID: -1, CIID: -1}}}
	for i := range 3 {
		s := schemas.Sample{TSMillis: at.Add(time.Duration(i) * 10 * time.Second).UnixMilli()}
		s.Set(schemas.GPUUtil, 50)
		batch.Samples = append(batch.Samples, s)
	}
	return batch
}

// TestLandedAfterReset checks that landed does not take the old log's rows,
// which a partition reset keeps at offsets Kafka gives out again, for a new
// block whose INSERT failed: a block with a first message elsewhere is
// judged by that message; one whose first messages all lie at such offsets
// by its first row's identifying columns, from the block or, known only
// from an intent, from its first message in Kafka; one whose message Kafka
// no longer holds is sent again whether or not it landed. Without
// ingest_resets, a block that never landed would be taken for landed at the
// old rows' offsets, and lost.
func TestLandedAfterReset(t *testing.T) {
	_, broker := schematest.Broker(t, kfake.SeedTopics(2, schemas.TopicGPUSamples))
	in, conn, db := testIngesterOn(t, broker)
	ctx := context.Background()
	day := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	// The new log in Kafka: partition 0, offsets 0 to 12. The blocks known
	// only from an intent are looked up there.
	w := &kafka.Writer{Addr: kafka.TCP(broker), Topic: schemas.TopicGPUSamples, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
		Balancer: kafka.BalancerFunc(func(kafka.Message, ...int) int { return 0 })}
	var msgs []kafka.Message
	for off := range 13 {
		host := "other"
		switch off {
		case 11:
			host = "new11"
		case 12:
			host = "new10"
		}
		v, err := schemas.AppendSampleBatch(nil, sampleBatchOf(day, host))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(host), Value: v})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// The old log: partition 0, offsets 10 to 14, all of day; a message at
	// offset 3, below the reset, on the day before.
	old := []kmsgAt{{0, 10}, {0, 11}, {0, 12}, {0, 13}, {0, 14}}
	for _, blk := range []block{sampleBlockOf(day, "old", old...), sampleBlockOf(day.AddDate(0, 0, -1), "old", kmsgAt{0, 3})} {
		if err := blk.insert(ctx, conn, db); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := in.keptRows(ctx, "gpu_samples", 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	if want := []keptRange{{key: dayKey(day.Unix()), first: 10, last: 14, rows: 15}}; !slices.Equal(kept, want) {
		t.Fatalf("keptRows from offset 5 = %+v; want %+v", kept, want)
	}
	if err := in.forget(ctx, "gpu_samples", "heliostat.gpu.samples", 0, 5, kept); err != nil {
		t.Fatal(err)
	}
	var ledger uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+".ingest_ledger WHERE kafka_offset >= 5").Scan(&ledger); err != nil {
		t.Fatal(err)
	}
	if ledger != 0 {
		t.Fatalf("after forget: %d ledger rows at or after offset 5; want 0", ledger)
	}
	for _, tc := range []struct {
		name   string
		blk    *sampleBlock
		insert bool // written with the ledger view detached
		landed bool
		action string // the repair counted, if any
		intent bool   // the doubt as read from ingest_intents: no rows at hand
	}{
		{"never landed, at an old row's offset", sampleBlockOf(day, "new1", kmsgAt{0, 12}), false, false, "", false},
		{"landed, at an old row's offset", sampleBlockOf(day, "new2", kmsgAt{0, 13}), true, true, "ledger_written", false},
		// Known from an intent: the first row is read from the message in
		// Kafka, and when it is gone, nothing tells.
		{"never landed, at an old row's offset, from an intent", sampleBlockOf(day, "new10", kmsgAt{0, 12}), false, false, "", true},
		{"landed, at an old row's offset, from an intent", sampleBlockOf(day, "new11", kmsgAt{0, 11}), true, true, "ledger_written", true},
		{"landed, at an old row's offset, from an intent, gone from kafka", sampleBlockOf(day, "new12", kmsgAt{0, 14}), true, false, "sent_again", true},
		// The same samples at the same offset as before the reset (the old
		// log written again): taken for landed, and they are in the table.
		{"never landed, the old message again", sampleBlockOf(day, "old", kmsgAt{0, 14}), false, true, "ledger_written", false},
		{"landed, another partition's message first", sampleBlockOf(day, "new3", kmsgAt{1, 7}, kmsgAt{0, 14}), true, true, "ledger_written", false},
		{"landed, an old offset's message first", sampleBlockOf(day, "new4", kmsgAt{0, 10}, kmsgAt{1, 8}), true, true, "ledger_written", false},
		{"never landed, another partition's message first", sampleBlockOf(day, "new5", kmsgAt{1, 9}, kmsgAt{0, 11}), false, false, "", false},
		{"landed, past the old rows", sampleBlockOf(day, "new6", kmsgAt{0, 15}), true, true, "ledger_written", false},
		{"never landed, past the old rows", sampleBlockOf(day, "new7", kmsgAt{0, 16}), false, false, "", false},
		{"never landed, an old offset of another day", sampleBlockOf(day.AddDate(0, 0, 1), "new8", kmsgAt{0, 10}), false, false, "", false},
		{"landed, an old offset of another day", sampleBlockOf(day.AddDate(0, 0, 1), "new9", kmsgAt{0, 11}), true, true, "ledger_written", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.insert {
				if err := conn.Exec(ctx, "DETACH TABLE "+db+".gpu_samples_ledger_mv"); err != nil {
					t.Fatal(err)
				}
				err := tc.blk.insert(ctx, conn, db)
				if err := conn.Exec(ctx, "ATTACH TABLE "+db+".gpu_samples_ledger_mv"); err != nil {
					t.Fatal(err)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			d := doubtOf(tc.blk)
			if tc.intent {
				d.first = nil
			} else if d.first == nil {
				t.Fatal("doubtOf gave no first row for a block with rows")
			}
			counts := func() map[string]float64 {
				return map[string]float64{
					"sent_again":     testutil.ToFloat64(in.m.ledgerRepairs.WithLabelValues("gpu_samples", "sent_again")),
					"ledger_written": testutil.ToFloat64(in.m.ledgerRepairs.WithLabelValues("gpu_samples", "ledger_written")),
				}
			}
			before := counts()
			landed, err := in.landed(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if landed != tc.landed {
				t.Errorf("landed = %v; want %v", landed, tc.landed)
			}
			for action, n := range counts() {
				want := 0.0
				if action == tc.action {
					want = 1
				}
				if n-before[action] != want {
					t.Errorf("repairs{action=%q} went up by %v; want %v", action, n-before[action], want)
				}
			}
		})
	}
}

// TestLandedWithOtherViews checks what landed does with a block that is in
// its table without ledger rows, by the table's other views: write the ledger
// rows, and a view's missing rows where they can be told, and ask for the
// block again when another view may lack it and they cannot.
func TestLandedWithOtherViews(t *testing.T) {
	in, conn, db := testIngester(t)
	ctx := context.Background()
	at := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	samples := func(host string, off int64) block { return sampleBlockOf(at, host, kmsgAt{0, off}) }
	jobEvents := func(id string, off int64) block { return jobEventBlockOf(at, id, off) }
	allocs := func() block { return allocBlockOf(at, "7", 50) }
	for _, tc := range []struct {
		name     string
		blk      block
		detached []string // views away while the block is written
		landed   bool
		actions  []string // each goes up by one, no other
		prior    block    // written before the block, with the same views away
	}{
		{"gpu_samples with its rollup", samples("a", 10), []string{"gpu_samples_ledger_mv"}, true, []string{"ledger_written"}, nil},
		{"gpu_samples without its rollup", samples("b", 11), []string{"gpu_samples_ledger_mv", "gpu_samples_1m_mv"}, true, []string{"rollup_written", "ledger_written"}, nil},
		// Another block of the same GPU and minutes lacks its rollup too:
		// which samples the rollup lacks cannot be told.
		{"gpu_samples without its rollup, beside another without", samples("b2", 13), []string{"gpu_samples_ledger_mv", "gpu_samples_1m_mv"}, false, []string{"sent_again"}, samples("b2", 12)},
		{"job_events without ledger rows", jobEvents("7", 40), []string{"job_events_ledger_mv"}, true, []string{"ledger_written"}, nil},
		// 18.16 runs job_events_ledger_mv before job_runs_mv and jobs_mv:
		// the ledger can hold a block whose jobs or job_runs rows failed.
		{"job_events without jobs rows", jobEvents("8", 41), []string{"jobs_mv"}, true, []string{"jobs_written"}, nil},
		{"job_events without ledger and jobs rows", jobEvents("9", 42), []string{"job_events_ledger_mv", "jobs_mv"}, true, []string{"ledger_written", "jobs_written"}, nil},
		{"job_events without job_runs rows", jobEvents("10", 43), []string{"job_runs_mv"}, true, []string{"job_runs_written"}, nil},
		{"job_events without job_runs and jobs rows", jobEvents("11", 44), []string{"job_runs_mv", "jobs_mv"}, true, []string{"jobs_written", "job_runs_written"}, nil},
		{"job_events without any view's rows", jobEvents("12", 45), []string{"job_events_ledger_mv", "job_runs_mv", "jobs_mv"}, true, []string{"ledger_written", "jobs_written", "job_runs_written"}, nil},
		{"gpu_allocations", allocs(), []string{"gpu_allocations_ledger_mv"}, true, []string{"ledger_written"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range tc.detached {
				if err := conn.Exec(ctx, "DETACH TABLE "+db+"."+v); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			if tc.prior != nil {
				err = tc.prior.insert(ctx, conn, db)
			}
			if err == nil {
				err = tc.blk.insert(ctx, conn, db)
			}
			for _, v := range tc.detached {
				if err := conn.Exec(ctx, "ATTACH TABLE "+db+"."+v); err != nil {
					t.Fatal(err)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			d := doubtOf(tc.blk)
			all := []string{"ledger_written", "rollup_written", "sent_again", "rollup_short", "jobs_written", "job_runs_written"}
			before := map[string]float64{}
			for _, a := range all {
				before[a] = testutil.ToFloat64(in.m.ledgerRepairs.WithLabelValues(d.table, a))
			}
			landed, err := in.landed(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if landed != tc.landed {
				t.Errorf("landed = %v; want %v", landed, tc.landed)
			}
			for _, a := range all {
				want := 0.0
				if slices.Contains(tc.actions, a) {
					want = 1
				}
				if n := testutil.ToFloat64(in.m.ledgerRepairs.WithLabelValues(d.table, a)) - before[a]; n != want {
					t.Errorf("repairs{action=%q} went up by %v; want %v", a, n, want)
				}
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
			if d.table != "job_events" {
				return
			}
			var jobs, runs, events uint64
			id := tc.blk.(*jobEventBlock).rs[0].e.JobID
			if err := conn.QueryRow(ctx, "SELECT (SELECT count() FROM "+db+".jobs FINAL WHERE cluster = 'c' AND job_id = ?), "+
				"(SELECT count() FROM "+db+".job_runs FINAL WHERE cluster = 'c' AND job_id = ?), "+
				"(SELECT sum(rows) FROM "+db+".ingest_ledger WHERE tbl = 'job_events' AND kafka_partition = ? AND kafka_offset = ?)",
				id, id, uint32(p), uint64(off)).Scan(&jobs, &runs, &events); err != nil {
				t.Fatal(err)
			}
			if jobs != 1 || runs != 1 || events != 1 {
				t.Errorf("after landed: %d jobs rows, %d job_runs rows, and the ledger counts %d rows of the block; want 1, 1 and 1", jobs, runs, events)
			}
		})
	}
}

// TestRepairJobsAsTheView holds repairJobs to the jobs views of migrations
// 0007 and 0026: the same END event, with every field set, written once
// through jobs_mv and job_runs_mv (job "x") and once by repairJobs with the
// views detached (job "y"), gives the same jobs row, and the same job_runs
// row, but for the job id and insert time. Events of both with every column
// different from its default make a wrong or missing column in jobsSelect
// show.
func TestRepairJobsAsTheView(t *testing.T) {
	in, conn, db := testIngester(t)
	ctx := context.Background()
	at := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	blockOf := func(id string, off int64) *jobEventBlock {
		b := &jobEventBlock{key: monthKey(at.Unix())}
		e := schemas.JobEvent{Type: schemas.JobEnd, EventMillis: at.Add(time.Hour).UnixMilli() + 7, JobID: id, ArrayJobID: "40",
			ArrayTaskID: 3, Name: "train", User: "alice", UID: 1001, Group: "ml", Account: "acct", Partition: "gpu", QOS: "high",
			State: schemas.StateCompleted, ExitCode: 2, Priority: 900, SubmitMillis: at.UnixMilli(), EligibleMillis: at.Add(time.Second).UnixMilli(),
			StartMillis: at.Add(time.Minute).UnixMilli(), EndMillis: at.Add(time.Hour).UnixMilli(), TimeLimitS: 7200, NodeCount: 2,
			Nodes: []string{"gpu1", "gpu2"}, CPUs: 32, GPUs: 16, GPUType: "h100", MemReqBytes: 1 << 30, CommandHash: "ab12", WorkDir: "/w"}
		b.from.note(2, off)
		b.add("c", schemas.SourceSlurm, &e, 2, uint64(off))
		return b
	}
	if err := blockOf("x", 60).insert(ctx, conn, db); err != nil {
		t.Fatal(err)
	}
	y := blockOf("y", 61)
	insertDetached(t, conn, db, y, "jobs_mv", "job_runs_mv")
	if err := in.repairJobs(ctx, doubtOf(y)); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range strings.Split(jobsColumns, ",") {
		if c = strings.TrimSpace(c); c != "job_id" && c != "inserted_at" {
			cols = append(cols, c)
		}
	}
	list := strings.Join(cols, ", ")
	for _, table := range []string{"jobs", "job_runs"} {
		var rows, distinct uint64
		if err := conn.QueryRow(ctx, "SELECT count(), uniqExact(h) FROM (SELECT cityHash64(toString(tuple("+list+"))) AS h FROM "+db+
			"."+table+" WHERE job_id IN ('x', 'y'))").Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		if rows != 2 || distinct != 1 {
			t.Errorf("%s rows of x (view) and y (repairJobs): %d rows, %d distinct; want 2 rows, 1 distinct", table, rows, distinct)
		}
	}
	// Run again, the repair finds nothing missing and writes nothing.
	if err := in.repairJobs(ctx, doubtOf(y)); err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"jobs_written", "job_runs_written"} {
		if n := testutil.ToFloat64(in.m.ledgerRepairs.WithLabelValues("job_events", action)); n != 1 {
			t.Errorf("%s = %v after a repair and a check; want 1", action, n)
		}
	}
}

// TestRepairJobRunsOfAnEarlierRun: a requeued job's first run's END lands
// in job_events without its views' rows after the second run's SUBMIT was
// stored whole. jobs, which keeps the latest run, lacks nothing; job_runs
// lacks the first run, and only its row is written.
func TestRepairJobRunsOfAnEarlierRun(t *testing.T) {
	in, conn, db := testIngester(t)
	ctx := context.Background()
	submit := time.Date(2026, 5, 10, 9, 0, 0, 0, time.UTC)
	requeue := submit.Add(11 * time.Hour)
	run := func(off int64, e schemas.JobEvent) *jobEventBlock {
		b := &jobEventBlock{key: monthKey(e.EventMillis / 1000)}
		e.JobID, e.User, e.GPUs = "r", "alice", 4
		e.ArrayTaskID, e.ExitCode, e.MemReqBytes = schemas.Unknown, schemas.Unknown, schemas.Unknown
		b.from.note(3, off)
		b.add("c", schemas.SourceSlurm, &e, 3, uint64(off))
		return b
	}
	second := run(70, schemas.JobEvent{Type: schemas.JobSubmit, State: schemas.StatePending, EventMillis: requeue.UnixMilli(), SubmitMillis: requeue.UnixMilli()})
	if err := second.insert(ctx, conn, db); err != nil {
		t.Fatal(err)
	}
	first := run(71, schemas.JobEvent{Type: schemas.JobEnd, State: schemas.StatePreempted, EventMillis: requeue.UnixMilli() - 1,
		SubmitMillis: submit.UnixMilli(), StartMillis: submit.Add(time.Hour).UnixMilli(), EndMillis: requeue.UnixMilli() - 1})
	insertDetached(t, conn, db, first, "jobs_mv", "job_runs_mv")
	if err := in.repairJobs(ctx, doubtOf(first)); err != nil {
		t.Fatal(err)
	}
	for action, want := range map[string]float64{"jobs_written": 0, "job_runs_written": 1} {
		if n := testutil.ToFloat64(in.m.ledgerRepairs.WithLabelValues("job_events", action)); n != want {
			t.Errorf("%s = %v; want %v", action, n, want)
		}
	}
	got := map[string]string{}
	for _, table := range []string{"jobs", "job_runs"} {
		rows, err := conn.Query(ctx, "SELECT toString(submit_time), state FROM "+db+"."+table+" FINAL WHERE job_id = 'r' ORDER BY submit_time")
		if err != nil {
			t.Fatal(err)
		}
		var runs []string
		for rows.Next() {
			var at, state string
			if err := rows.Scan(&at, &state); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, at+" "+state)
		}
		rows.Close()
		got[table] = strings.Join(runs, ", ")
	}
	want := map[string]string{"jobs": "2026-05-10 20:00:00 PENDING", "job_runs": "2026-05-10 09:00:00 PREEMPTED, 2026-05-10 20:00:00 PENDING"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after the repair, FINAL rows of job r = %q; want %q", got, want)
	}
}

// insertDetached inserts blk with views of db detached, as a failed INSERT
// whose views' parts are missing leaves it.
func insertDetached(t *testing.T, conn driver.Conn, db string, blk block, views ...string) {
	t.Helper()
	ctx := context.Background()
	for _, v := range views {
		if err := conn.Exec(ctx, "DETACH TABLE "+db+"."+v); err != nil {
			t.Fatal(err)
		}
	}
	err := blk.insert(ctx, conn, db)
	for _, v := range views {
		if err := conn.Exec(ctx, "ATTACH TABLE "+db+"."+v); err != nil {
			t.Fatal(err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestAwaitInserts checks, on a real server, that a block's INSERT carries
// its query id and that awaitInserts waits for a query of the block's
// table and part key that is still running: a query holding the id of the
// block's INSERT makes the INSERT fail as already running, and
// awaitInserts returns only after that query ended.
func TestAwaitInserts(t *testing.T) {
	schematest.SkipOnCHDB(t, "queries running at once, and an INSERT refused by a running query's id")
	in, conn, db := testIngester(t)
	ctx := context.Background()
	at := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	blk := &jobEventBlock{key: monthKey(at.Unix())}
	e := schemas.JobEvent{JobID: "1", Type: schemas.JobSubmit, State: schemas.StatePending, EventMillis: at.UnixMilli(),
		SubmitMillis: at.UnixMilli(), ArrayTaskID: schemas.Unknown, ExitCode: schemas.Unknown, MemReqBytes: schemas.Unknown}
	blk.from.note(3, 70)
	blk.add("c", schemas.SourceSlurm, &e, 3, 70)
	d := doubtOf(blk)

	if err := in.awaitInserts(ctx, d); err != nil {
		t.Fatalf("awaitInserts with nothing running: %v", err)
	}
	// An INSERT of another block of the same table and part key (another
	// replica's) is not waited for.
	other := insertQueryID(db, blk.table(), blk.partKey(), []span{{partition: 4, first: 700}})
	otherDone := make(chan error, 1)
	go func() {
		var x uint8
		otherDone <- conn.QueryRow(clickhouse.Context(ctx, clickhouse.WithQueryID(other)), "SELECT sleep(2)").Scan(&x)
	}()
	time.Sleep(300 * time.Millisecond)
	begin := time.Now()
	if err := in.awaitInserts(ctx, d); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(begin); waited > time.Second {
		t.Errorf("awaitInserts waited %v for another block's query", waited)
	}
	if err := <-otherDone; err != nil {
		t.Fatal(err)
	}
	id := insertQueryID(db, blk.table(), blk.partKey(), blk.origin().spans)
	running := make(chan error, 1)
	go func() {
		qctx := clickhouse.Context(ctx, clickhouse.WithQueryID(id))
		var x uint8
		running <- conn.QueryRow(qctx, "SELECT sleep(2)").Scan(&x)
	}()
	var n uint64
	for deadline := time.Now().Add(10 * time.Second); n == 0; time.Sleep(20 * time.Millisecond) {
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.processes WHERE query_id = ?", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the query never showed in system.processes")
		}
	}
	err := blk.insert(clickhouse.Context(ctx, clickhouse.WithQueryID(id)), conn, db)
	if err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("INSERT under the id of a running query = %v; want it refused as already running", err)
	}
	if err := in.awaitInserts(ctx, d); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-running:
		if err != nil {
			t.Fatalf("the running query: %v", err)
		}
	default:
		t.Error("awaitInserts returned while the block's query was running")
	}
}

// TestResolveStart checks that a partition without a committed offset is
// read, ledger included, from its first offset in Kafka: records below it,
// deleted by retention, leave ledger rows that are not loaded.
func TestResolveStart(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t)
	ctx := context.Background()
	if err := EnsureTopics(ctx, []string{broker}, 1, schemas.TopicJobEvents); err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(broker), Topic: schemas.TopicJobEvents, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	for i := range 10 {
		if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	// Retention: the records below offset 6 are gone.
	deleteRecords(t, broker, schemas.TopicJobEvents, 0, 6)
	if err := conn.Exec(ctx, "INSERT INTO "+ch.Database+".ingest_ledger (tbl, kafka_partition, kafka_offset, part_key, rows) "+
		"SELECT 'job_events', 0, number, 202605, 1 FROM system.numbers LIMIT 10"); err != nil {
		t.Fatal(err)
	}
	in, err := New(Config{Brokers: []string{broker}, ClickHouse: ch}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var h handler
	for _, x := range in.handlers {
		if x.topic() == schemas.TopicJobEvents {
			h = x
		}
	}
	for _, tc := range []struct {
		committed, want int64
		loaded          int
	}{{-2, 6, 4}, {8, 8, 2}} {
		a := assignment{h: h, partition: 0, offset: tc.committed}
		if _, _, err := in.resolveStart(ctx, &a); err != nil {
			t.Fatal(err)
		}
		if a.offset != tc.want {
			t.Errorf("committed %d: start offset %d; want %d", tc.committed, a.offset, tc.want)
		}
		done, err := in.loadLedger(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if len(done) != tc.loaded {
			t.Errorf("committed %d: %d ledger offsets loaded; want %d", tc.committed, len(done), tc.loaded)
		}
	}

	// A committed offset Kafka has deleted the messages of: the reader
	// goes on at the first one it holds, and the ones lost are counted.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out := make(chan item, 16)
	a := assignment{h: h, partition: 0, offset: 2}
	go in.read(rctx, a, nil, out, in.newPartLag(a))
	select {
	case it := <-out:
		if it.offset != 6 {
			t.Errorf("first message read at offset %d; want 6", it.offset)
		}
	case <-rctx.Done():
		t.Fatal("no message read from a committed offset below the log start")
	}
	if n := testutil.ToFloat64(in.m.skipped.WithLabelValues(schemas.TopicJobEvents)); n != 4 {
		t.Errorf("messages expired = %v; want 4 (offsets 2 to 5)", n)
	}
}

// deleteRecords deletes the records of topic's partition below offset, as the
// broker's retention would.
func deleteRecords(t *testing.T, broker, topic string, partition int32, offset int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete records of %s/%d below %d: %+v, %v", topic, partition, offset, resp, err)
	}
}

// TestPruneLedger checks that the ledger partitions holding only offsets that
// Kafka deleted are dropped, and that a partition is kept while one of its
// rows is for an offset Kafka still holds, or for a table, topic or Kafka
// partition whose first offset is unknown. Dead letters' rows are judged by
// their source table's topic.
func TestPruneLedger(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t)
	ctx := t.Context()
	if err := EnsureTopics(ctx, []string{broker}, 2, schemas.TopicGPUSamples, schemas.TopicJobEvents); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		c, err := kafka.DialLeader(ctx, "tcp", broker, schemas.TopicGPUSamples, p)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := c.WriteMessages(kafka.Message{Value: []byte{byte(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
		deleteRecords(t, broker, schemas.TopicGPUSamples, int32(p), 6)
	}
	// Ledger partitions are intDiv(part_key, 100): months of the daily
	// gpu_samples keys, years of the monthly keys of the other tables.
	ledger := []struct {
		tbl       string
		partition uint32
		from, to  uint64 // offsets
		partKey   uint32
	}{
		{"gpu_samples", 0, 0, 5, 20260415}, // 202604: all below 6 in both partitions: dropped
		{"gpu_samples", 1, 0, 3, 20260420},
		{"gpu_samples", 0, 4, 7, 20260501},   // 202605: offsets 6 and 7 are still in Kafka
		{"gpu_samples", 0, 0, 2, 20260301},   // 202603: also holds ...
		{"unknown_table", 0, 0, 0, 20260302}, // ... a table ingest does not know
		{"gpu_samples", 5, 0, 0, 20260201},   // 202602: a partition the topic lacks
		{"job_events", 0, 0, 3, 202604},      // 2026: job events Kafka has from offset 0
		{"gpu_allocations", 0, 0, 1, 202512}, // 2025: a topic that does not exist
		// 42949672: dead letters of gpu_samples' partition 0, offsets 6
		// and 7 still in Kafka.
		{"deadletter/gpu_samples", 0, 3, 7, deadPartKey},
	}
	for _, l := range ledger {
		if err := conn.Exec(ctx, "INSERT INTO "+ch.Database+".ingest_ledger (tbl, kafka_partition, kafka_offset, part_key, rows) "+
			"SELECT ?, ?, number + ?, ?, 1 FROM system.numbers LIMIT ?", l.tbl, l.partition, l.from, l.partKey, l.to-l.from+1); err != nil {
			t.Fatal(err)
		}
	}
	in, err := New(Config{Brokers: []string{broker}, ClickHouse: ch}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := in.pruneLedger(ctx)
	if err != nil {
		t.Fatalf("pruneLedger() = %v", err)
	}
	if !slices.Equal(dropped, []string{"202604"}) {
		t.Errorf("pruneLedger() dropped %v; want [202604]", dropped)
	}
	if got := schematest.Count(t, conn, ch.Database+".ingest_ledger"); got != 4+3+1+1+4+2+5 {
		t.Errorf("%d ledger rows left; want 20, all but the 10 of 202604", got)
	}
	if dropped, err := in.pruneLedger(ctx); err != nil || len(dropped) != 0 {
		t.Errorf("pruneLedger() again = %v, %v; want nothing dropped", dropped, err)
	}
	// Kafka deletes the rest of gpu_samples' partition 0: 202605, 202603
	// and the dead letters' partition hold only expired offsets now, but
	// 202603 still names a table ingest does not know.
	deleteRecords(t, broker, schemas.TopicGPUSamples, 0, 10)
	dropped, err = in.pruneLedger(ctx)
	if err != nil || !slices.Equal(dropped, []string{"202605", "42949672"}) {
		t.Errorf("pruneLedger() after more deletions = %v, %v; want [202605 42949672]", dropped, err)
	}
}

// jobEventBlockOf is a job_events block of one SUBMIT event of job id at
// time at, from Kafka partition 1, offset off.
func jobEventBlockOf(at time.Time, id string, off int64) *jobEventBlock {
	b := &jobEventBlock{key: monthKey(at.Unix())}
	e := schemas.JobEvent{JobID: id, Type: schemas.JobSubmit, State: schemas.StatePending, EventMillis: at.UnixMilli(),
		SubmitMillis: at.UnixMilli(), ArrayTaskID: schemas.Unknown, ExitCode: schemas.Unknown, MemReqBytes: schemas.Unknown}
	b.from.note(1, off)
	b.add("c", schemas.SourceSlurm, &e, 1, uint64(off))
	return b
}

// allocBlockOf is a gpu_allocations block of one open interval of job on
// GPU 0 of host gpu1 from time at, from Kafka partition 1, offset off.
func allocBlockOf(at time.Time, job string, off int64) *allocBlock {
	b := &allocBlock{key: monthKey(at.Unix())}
	b.from.note(1, off)
	b.cluster, b.host, b.gpuIndex, b.gpuUUID, b.migUUID = []string{"c"}, []string{"gpu1"}, []int32{0}, []string{""}, []string{""}
	b.jobID, b.user, b.start, b.end = []string{job}, []string{"alice"}, []int64{at.Unix()}, []*time.Time{nil}
	b.source, b.version, b.kPartition, b.kOffset = []string{"scontrol"}, []uint64{1}, []uint32{1}, []uint64{uint64(off)}
	return b
}

// eventBlockOf is a gpu_events block of one XID event on host's GPU at time
// at, from Kafka partition 1, offset off.
func eventBlockOf(at time.Time, host string, off int64) *eventBlock {
	b := &eventBlock{key: monthKey(at.Unix())}
	b.from.note(1, off)
	sec, ms := floorDiv(at.UnixMilli() + 250)
	b.ts, b.millis, b.cluster, b.host, b.gpuUUID = []int64{sec}, []uint16{ms}, []string{"c"}, []string{host}, []string{"GPU-" + host}
	b.eventType, b.xid, b.kPartition, b.kOffset = []string{"xid"}, []uint64{79}, []uint32{1}, []uint64{uint64(off)}
	return b
}

// TestFirstRow checks each block type's firstRow against ClickHouse: its
// condition holds for the row the block wrote, at its part key, partition
// and offset, and not for another block's row at the same offset.
func TestFirstRow(t *testing.T) {
	_, conn, db := testIngester(t)
	ctx := context.Background()
	at := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		stored, asks block // stored is written; asks is a block with another row at the same offset
	}{
		{"gpu_samples", sampleBlockOf(at, "a", kmsgAt{1, 20}), sampleBlockOf(at, "b", kmsgAt{1, 20})},
		{"gpu_events", eventBlockOf(at, "a", 21), eventBlockOf(at.Add(time.Second), "a", 21)},
		{"job_events", jobEventBlockOf(at, "7", 22), jobEventBlockOf(at, "8", 22)},
		{"gpu_allocations", allocBlockOf(at, "7", 23), allocBlockOf(at, "8", 23)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.stored.insert(ctx, conn, db); err != nil {
				t.Fatal(err)
			}
			s := tc.stored.origin().spans[0]
			if _, _, ok := tc.stored.firstRow(s.partition, s.first+1); ok {
				t.Errorf("firstRow at offset %d, which gave the block no row: ok", s.first+1)
			}
			for _, c := range []struct {
				blk  block
				want uint64
			}{{tc.stored, 1}, {tc.asks, 0}} {
				cond, args, ok := c.blk.firstRow(s.partition, s.first)
				if !ok {
					t.Fatalf("firstRow(%d, %d): no row", s.partition, s.first)
				}
				var n uint64
				if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+"."+tc.stored.table()+" WHERE "+partExprs[tc.stored.table()]+
					" = ? AND kafka_partition = ? AND kafka_offset = ? AND "+cond,
					append([]any{tc.stored.partKey(), uint32(s.partition), uint64(s.first)}, args...)...).Scan(&n); err != nil {
					t.Fatalf("%s: %v", cond, err)
				}
				if n != c.want {
					t.Errorf("rows matching %s %v: %d; want %d", cond, args, n, c.want)
				}
			}
		})
	}
}

// TestRepairRollupAsTheView: the rollup that repairRollup writes for a block
// whose rollup view failed is the one gpu_samples_1m_mv writes. The same
// samples (every rolled-up metric, one sample without power) of host "view"
// inserted through the view and of host "repaired" with the view detached,
// then repaired, finalize to the same values in every column. A block whose
// GPUs and minutes hold other rows without their rollup is left alone:
// nothing tells which rows the missing samples are.
func TestRepairRollupAsTheView(t *testing.T) {
	in, conn, db := testIngester(t)
	ctx := context.Background()
	at := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	batchOf := func(host string) *schemas.SampleBatch {
		b := &schemas.SampleBatch{Cluster: "c", Host: host, GPUs: []schemas.GPU{{UUID: "GPU-" + host, Minor: -1, GIID: -1, CIID: -1}}}
		for i := range 4 {
			s := schemas.Sample{TSMillis: at.Add(time.Duration(i) * 40 * time.Second).UnixMilli()}
			for m, v := range map[schemas.Metric]uint64{schemas.GPUUtil: 10, schemas.MemUtil: 3, schemas.FBUsed: 1 << 30,
				schemas.Energy: 5_000_000, schemas.GPUTemp: 40} {
				s.Set(m, v*uint64(i+1))
			}
			if i != 2 {
				s.Set(schemas.PowerUsage, 300_000+uint64(i)*7)
			}
			s.SetFloat(schemas.SMActive, 0.25*float64(i))
			s.SetFloat(schemas.TensorActive, 0.125*float64(i))
			b.Samples = append(b.Samples, s)
		}
		return b
	}
	// Every column of the rollup is written (a column added to the view
	// needs adding to rollupSelect too).
	var cols []string
	if err := conn.QueryRow(ctx, "SELECT groupArray(name) FROM (SELECT name FROM system.columns WHERE database = ? AND table = 'gpu_samples_1m' ORDER BY name)", db).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	written := strings.Split(rollupColumns, ", ")
	slices.Sort(written)
	if !slices.Equal(cols, written) {
		t.Errorf("gpu_samples_1m has columns %v; rollupColumns names %v", cols, written)
	}
	key := dayKey(at.Unix())
	if err := sampleBlockFrom(key, batchOf("view"), kmsgAt{0, 1}).insert(ctx, conn, db); err != nil {
		t.Fatal(err)
	}
	repaired := sampleBlockFrom(key, batchOf("repaired"), kmsgAt{0, 2})
	insertDetached(t, conn, db, repaired, "gpu_samples_1m_mv")
	rollup := func(host string) []string {
		t.Helper()
		var out []string
		if err := conn.QueryRow(ctx, "SELECT groupArray(r) FROM (SELECT toString(tuple(minute, countMerge(samples), avgIfMerge(gpu_util_avg), "+
			"maxIfMerge(gpu_util_max), avgIfMerge(mem_util_avg), maxIfMerge(fb_used_max), avgIfMerge(power_avg), maxIfMerge(power_max), "+
			"maxIfMerge(energy_max), maxIfMerge(gpu_temp_max), avgIfMerge(sm_active_avg), avgIfMerge(tensor_active_avg))) AS r FROM "+db+
			".gpu_samples_1m WHERE host = ? GROUP BY minute ORDER BY minute)", host).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for range 2 { // the second time, it finds the rollup complete and writes nothing
		complete, err := in.repairRollup(ctx, doubtOf(repaired))
		if err != nil || !complete {
			t.Fatalf("repairRollup = %v, %v; want complete", complete, err)
		}
		view, got := rollup("view"), rollup("repaired")
		if len(view) != 3 || !slices.Equal(got, view) {
			t.Errorf("rollup written by repairRollup:\n%s\nwant, as the view's (3 minutes):\n%s", strings.Join(got, "\n"), strings.Join(view, "\n"))
		}
	}
	// Two blocks in the same minutes, both without their rollup.
	a, b := sampleBlockFrom(key, batchOf("both"), kmsgAt{0, 3}), sampleBlockFrom(key, batchOf("both"), kmsgAt{0, 4})
	insertDetached(t, conn, db, a, "gpu_samples_1m_mv")
	insertDetached(t, conn, db, b, "gpu_samples_1m_mv")
	for _, blk := range []*sampleBlock{a, b} {
		complete, err := in.repairRollup(ctx, doubtOf(blk))
		if err != nil || complete {
			t.Errorf("repairRollup of one of two blocks lacking their rollup = %v, %v; want incomplete", complete, err)
		}
	}
	if got := rollup("both"); len(got) != 0 {
		t.Errorf("rollup written for blocks not told apart: %v", got)
	}
}
