package ingest_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestSummarizerEnergyCounterReset: a job's energy is its GPU's energy
// counter's rise over the run only where the counter rose throughout it. A
// counter that reset during the run (energy_mj counts from the driver's
// load, and a reload starts it again) is not used: the GPU's energy is then
// its mean power over the run, as for a GPU without a counter. Before, the
// rise was taken as max − min over the run, the reset counter's whole age
// (5,390 kJ for a 720 kJ job here). Each job ran an hour on its own GPU, at
// 200 W by power_mw, while the counter rose 13 kJ a minute (217 W), so the
// two estimates differ.
func TestSummarizerEnergyCounterReset(t *testing.T) {
	t0 := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
	start, end := t0.Add(time.Minute), t0.Add(61*time.Minute)
	const fallback = 200 * 3600 // mean power × the run's time
	tests := []struct {
		host     string
		interval time.Duration // between samples, from t0 for 62 minutes
		energy   string        // energy_mj of sample k, a ClickHouse expression
		want     float64       // J
	}{
		{"rising", time.Minute, "5000000000 + k * 13000000", 60 * 13_000},
		// Sampled twice a second: the first and the last sample of the
		// run are told apart by the millisecond.
		{"rising-500ms", 500 * time.Millisecond, "5000000000 + k * 108000", 7201 * 108},
		{"reset-before-run", time.Minute, "if(k < 1, 5000000000, toUInt64((k - 1) * 13000000))", 60 * 13_000},
		{"reset-in-run", time.Minute, "if(k < 31, 5000000000 + k * 13000000, toUInt64((k - 31) * 13000000))", fallback},
		// The driver loaded as the run began (its first sample is the
		// counter's lowest): the last sample is not its highest.
		{"reset-in-run-loaded-at-start", time.Minute, "if(k < 31, toUInt64((greatest(k, 1) - 1) * 13000000), toUInt64((k - 31) * 4000000))", fallback},
		{"reset-at-last-sample", time.Minute, "if(k < 61, 5000000000 + k * 13000000, toUInt64(0))", fallback},
	}
	ch, conn := schematest.Database(t)
	db := ch.Database
	for i, tc := range tests {
		id := fmt.Sprint(i + 1)
		insertJobRows(t, conn, db, jobRow{id: id, event: "END", state: "COMPLETED", submit: t0, start: start, end: end, gpus: u32(1), at: end, inserted: end})
		insertAllocs(t, conn, db, allocRow{tc.host, 1, id, start, end})
		iv := tc.interval.Milliseconds()
		q := fmt.Sprintf(`INSERT INTO %[1]s.gpu_samples (ts, ts_millis, cluster, host, gpu_index, gpu_uuid, mig_uuid, gpu_util, power_mw, energy_mj, kafka_partition, kafka_offset)
SELECT toDateTime(%[3]d + intDiv(k * %[4]d, 1000)), toUInt16((k * %[4]d) %% 1000), 'c1', '%[2]s', 0, '', '', 50, 200000, toUInt64(%[5]s), 0, 0
FROM (SELECT number AS k FROM system.numbers LIMIT %[6]d)`, db, tc.host, t0.Unix(), iv, tc.energy, 62*time.Minute.Milliseconds()/iv)
		if err := conn.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := ingest.NewSummarizer(ingest.SummaryConfig{Database: db}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sum.Once(context.Background()); err != nil || n != len(tests) {
		t.Fatalf("Once = %d, %v; want %d runs summarized", n, err, len(tests))
	}
	for i, tc := range tests {
		var energy *float64
		if err := conn.QueryRow(context.Background(), fmt.Sprintf("SELECT energy_j FROM %s.job_run_summary FINAL WHERE job_id = '%d'", db, i+1)).Scan(&energy); err != nil {
			t.Fatal(err)
		}
		if energy == nil || math.Abs(*energy-tc.want) > 1 {
			got := "NULL"
			if energy != nil {
				got = fmt.Sprintf("%.0f J", *energy)
			}
			t.Errorf("%s: energy_j = %s; want %.0f J", tc.host, got, tc.want)
		}
	}
}
