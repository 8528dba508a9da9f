package ingest

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/schemas"
)

func TestFitDeadLetter(t *testing.T) {
	hdr := func(m kafka.Message) (string, int) {
		v, n := "", 0
		for _, h := range m.Headers {
			if h.Key == schemas.HeaderDeadletterTruncated {
				v, n = string(h.Value), n+1
			}
		}
		return v, n
	}
	for _, tc := range []struct {
		name         string
		value, limit int
		cut          bool
	}{
		{"small", 100, 1000, false},
		{"just fits", 800, 1000, false},
		{"over", 5000, 1000, true},
		{"far over", 2_000_000, deadLetterMaxBytes, true},
		{"limit below the headers", 50, 60, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := kafka.Message{Key: []byte("k"), Value: bytes.Repeat([]byte{'v'}, tc.value),
				Headers: []kafka.Header{{Key: schemas.HeaderDeadletterReason, Value: []byte("bad magic")}}}
			if got := fitDeadLetter(&m, tc.limit); got != tc.cut {
				t.Fatalf("fitDeadLetter = %v; want %v", got, tc.cut)
			}
			v, n := hdr(m)
			if !tc.cut {
				if len(m.Value) != tc.value || n != 0 {
					t.Errorf("uncut: value %d bytes, %d truncated headers", len(m.Value), n)
				}
				return
			}
			if n != 1 || v != strconv.Itoa(tc.value) || len(m.Value) >= tc.value {
				t.Errorf("cut: value %d bytes, %d truncated headers %q; want fewer than %d bytes, one header %d", len(m.Value), n, v, tc.value, tc.value)
			}
			// Cut again, smaller: still one header with the first length.
			if fitDeadLetter(&m, tc.limit/2) {
				t.Error("a second cut reported as a new one")
			}
			if v, n := hdr(m); n != 1 || v != strconv.Itoa(tc.value) {
				t.Errorf("after a second cut: %d truncated headers %q; want one, %d", n, v, tc.value)
			}
		})
	}
}

// TestDeadLetterLedger: a partition's dead letters' ledger rows (under a tbl
// of their own) are read with its table's by loadLedger, so that the next
// read skips them, and a reset of the partition forgets them with the
// table's; another partition's or another table's are neither.
func TestDeadLetterLedger(t *testing.T) {
	in, conn, db := testIngester(t)
	ctx := context.Background()
	const day = 20260501
	for _, l := range []struct {
		tbl       string
		partition uint32
		offsets   []uint64
		key       uint32
	}{
		{"gpu_samples", 0, []uint64{0, 1, 2, 4, 5, 6, 8, 9}, day},
		{"deadletter/gpu_samples", 0, []uint64{3, 7}, deadPartKey},
		{"deadletter/gpu_samples", 1, []uint64{7}, deadPartKey},
		{"deadletter/job_events", 0, []uint64{7}, deadPartKey},
	} {
		for _, off := range l.offsets {
			if err := conn.Exec(ctx, "INSERT INTO "+db+".ingest_ledger (tbl, kafka_partition, kafka_offset, part_key, rows) SELECT ?, ?, ?, ?, 1",
				l.tbl, l.partition, off, l.key); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := assignment{h: in.byTopic[schemas.TopicGPUSamples], partition: 0, offset: 2}
	load := func() map[int64][]uint32 {
		t.Helper()
		done, err := in.loadLedger(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		return done
	}
	want := map[int64][]uint32{2: {day}, 3: {deadPartKey}, 4: {day}, 5: {day}, 6: {day}, 7: {deadPartKey}, 8: {day}, 9: {day}}
	if got := load(); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("loadLedger(partition 0 from offset 2) = %v; want %v", got, want)
	}
	if err := in.forget(ctx, "gpu_samples", schemas.TopicGPUSamples, 0, 5, nil); err != nil {
		t.Fatal(err)
	}
	want = map[int64][]uint32{2: {day}, 3: {deadPartKey}, 4: {day}}
	if got := load(); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("after a reset from offset 5, loadLedger(partition 0 from offset 2) = %v; want %v", got, want)
	}
	var others uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+".ingest_ledger WHERE kafka_offset = 7 AND tbl != 'gpu_samples'").Scan(&others); err != nil {
		t.Fatal(err)
	}
	if others != 2 {
		t.Errorf("after the reset %d dead letters' rows at offset 7 are left; want 2 (partition 1's, job_events')", others)
	}
}
