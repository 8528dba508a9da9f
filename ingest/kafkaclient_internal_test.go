package ingest

import (
	"log/slog"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestKafkaClientShared: the requests ingest sends outside its consumer
// group (a partition's offsets at every assignment and every idle
// --ingest.log-check) share one connection pool. A client per request left
// a pool behind each time, with its connections and metadata goroutine:
// about 13 goroutines a request on this broker.
func TestKafkaClientShared(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t)
	if err := EnsureTopics(t.Context(), []string{broker}, 1, schemas.TopicJobEvents); err != nil {
		t.Fatal(err)
	}
	in, err := New(Config{Brokers: []string{broker}, ClickHouse: ch}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	const requests = 50
	for range requests {
		if _, _, err := logBounds(t.Context(), in.kafkaClient(), schemas.TopicJobEvents, 0); err != nil {
			t.Fatal(err)
		}
	}
	if grown := runtime.NumGoroutine() - before; grown > 2*requests {
		t.Fatalf("%d requests left %d more goroutines; one shared pool needs a few dozen at most", requests, grown)
	}
}
