package ingest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// partLag is the consumer-lag series of one partition a generation reads:
// heliostat_ingest_consumer_lag_messages, the partition's log end less the
// offset its reader reads next, and heliostat_ingest_consumer_lag_seconds,
// how old the oldest message not read yet can be. The reader sets them at
// each message; lagLoop refreshes them from the log end while the reader
// waits (ClickHouse down, the batch queue full), so that they do not
// freeze; stop deletes them when the reader ends, so that a partition
// handed to another replica is not counted twice. At shutdown they keep
// their last values: the process is going away, and its last scrapes
// still show what it had left to read.
//
// The seconds are an upper bound, the tighter of two: every message not
// read yet came after the last one read (its broker timestamp) and after
// the last time a check of the log end found the reader there (lagLoop's;
// the high watermark a message was fetched with can be long out of date
// when the reader waited before taking it from kafka-go's queue, so it
// does not count). Retention deletes the oldest messages first, so the
// bound reaching a topic's retention (heliostat_ingest_topic_retention_seconds)
// is the warning that messages are about to be lost; being an upper
// bound, it warns early, never late. The first bound alone would not do:
// on a quiet topic the last message read can be hours old when a new one
// arrives, and the second keeps that from reading as hours of lag. Until
// the reader has read a message or been found at the log end, the age is
// unknown and the series absent.
type partLag struct {
	topic     string
	partition int32
	vec, age  *prometheus.GaugeVec
	labels    []string
	// msgs and ages are the partition's series of vec and age, once set.
	msgs, ages prometheus.Gauge
	now        func() time.Time
	mu         sync.Mutex
	next       int64     // the offset the reader reads next
	lastTime   time.Time // broker timestamp of the last message read; zero when none or unknown
	caughtUp   time.Time // when a check of the log end last found the reader there; zero when never
	stopped    bool
}

func (in *Ingester) newPartLag(a assignment) *partLag {
	return &partLag{topic: a.h.topic(), partition: a.partition, next: a.offset,
		vec: in.m.lag, age: in.m.lagAge, labels: []string{a.h.topic(), strconv.Itoa(int(a.partition))}, now: time.Now}
}

// read records that the reader read up to next (exclusive), a message the
// broker stamped at, and that the log ended at end then. A zero at (a
// message without a timestamp) leaves the last known one.
func (l *partLag) read(next, end int64, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next = next
	if !at.IsZero() {
		l.lastTime = at
	}
	l.set(end, false)
}

// refresh sets the lag from the log end alone, end just listed.
func (l *partLag) refresh(end int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.set(end, true)
}

// set sets the series from end and l's position, unless stopped or the
// reader's position is not known yet; fresh says that end was just listed
// (else it came with a message, and may be out of date). The caller holds
// l.mu.
func (l *partLag) set(end int64, fresh bool) {
	if l.stopped || l.next < 0 {
		return
	}
	if l.msgs == nil {
		l.msgs = l.vec.WithLabelValues(l.labels...)
	}
	behind := max(end-l.next, 0)
	l.msgs.Set(float64(behind))
	now := l.now()
	if fresh && behind == 0 {
		l.caughtUp = now
	}
	since := l.lastTime
	if l.caughtUp.After(since) {
		since = l.caughtUp
	}
	if since.IsZero() {
		return // nothing known yet
	}
	if l.ages == nil {
		l.ages = l.age.WithLabelValues(l.labels...)
	}
	// A producer's clock ahead of ingest's would make it negative.
	l.ages.Set(max(now.Sub(since).Seconds(), 0))
}

// stop ends the series: nothing sets it again, and unless keep it is
// deleted.
func (l *partLag) stop(keep bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if !keep {
		l.vec.DeleteLabelValues(l.labels...)
		l.age.DeleteLabelValues(l.labels...)
	}
}

// lagLoop refreshes lags from their partitions' log ends every
// Config.LogCheck until ctx ends, with one request for all of them.
func (in *Ingester) lagLoop(ctx context.Context, lags []*partLag) {
	if len(lags) == 0 {
		return
	}
	t := time.NewTicker(in.cfg.LogCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ends, err := logEnds(ctx, in.kafkaClient(), lags)
		if err != nil {
			// The readers report failing fetches; the lag waits for
			// the next tick.
			continue
		}
		for _, l := range lags {
			if end, ok := ends[l.topic][int(l.partition)]; ok {
				l.refresh(end)
			}
		}
	}
}

// logEnds returns the log end of each of lags' partitions, by topic and
// partition; a partition the brokers did not answer for is left out.
func logEnds(ctx context.Context, c *kafka.Client, lags []*partLag) (map[string]map[int]int64, error) {
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for _, l := range lags {
		req.Topics[l.topic] = append(req.Topics[l.topic], kafka.LastOffsetOf(int(l.partition)))
	}
	resp, err := c.ListOffsets(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("list the log ends of %d partitions: %w", len(lags), err)
	}
	ends := map[string]map[int]int64{}
	for topic, ps := range resp.Topics {
		for _, po := range ps {
			if po.Error != nil {
				continue
			}
			if ends[topic] == nil {
				ends[topic] = map[int]int64{}
			}
			ends[topic][po.Partition] = max(po.LastOffset, 0)
		}
	}
	return ends, nil
}
