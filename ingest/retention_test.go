package ingest_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/retention"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestSampleRetentionClock: RetainSamples compares the sample tables'
// partitions with the clock it is given, not the wall clock: samples of a
// simulated cluster months ahead of the wall clock are dropped once they
// are older than Keep on its clock, and the rollup keeps RollupKeep.
// Before, ingest's retention compared them with time.Now, and a cluster
// running ahead kept them until the wall clock caught up.
func TestSampleRetentionClock(t *testing.T) {
	ch, conn := schematest.Database(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// Five days into a month about three months ahead of the wall clock:
	// 40 days earlier lies in a month that ends before the cut-off 30
	// days earlier, and 10 days earlier in one that does not.
	y, m, _ := time.Now().UTC().Date()
	simNow := time.Date(y, m+3, 6, 10, 0, 0, 0, time.UTC)
	for _, ts := range []time.Time{simNow.AddDate(0, 0, -40), simNow.AddDate(0, 0, -10), simNow} {
		// Partition 999 is no Kafka partition: the ledger rows the
		// inserts add are never asked about.
		if err := conn.Exec(ctx, "INSERT INTO "+ch.Database+".gpu_samples (ts, cluster, host, gpu_uuid, kafka_partition, kafka_offset) SELECT ?, 'c', 'h', 'GPU-1', 999, 1", ts); err != nil {
			t.Fatal(err)
		}
		if err := conn.Exec(ctx, "INSERT INTO "+ch.Database+".gpu_events (ts_received, cluster, host, gpu_uuid, event_type, kafka_partition, kafka_offset) SELECT ?, 'c', 'h', 'GPU-1', 'xid', 999, 1", ts); err != nil {
			t.Fatal(err)
		}
		if err := conn.Exec(ctx, "INSERT INTO "+ch.Database+".gpu_samples_1m (minute, cluster, host, gpu_uuid) SELECT ?, 'c', 'h', 'GPU-1'", ts); err != nil {
			t.Fatal(err)
		}
	}
	in, err := ingest.New(ingest.Config{Brokers: []string{"127.0.0.1:1"}, ClickHouse: ch}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		r    ingest.SampleRetention
		want map[string][]string // partitions left, by table
	}{
		{"wall clock", ingest.SampleRetention{Keep: 30 * 24 * time.Hour, RollupKeep: 30 * 24 * time.Hour, Now: time.Now}, map[string][]string{
			"gpu_samples":    {simNow.AddDate(0, 0, -40).Format("20060102"), simNow.AddDate(0, 0, -10).Format("20060102"), simNow.Format("20060102")},
			"gpu_events":     months(simNow.AddDate(0, 0, -40), simNow.AddDate(0, 0, -10), simNow),
			"gpu_samples_1m": months(simNow.AddDate(0, 0, -40), simNow.AddDate(0, 0, -10), simNow),
		}},
		{"simulated clock", ingest.SampleRetention{Keep: 30 * 24 * time.Hour, RollupKeep: 400 * 24 * time.Hour, Now: func() time.Time { return simNow }}, map[string][]string{
			"gpu_samples":    {simNow.AddDate(0, 0, -10).Format("20060102"), simNow.Format("20060102")},
			"gpu_events":     months(simNow.AddDate(0, 0, -10), simNow),
			"gpu_samples_1m": months(simNow.AddDate(0, 0, -40), simNow.AddDate(0, 0, -10), simNow),
		}},
	} {
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- in.RetainSamples(rctx, tc.r) }()
		// The first pass runs at once; the next one an hour later.
		deadline := time.Now().Add(30 * time.Second)
		for table, want := range tc.want {
			for {
				got, err := retention.Partitions(ctx, conn, ch.Database, table)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Equal(got, want) {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("%s: partitions of %s %v; want %v", tc.name, table, got, want)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: RetainSamples = %v; want nil once its context ends", tc.name, err)
		}
	}
}

// months returns the distinct monthly partition ids of ts, in order.
func months(ts ...time.Time) []string {
	var out []string
	for _, t := range ts {
		if m := t.Format("200601"); !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}
