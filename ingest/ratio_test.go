package ingest_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestSampleRatioUnfit: a GPM ratio that is NaN or infinite (a broken
// reading; the wire format carries any float32 bits), negative, or above 1
// by more than rounding (a percentage sent as is: 50 for 0.5) is stored as
// NULL (unknown) and counted in heliostat_ingest_values_unknown_total, the
// rest of its sample as sent; 1.0005 (a rate's rounding) is kept. Before,
// NaN was stored as is and made avg(sm_active) of the GPU, so a job's
// sm_active_mean and the efficiency report, NaN; until 2026-11-24 a 50
// was stored and averaged in.
func TestSampleRatioUnfit(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond), kfake.SeedTopics(1, schemas.TopicGPUSamples))
	ts := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	b := schemas.SampleBatch{Cluster: "c", Host: "h1"}
	g := b.AddGPU(schemas.GPU{UUID: "GPU-1", Minor: -1, GIID: -1, CIID: -1})
	values := []float64{0.5, math.NaN(), math.Inf(1), math.Inf(-1), -0.25, 50, 1.0005}
	for i, v := range values {
		s := schemas.Sample{TSMillis: ts + int64(i)*1000, GPU: g}
		s.SetFloat(schemas.SMActive, v)
		s.SetFloat(schemas.DRAMActive, 0.25)
		s.Set(schemas.GPUUtil, 40)
		b.Samples = append(b.Samples, s)
	}
	v, err := schemas.AppendSampleBatch(nil, &b)
	if err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(broker), Topic: schemas.TopicGPUSamples, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	if err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte("h1"), Value: v}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	done := startIngest(t, ctx, broker, ch, reg)
	waitCount(t, conn, ch.Database+".gpu_samples", uint64(len(values)), 30*time.Second)
	waitReadAll(t, reg, schemas.TopicGPUSamples)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var (
		known, dram, util uint64
		mean              float64
	)
	if err := conn.QueryRow(context.Background(), "SELECT count(sm_active), toFloat64(avg(sm_active)), count(dram_active), count(gpu_util) FROM "+ch.Database+".gpu_samples").
		Scan(&known, &mean, &dram, &util); err != nil {
		t.Fatal(err)
	}
	n := uint64(len(values))
	if want := (0.5 + float64(float32(1.0005))) / 2; known != 2 || math.Abs(mean-want) > 1e-6 || dram != n || util != n {
		t.Errorf("gpu_samples: %d known sm_active, mean %v, %d dram_active, %d gpu_util; want 2, %v, %d, %d (NaN, ±Inf, -0.25 and 50 stored as NULL, the rest kept)", known, mean, dram, util, want, n, n)
	}
	if v := metricSum(t, reg, "heliostat_ingest_values_unknown_total", "column", "sm_active"); v != 5 {
		t.Errorf("heliostat_ingest_values_unknown_total{column=\"sm_active\"} = %v; want 5", v)
	}
}
