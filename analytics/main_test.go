package analytics_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/ingest/trace"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestMain(m *testing.M) { os.Exit(schematest.Main(m)) }

// sharedData returns the path of a file in ../shared/data, failing under CI
// and skipping elsewhere when it is missing (shared/data/README.md).
func sharedData(tb testing.TB, rel string) string {
	tb.Helper()
	p := "../../shared/data/" + rel
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("shared data %s: %v", p, err)
		}
		tb.Skipf("shared data %s not found (%v); set CI to make this a failure", p, err)
	}
	return p
}

// importTrace imports a trace file into database as cluster's job events,
// the way `heliostat import --to clickhouse` does.
func importTrace(tb testing.TB, conn driver.Conn, database, path, cluster string) *trace.Trace {
	tb.Helper()
	tr, err := trace.Open(path, "")
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	conv := trace.NewConverter()
	var events []schemas.JobEvent
	flush := func() {
		if err := ingest.InsertJobEvents(context.Background(), conn, database, cluster, schemas.SourceTrace, events); err != nil {
			tb.Fatalf("insert job events of %s: %v", path, err)
		}
		events = events[:0]
	}
	for i := range tr.Jobs {
		events = conv.Append(events, &tr.Jobs[i])
		if len(events) >= 100_000 {
			flush()
		}
	}
	flush()
	return tr
}

// newRunner returns a Runner on database with a fixed clock.
func newRunner(tb testing.TB, conn driver.Conn, database string, now time.Time, capacity ...analytics.Capacity) *analytics.Runner {
	tb.Helper()
	r, err := analytics.NewRunner(analytics.Config{Database: database, TimeZone: "UTC", Lookback: 30 * 24 * time.Hour, Capacity: capacity},
		conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), func() time.Time { return now })
	if err != nil {
		tb.Fatalf("NewRunner: %v", err)
	}
	return r
}
