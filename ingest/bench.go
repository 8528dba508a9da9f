package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/collector/synthetic"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/migrate"
)

// BenchConfig configures Bench.
type BenchConfig struct {
	// Brokers is a broker whose sample topic is empty (Bench reads it from the
	// start). `heliostat bench ingest` starts a fresh in-process one.
	Brokers []string
	// ClickHouse is the server; Bench creates <Database>_bench and
	// <Database>_bench_raw and drops them afterwards.
	ClickHouse chconn.Config
	// Rows is the number of GPU samples. Default 2,000,000.
	Rows int
	// Hosts, GPUsPerHost and TicksPerMessage shape the messages. Defaults 64,
	// 8 and 10 (80 samples a message, as a collector at 500ms publishing every
	// 5s would send).
	Hosts, GPUsPerHost, TicksPerMessage int
	// BatchRows is ingest's batch size, also used for the direct inserts.
	// Default: ingest's default.
	BatchRows int
	// ServerPID is the ClickHouse server's process id when it runs on this
	// machine; its CPU time is then reported. 0 when unknown.
	ServerPID int
	// Progress receives human-readable progress lines; nil discards them.
	Progress io.Writer
}

// BenchResult is what `heliostat bench ingest --json` prints.
type BenchResult struct {
	Rows           int     `json:"rows"`
	Messages       int     `json:"messages"`
	RowsPerMessage int     `json:"rows_per_message"`
	BatchRows      int     `json:"batch_rows"`
	RowsPerS       float64 `json:"rows_per_s"`
	RawRowsPerS    float64 `json:"raw_rows_per_s"`
	Ratio          float64 `json:"ratio"`
	IngestSeconds  float64 `json:"ingest_s"`
	StartupSeconds float64 `json:"startup_s"`
	RawSeconds     float64 `json:"raw_s"`
	ProduceRowsPS  float64 `json:"produce_rows_per_s"`
	// CPU seconds spent during the timed phases, by this process (broker,
	// consumer, encoder: everything in heliostat) and by the ClickHouse
	// server (0 when it is not local).
	IngestCPUHeliostat  float64 `json:"ingest_cpu_s_heliostat"`
	IngestCPUClickHouse float64 `json:"ingest_cpu_s_clickhouse"`
	RawCPUHeliostat     float64 `json:"raw_cpu_s_heliostat"`
	RawCPUClickHouse    float64 `json:"raw_cpu_s_clickhouse"`
	Cores               int     `json:"cores"`
	ClickHouse          string  `json:"clickhouse_version"`
}

// Bench produces cfg.Rows synthetic samples to the broker, ingests them into a
// fresh database and times it from partition assignment to the last row
// committed (rows_per_s; the consumer-group join is startup_s). Then it inserts
// the same rows straight into a second fresh database with native batches of
// the same size (raw_rows_per_s). Both databases carry the full schema, the
// rollup and ledger views included, so both sides pay for them.
func Bench(ctx context.Context, cfg BenchConfig, logger *slog.Logger) (BenchResult, error) {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.Rows, 2_000_000)
	def(&cfg.Hosts, 64)
	def(&cfg.GPUsPerHost, 8)
	def(&cfg.TicksPerMessage, 10)
	def(&cfg.BatchRows, 200_000)
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	res := BenchResult{Rows: cfg.Rows, BatchRows: cfg.BatchRows, RowsPerMessage: cfg.GPUsPerHost * cfg.TicksPerMessage, Cores: runtime.NumCPU()}

	base := cfg.ClickHouse.Database
	e2eCfg, rawCfg := cfg.ClickHouse, cfg.ClickHouse
	e2eCfg.Database, rawCfg.Database = base+"_bench", base+"_bench_raw"
	noenv := func(string) string { return "" }
	conn, err := e2eCfg.Open(ctx, noenv)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&res.ClickHouse); err != nil {
		return res, fmt.Errorf("bench: server version: %w", err)
	}
	for _, db := range []string{e2eCfg.Database, rawCfg.Database} {
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			return res, fmt.Errorf("bench: reset %s: %w", db, err)
		}
		if _, err := migrate.Apply(ctx, conn, db, logger); err != nil {
			return res, err
		}
		defer conn.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+db)
	}

	msgs, err := benchMessages(cfg)
	if err != nil {
		return res, err
	}
	res.Messages = len(msgs)
	fmt.Fprintf(progress, "producing %d samples in %d messages of %d…\n", cfg.Rows, len(msgs), res.RowsPerMessage)
	if err := EnsureTopics(ctx, cfg.Brokers, 4, schemas.DataTopics()...); err != nil {
		return res, err
	}
	start := time.Now()
	if err := benchProduce(ctx, cfg.Brokers, msgs); err != nil {
		return res, err
	}
	res.ProduceRowsPS = float64(cfg.Rows) / time.Since(start).Seconds()

	fmt.Fprintf(progress, "ingesting broker → ClickHouse (batches of %d rows)…\n", cfg.BatchRows)
	clock := cpuClock{pid: cfg.ServerPID}
	self0, srv0 := clock.self(), clock.other()
	ingestS, startupS, err := benchIngest(ctx, cfg, e2eCfg, logger)
	res.IngestCPUHeliostat, res.IngestCPUClickHouse = (clock.self() - self0).Seconds(), (clock.other() - srv0).Seconds()
	if err != nil {
		return res, err
	}
	res.IngestSeconds, res.StartupSeconds = ingestS, startupS
	res.RowsPerS = float64(cfg.Rows) / ingestS
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+e2eCfg.Database+".gpu_samples").Scan(&n); err != nil {
		return res, fmt.Errorf("bench: count: %w", err)
	}
	if n != uint64(cfg.Rows) {
		return res, fmt.Errorf("bench: ClickHouse holds %d rows after ingest; want %d", n, cfg.Rows)
	}

	fmt.Fprintln(progress, "inserting the same rows straight into ClickHouse…")
	self0, srv0 = clock.self(), clock.other()
	rawS, err := benchRaw(ctx, conn, rawCfg.Database, msgs, cfg.BatchRows)
	res.RawCPUHeliostat, res.RawCPUClickHouse = (clock.self() - self0).Seconds(), (clock.other() - srv0).Seconds()
	if err != nil {
		return res, err
	}
	res.RawSeconds = rawS
	res.RawRowsPerS = float64(cfg.Rows) / rawS
	res.Ratio = res.RowsPerS / res.RawRowsPerS
	return res, nil
}

// benchMessages encodes cfg.Rows samples from synthetic hosts, 5s apart per
// tick, ending now.
func benchMessages(cfg BenchConfig) ([]kafka.Message, error) {
	perMsg := cfg.GPUsPerHost * cfg.TicksPerMessage
	nMsgs := (cfg.Rows + perMsg - 1) / perMsg
	srcs := make([]*synthetic.Source, cfg.Hosts)
	for h := range srcs {
		srcs[h] = synthetic.New(fmt.Sprintf("gpu-node-%03d", h), cfg.GPUsPerHost, uint64(h))
	}
	ticks := (nMsgs + cfg.Hosts - 1) / cfg.Hosts * cfg.TicksPerMessage
	t0 := time.Now().Add(-time.Duration(ticks) * 5 * time.Second).Truncate(time.Second)
	msgs := make([]kafka.Message, 0, nMsgs)
	produced := 0
	var b schemas.SampleBatch
	for i := 0; i < nMsgs; i++ {
		h := i % cfg.Hosts
		round := i / cfg.Hosts
		b.Reset()
		b.Cluster, b.Host = "bench", fmt.Sprintf("gpu-node-%03d", h)
		for k := 0; k < cfg.TicksPerMessage && produced < cfg.Rows; k++ {
			now := t0.Add(time.Duration(round*cfg.TicksPerMessage+k) * 5 * time.Second)
			before := len(b.Samples)
			if err := srcs[h].Collect(context.Background(), now, &b); err != nil {
				return nil, err
			}
			if added := len(b.Samples) - before; produced+added > cfg.Rows {
				b.Samples = b.Samples[:before+cfg.Rows-produced]
			}
			produced += len(b.Samples) - before
		}
		v, err := schemas.AppendSampleBatch(nil, &b)
		if err != nil {
			return nil, err
		}
		// Numbered as the collector's publisher numbers its messages, so
		// the run pays for the sequence marks as a deployment does.
		seq := schemas.Sequence{Producer: "bench", Seq: uint64(round + 1)}
		msgs = append(msgs, kafka.Message{Key: []byte(b.Host), Value: v, Headers: []kafka.Header{
			{Key: schemas.HeaderProducer, Value: []byte(seq.Producer)}, {Key: schemas.HeaderSequence, Value: seq.FormatSeq()}}})
	}
	return msgs, nil
}

func benchProduce(ctx context.Context, brokers []string, msgs []kafka.Message) error {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: schemas.TopicGPUSamples, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchSize: 1000, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	for i := 0; i < len(msgs); i += 5000 {
		if err := w.WriteMessages(ctx, msgs[i:min(i+5000, len(msgs))]...); err != nil {
			var we kafka.WriteErrors
			if errors.As(err, &we) {
				for _, e := range we {
					if e != nil {
						return fmt.Errorf("bench: produce: %d of %d messages failed, first: %w", we.Count(), len(we), e)
					}
				}
			}
			return fmt.Errorf("bench: produce: %w", err)
		}
	}
	return nil
}

func benchIngest(ctx context.Context, cfg BenchConfig, ch chconn.Config, logger *slog.Logger) (ingestS, startupS float64, err error) {
	conn, err := ch.Open(ctx, func(string) string { return "" })
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	in, err := New(Config{Brokers: cfg.Brokers, Group: fmt.Sprintf("heliostat-bench-%d", time.Now().UnixNano()), ClickHouse: ch,
		BatchRows: cfg.BatchRows, BatchInterval: 200 * time.Millisecond, DedupeWindow: DefaultDedupeWindow}, conn, logger, prometheus.NewRegistry())
	if err != nil {
		return 0, 0, err
	}
	assigned := make(chan time.Time, 1)
	in.onAssigned = func() {
		select {
		case assigned <- time.Now():
		default:
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- in.Run(rctx) }()
	var start time.Time
	select {
	case start = <-assigned:
	case err := <-done:
		return 0, 0, fmt.Errorf("bench: ingest stopped before it got partitions: %v", err)
	case <-time.After(2 * time.Minute):
		return 0, 0, errors.New("bench: no partitions assigned within 2 minutes")
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	rows := in.m.rows.WithLabelValues("gpu_samples")
	deadline := time.Now().Add(15 * time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for counterValue(rows) < float64(cfg.Rows) {
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("bench: only %.0f of %d rows after 15 minutes", counterValue(rows), cfg.Rows)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case err := <-done:
			return 0, 0, fmt.Errorf("bench: ingest stopped after %.0f of %d rows: %v", counterValue(rows), cfg.Rows, err)
		}
	}
	end := time.Now()
	cancel()
	<-done
	return end.Sub(start).Seconds(), start.Sub(t0).Seconds(), nil
}

func benchRaw(ctx context.Context, conn driver.Conn, db string, msgs []kafka.Message, batchRows int) (float64, error) {
	h := newSampleHandler(&sync.Pool{New: func() any { return new(schemas.SampleBatch) }}, nil)
	var timed time.Duration
	flush := func() error {
		for _, blk := range h.blocks() {
			start := time.Now()
			if err := blk.insert(ctx, conn, db); err != nil {
				return fmt.Errorf("bench: raw insert: %w", err)
			}
			timed += time.Since(start)
		}
		h.reset()
		return nil
	}
	rows := 0
	for i, m := range msgs {
		d, err := h.decode(m.Value)
		if err != nil {
			return 0, err
		}
		rows += h.add(d, 0, int64(i), nil)
		if rows >= batchRows {
			if err := flush(); err != nil {
				return 0, err
			}
			rows = 0
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	return timed.Seconds(), nil
}
