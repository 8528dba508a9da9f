package retention_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/internal/retention"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestDropExpired(t *testing.T) {
	ch, conn := schematest.Database(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+ch.Database+".gpu_samples (ts, cluster, host, gpu_uuid, kafka_partition, kafka_offset)")
	if err != nil {
		t.Fatal(err)
	}
	for i, ts := range []time.Time{
		now.AddDate(0, 0, -40), // expired
		now.AddDate(0, 0, -31), // expired: the whole day is older than 30 days
		now.AddDate(0, 0, -30), // kept: part of its day is within 30 days
		now,
	} {
		if err := b.Append(ts, "c", "h", "GPU-1", uint32(0), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	rule := retention.Rule{Table: "gpu_samples", Keep: 30 * 24 * time.Hour, Daily: true}
	dropped, err := retention.DropExpired(ctx, conn, ch.Database, rule, now)
	if err != nil {
		t.Fatalf("DropExpired: %v", err)
	}
	slices.Sort(dropped)
	if want := []string{"20261012", "20261021"}; !slices.Equal(dropped, want) {
		t.Errorf("DropExpired dropped %v; want %v", dropped, want)
	}
	if n := schematest.Count(t, conn, ch.Database+".gpu_samples"); n != 2 {
		t.Errorf("%d rows left; want 2", n)
	}
	// Keep 0 keeps everything.
	if d, err := retention.DropExpired(ctx, conn, ch.Database, retention.Rule{Table: "gpu_samples", Daily: true}, now.AddDate(5, 0, 0)); err != nil || len(d) != 0 {
		t.Errorf("DropExpired with Keep 0 = %v, %v; want nothing dropped", d, err)
	}
}
