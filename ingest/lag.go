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

// partLag is the consumer-lag series of one partition a generation reads
// (heliostat_ingest_consumer_lag_messages): the partition's log end less
// the offset its reader reads next. The reader sets it at each message;
// lagLoop refreshes it from the log end while the reader waits (ClickHouse
// down, the batch queue full), so that it does not freeze; stop deletes
// it when the reader ends, so that a partition handed to another replica
// is not counted twice. At shutdown it keeps its last value: the process
// is going away, and its last scrapes still show what it had left to read.
type partLag struct {
	topic     string
	partition int32
	vec       *prometheus.GaugeVec
	labels    []string
	mu        sync.Mutex
	next      int64 // the offset the reader reads next
	stopped   bool
}

func (in *Ingester) newPartLag(a assignment) *partLag {
	return &partLag{topic: a.h.topic(), partition: a.partition, next: a.offset,
		vec: in.m.lag, labels: []string{a.h.topic(), strconv.Itoa(int(a.partition))}}
}

// read records that the reader read up to next (exclusive) and that the
// log ended at end then.
func (l *partLag) read(next, end int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next = next
	l.set(end)
}

// refresh sets the lag from the log end alone.
func (l *partLag) refresh(end int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.set(end)
}

// set sets the series to end less l.next, unless stopped or the reader's
// position is not known yet. The caller holds l.mu.
func (l *partLag) set(end int64) {
	if !l.stopped && l.next >= 0 {
		l.vec.WithLabelValues(l.labels...).Set(float64(max(end-l.next, 0)))
	}
}

// stop ends the series: nothing sets it again, and unless keep it is
// deleted.
func (l *partLag) stop(keep bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if !keep {
		l.vec.DeleteLabelValues(l.labels...)
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
