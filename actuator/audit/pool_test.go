package audit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestWriteThenCancel: a write whose context is cancelled as soon as it
// returns (the loop's Settle, then its deferred cancel) must leave the
// pooled connection usable for the next write. clickhouse-go before
// v2.51.0 could close the connection's socket after Send had returned it to
// the pool, when its context watchdog ran late and saw the context done:
// the next write then failed with "use of closed network connection"
// (TestLoopSimKindUseWait, CI at d212ca4). Busy goroutines beside the
// writes make the watchdog run late often enough to catch it: with v2.50.0
// 2 of its 200 writes failed in each of two runs (without them, one write
// in 1,000 did).
func TestWriteThenCancel(t *testing.T) {
	cfg, conn := schematest.Database(t)
	if cfg.Protocol == "http" {
		t.Skip("the watchdog is the native protocol's batch (chDB answers over HTTP)")
	}
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l, err := New(conn, cfg.Database, func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for x := 0; ; x++ {
				select {
				case <-stop:
					return
				default:
				}
				for j := range 100_000 {
					x += j
				}
			}
		})
	}
	defer wg.Wait()
	defer close(stop)
	failed := 0
	for i := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		r := Record{Cluster: "c", ID: l.NewID(t0), Adapter: "sim", Kind: "power_up", Target: "n1", DecidedAt: t0}
		err := l.Plan(ctx, []Record{r})
		cancel()
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		r.ID = l.NewID(t0)
		if err := l.Plan(context.Background(), []Record{r}); err != nil {
			if failed++; failed == 1 {
				t.Errorf("write %d after a cancelled one: %v", i, err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of 200 writes after a cancelled one failed", failed)
	}
}
