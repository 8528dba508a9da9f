package ingest

import (
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/internal/logthrottle"
	"github.com/heliostat-dev/heliostat/schemas"
)

// BenchmarkAddItem measures the batcher's per-message work (addItem) on
// numbered messages: an 80-sample message, and a one-event job event batch.
// It covers the sequence check and the per-batch counting (counts) that
// every message goes through before its batch is flushed.
func BenchmarkAddItem(b *testing.B) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	in := &Ingester{m: m, logger: slog.New(slog.DiscardHandler), warn: logthrottle.Throttle{Every: 10 * time.Second},
		samplePool: &sync.Pool{New: func() any { return new(schemas.SampleBatch) }}}
	samples, _ := benchSampleMessage(b)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	jobs, err := schemas.AppendJobEventBatch(nil, &schemas.JobEventBatch{Cluster: "c", Source: schemas.SourceSlurm, Events: []schemas.JobEvent{{
		JobID: "1", Type: schemas.JobSubmit, State: schemas.StatePending, ArrayTaskID: schemas.Unknown, ExitCode: schemas.Unknown,
		MemReqBytes: schemas.Unknown, EventMillis: t0.UnixMilli(), SubmitMillis: t0.UnixMilli(), NodeCount: 1, CPUs: 1, GPUs: 1}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		topic string
		value []byte
	}{{"samples", schemas.TopicGPUSamples, samples}, {"jobevents", schemas.TopicJobEvents, jobs}} {
		b.Run(tc.name, func(b *testing.B) {
			bt := in.newBatch()
			h := bt.byTopic[tc.topic]
			seqs := newSequences()
			hdr := []kafka.Header{{Key: schemas.HeaderProducer, Value: []byte("p1")}, {Key: schemas.HeaderSequence}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				d, err := h.decode(tc.value)
				if err != nil {
					b.Fatal(err)
				}
				hdr[1].Value = strconv.AppendInt(hdr[1].Value[:0], int64(i+1), 10)
				it := item{h: h, partition: 0, offset: int64(i), data: d, key: "k", at: t0}
				it.seq, it.seqErr = sequenceOf(hdr)
				in.addItem(bt, it, seqs)
				if bt.rows >= 200_000 || bt.msgs >= 10_000 {
					bt.reset()
				}
			}
		})
	}
}
