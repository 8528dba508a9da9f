// Package collectortest runs a collector with the real publisher against an
// in-process Kafka-protocol broker, for the end-to-end tests of the collector
// and of its GPU sources.
package collectortest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/collector/publish"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// Run is what a collector published in a Published run.
type Run struct {
	// Messages are those on the samples topic's partition 0.
	Messages []kafka.Message
	// Collected is heliostat_collector_samples_total, over all sources;
	// Published is heliostat_collector_messages_total of the samples topic
	// with outcome published.
	Collected, Published float64
}

// Published runs a collector of src with cfg, publishing through the real
// publisher to a fresh in-process broker, for d; flushes what the publisher
// spooled; and returns what reached the samples topic with the collector's
// counts.
func Published(t *testing.T, cfg collector.Config, src collector.Source, d time.Duration) Run {
	t.Helper()
	_, addr := schematest.Broker(t, kfake.SeedTopics(1, schemas.TopicGPUSamples, schemas.TopicGPUEvents))
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	reg := prometheus.NewRegistry()
	pub, err := publish.New(publish.Config{Brokers: []string{addr}, SpoolDir: t.TempDir()}, logger, reg)
	if err != nil {
		t.Fatalf("publish.New() = %v", err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	c, err := collector.New(cfg, src, pub, logger, reg, nil)
	if err != nil {
		t.Fatalf("collector.New() = %v", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.Run(ctx) }()
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	if err := c.Run(runCtx); err != nil {
		t.Errorf("collector Run() = %v; want nil", err)
	}
	cancel()
	if err := <-pubDone; err != nil {
		t.Errorf("publisher Run() = %v", err)
	}
	// Anything spooled (a slow first write) goes out now.
	fctx, fcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer fcancel()
	if err := pub.Flush(fctx); err != nil {
		t.Fatalf("Flush() = %v", err)
	}
	return Run{
		Messages:  schematest.ReadPartition(t, addr, schemas.TopicGPUSamples, 0),
		Collected: counterSum(t, reg, "heliostat_collector_samples_total", nil),
		Published: counterSum(t, reg, "heliostat_collector_messages_total", map[string]string{"topic": schemas.TopicGPUSamples, "outcome": "published"}),
	}
}

// counterSum is the sum of the series of counter family name in reg whose
// labels include match.
func counterSum(t *testing.T, reg *prometheus.Registry, name string, match map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := make(map[string]string, len(m.GetLabel()))
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if matches(labels, match) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// matches reports whether labels holds every pair of match.
func matches(labels, match map[string]string) bool {
	for k, v := range match {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
