package ingest

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestBench runs `heliostat bench ingest`'s measurement small, on the test
// ClickHouse and a real broker: every row goes through and is counted in
// ClickHouse (Bench checks the count), and every figure is measured.
func TestBench(t *testing.T) {
	ch, _ := schematest.Database(t)
	_, broker := schematest.Broker(t)
	var progress strings.Builder
	res, err := Bench(context.Background(), BenchConfig{
		Brokers: []string{broker}, ClickHouse: ch, Rows: 4000, BatchRows: 1000, Progress: &progress,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Bench: %v\n%s", err, progress.String())
	}
	if res.Rows != 4000 || res.Messages != 50 || res.RowsPerMessage != 80 || res.ClickHouse == "" {
		t.Errorf("rows %d, messages %d of %d, server %q; want 4000, 50 of 80, a version", res.Rows, res.Messages, res.RowsPerMessage, res.ClickHouse)
	}
	if !(res.RowsPerS > 0 && res.RawRowsPerS > 0 && res.Ratio > 0 && res.IngestSeconds > 0 && res.ProduceRowsPS > 0) {
		t.Errorf("unmeasured figures: %+v", res)
	}
	for _, want := range []string{"producing 4000 samples", "ingesting broker", "inserting the same rows"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress %q lacks %q", progress.String(), want)
		}
	}
}

// TestBenchIngestCancel: waiting for rows that never come ends when the
// context does (Ctrl-C on `bench ingest`), not after 15 minutes.
func TestBenchIngestCancel(t *testing.T) {
	ch, _ := schematest.Database(t)
	_, broker := schematest.Broker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	began := time.Now()
	_, _, err := benchIngest(ctx, BenchConfig{Brokers: []string{broker}, Rows: 10, BatchRows: 10}, ch, slog.New(slog.DiscardHandler))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("benchIngest with no rows to read = %v; want the context's deadline", err)
	}
	if d := time.Since(began); d > 30*time.Second {
		t.Errorf("benchIngest returned %v after the context ended", d-3*time.Second)
	}
}
