package ingest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// BenchmarkRecover measures what a partition assignment costs before ingest
// reads: recover for 128 partitions of one topic, each holding one message
// that its stored head names (so the head is fetched and checked). ClickHouse
// is reached directly ("loopback") or through a proxy that holds every chunk
// 0.5 ms each way ("rtt-1ms"), as across a network; most of the cost is
// round trips, a few per partition. It reports ms/partition.
func BenchmarkRecover(b *testing.B) {
	const partitions = 128
	_, broker := schematest.Broker(b, kfake.SeedTopics(partitions, schemas.TopicGPUSamples))
	ch, _ := schematest.Database(b)
	ctx := context.Background()
	day := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	v, err := schemas.AppendSampleBatch(nil, sampleBatchOf(day, "h"))
	if err != nil {
		b.Fatal(err)
	}
	heads := map[headKey]head{}
	for p := range partitions {
		w := &kafka.Writer{Addr: kafka.TCP(broker), Topic: schemas.TopicGPUSamples, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
			Balancer: kafka.BalancerFunc(func(kafka.Message, ...int) int { return p })}
		err := w.WriteMessages(ctx, kafka.Message{Key: []byte("h"), Value: v})
		w.Close()
		if err != nil {
			b.Fatal(err)
		}
		heads[headKey{schemas.TopicGPUSamples, int32(p)}] = head{offset: 0, key: []byte("h"), value: v}
	}
	for _, c := range []struct {
		name  string
		delay time.Duration
	}{{"loopback", 0}, {"rtt-1ms", 500 * time.Microsecond}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := ch
			if c.delay > 0 {
				cfg.Addr = delayProxy(b, ch.Addr, c.delay)
			}
			conn, err := cfg.Open(ctx, func(string) string { return "" })
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { conn.Close() })
			in, err := New(Config{Brokers: []string{broker}, ClickHouse: cfg}, conn, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			if err := in.writeHeads(ctx, heads); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				as := make([]assignment, partitions)
				for p := range as {
					as[p] = assignment{h: in.byTopic[schemas.TopicGPUSamples], partition: int32(p)}
				}
				if _, _, ok := in.recover(ctx, as); !ok {
					b.Fatal("recover did not finish")
				}
				for _, a := range as {
					if a.rewound {
						b.Fatalf("partition %d found rewound", a.partition)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N*partitions), "ms/partition")
		})
	}
}

// delayProxy forwards TCP connections to target, holding each chunk read
// for delay before writing it on. It returns its address.
func delayProxy(tb testing.TB, target string, delay time.Duration) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	tb.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		defer dst.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				time.Sleep(delay)
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				if err != io.EOF {
					src.Close()
				}
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go pipe(s, c)
			go pipe(c, s)
		}
	}()
	return ln.Addr().String()
}
