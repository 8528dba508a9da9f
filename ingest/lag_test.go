package ingest_test

import (
	"context"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

const lagMetric = "heliostat_ingest_consumer_lag_messages"

// sampleLags returns the lag series of the samples topic in reg, by their
// label values.
func sampleLags(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for k, v := range gather(t, reg, lagMetric) {
		if strings.Contains(k, schemas.TopicGPUSamples) {
			out[k] = v
		}
	}
	return out
}

// TestLagSeriesFollowAssignment: after a second replica joins, each replica
// exports lag only for the partitions it owns, so that summing over the
// replicas counts each partition once. A replica that stops keeps its
// series.
func TestLagSeriesFollowAssignment(t *testing.T) {
	ch, conn := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(context.Background(), []string{broker}, 4, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	want := produceSamples(t, broker, 200, 8, 8, 10, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	doneA := startIngest(t, ctx, broker, ch, regA)
	waitCount(t, conn, ch.Database+".gpu_samples", uint64(want), 60*time.Second)
	if n := len(sampleLags(t, regA)); n != 4 {
		t.Fatalf("replica A alone exports %d lag series; want 4 (the samples topic's partitions)", n)
	}
	total := metricSum(t, regA, "heliostat_ingest_assigned_partitions") // all of them
	doneB := startIngest(t, ctx, broker, ch, regB)
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, b := metricSum(t, regA, "heliostat_ingest_assigned_partitions"), metricSum(t, regB, "heliostat_ingest_assigned_partitions")
		if a > 0 && b > 0 && a+b == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("assigned partitions A %v, B %v; want both some, %v in all", a, b, total)
		}
		time.Sleep(50 * time.Millisecond)
	}
	want += produceSamples(t, broker, 200, 8, 8, 10, time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	waitCount(t, conn, ch.Database+".gpu_samples", uint64(want), 60*time.Second)
	lagA, lagB := sampleLags(t, regA), sampleLags(t, regB)
	for k := range lagA {
		if _, ok := lagB[k]; ok {
			t.Errorf("both replicas export the lag of %s; A: %v, B: %v", k, lagA, lagB)
		}
	}
	if len(lagA)+len(lagB) != 4 {
		t.Errorf("the replicas export %d and %d lag series; want 4 in all", len(lagA), len(lagB))
	}
	cancel()
	<-doneA
	<-doneB
	// Stopping is not the partitions moving away: the series stay, for
	// the process's last scrapes.
	if after := sampleLags(t, regA); !maps.Equal(after, lagA) {
		t.Errorf("after Run returned, A exports the lag series %v; want those it had, %v", after, lagA)
	}
}

// TestLagWhileClickHouseFails: while inserts fail, the readers wait on the
// full batch queue and read nothing, but the lag still grows with what is
// written to the partition.
func TestLagWhileClickHouseFails(t *testing.T) {
	ch, _ := schematest.Database(t)
	_, broker := schematest.Broker(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err := ingest.EnsureTopics(context.Background(), []string{broker}, 1, schemas.DataTopics()...); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// 80 rows a message, two messages a batch: the two batches and the
	// queue of 256 messages fill long before the reader reaches the end.
	produced := time.Now()
	produceSamples(t, broker, 1000, 4, 8, 10, start)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := prometheus.NewRegistry()
	var refuse atomic.Bool
	refuse.Store(true)
	done := startIngestConn(t, ctx, broker, ch, reg, func(c *ingest.Config) {
		c.BatchRows, c.LogCheck = 100, 200*time.Millisecond
	}, refusing(&refuse))
	// The reader stops where the queue is full: the lag settles (before
	// the reader's first message, the lag refreshed from the log end is
	// constant too; a refused insert says that reading began).
	lag := func() float64 { return metricSum(t, reg, lagMetric, "topic", schemas.TopicGPUSamples) }
	tried := func() float64 { return metricSum(t, reg, "heliostat_ingest_errors_total", "kind", "insert") }
	deadline := time.Now().Add(30 * time.Second)
	var settled float64
	for same := 0; same < 10; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the lag did not settle within 30s: %v, %v inserts refused", lag(), tried())
		}
		if l := lag(); l > 0 && tried() > 0 && l == settled {
			same++
		} else {
			settled, same = l, 0
		}
	}
	produceSamples(t, broker, 500, 4, 8, 10, start.Add(time.Hour))
	deadline = time.Now().Add(30 * time.Second)
	for lag() != settled+500 {
		if time.Now().After(deadline) {
			t.Fatalf("lag = %v after 500 more messages while the reader waits; want %v", lag(), settled+500)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The oldest message not read was written after the first backlog
	// began and is still waiting: the age grows with the wall clock, by
	// the refreshes from the log end, and never exceeds the time since
	// the backlog was written.
	age := func() float64 {
		return metricSum(t, reg, "heliostat_ingest_consumer_lag_seconds", "topic", schemas.TopicGPUSamples)
	}
	a1 := age()
	if a1 <= 0 {
		t.Fatalf("lag age %v s while the reader waits behind a backlog; want > 0", a1)
	}
	deadline = time.Now().Add(10 * time.Second)
	for age() < a1+0.5 { // the refreshes every LogCheck (200 ms)
		if time.Now().After(deadline) {
			t.Fatalf("lag age stayed at %v s for 10 s while the reader waits; want it growing", age())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a2, bound := age(), time.Since(produced).Seconds(); a2 > bound {
		t.Errorf("lag age %v s; want at most the %v s since the backlog was written", a2, bound)
	}
	refuse.Store(false)
	cancel()
	<-done
}
