package collector_test

import (
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/collector/collectortest"
	"github.com/heliostat-dev/heliostat/collector/synthetic"
	"github.com/heliostat-dev/heliostat/schemas"
)

// TestKafka runs the collector with the synthetic source and the real
// publisher against an in-process Kafka-protocol broker, and checks that
// every sample collected arrived.
func TestKafka(t *testing.T) {
	const cluster, host = "test-cluster", "node-7"
	cfg := collector.Config{Cluster: cluster, Host: host, Interval: 100 * time.Millisecond, PublishInterval: 500 * time.Millisecond}
	run := collectortest.Published(t, cfg, synthetic.New(host, 8, 1), 1500*time.Millisecond)
	// The tick count depends on how fast the broker answers; only
	// agreement with the topic is exact.
	if run.Collected == 0 || int(run.Collected)%8 != 0 {
		t.Fatalf("samples metric = %v; want a positive multiple of 8 GPUs", run.Collected)
	}
	if got, want := len(run.Messages), int(run.Published); got != want {
		t.Errorf("%d messages on %s; want %d, the published messages metric", got, schemas.TopicGPUSamples, want)
	}
	samples := 0
	var b schemas.SampleBatch
	for _, m := range run.Messages {
		if err := schemas.DecodeSampleBatch(m.Value, &b); err != nil {
			t.Fatalf("DecodeSampleBatch(offset %d) = %v", m.Offset, err)
		}
		if string(m.Key) != host || b.Host != host || b.Cluster != cluster || len(b.GPUs) != 8 {
			t.Errorf("offset %d: key %q, host %q, cluster %q, %d GPUs; want %q, %q, %q, 8",
				m.Offset, m.Key, b.Host, b.Cluster, len(b.GPUs), host, host, cluster)
		}
		samples += len(b.Samples)
	}
	if samples != int(run.Collected) {
		t.Errorf("%d samples on %s; want %v, the samples metric", samples, schemas.TopicGPUSamples, run.Collected)
	}
}
