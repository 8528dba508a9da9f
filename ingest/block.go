package ingest

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/schemas"
)

// A block holds the rows of one table partition (one part key) to be written in
// one INSERT. ClickHouse writes such an INSERT as a single part, so its rows
// land entirely or not at all; its ingest_ledger rows follow in a part of
// their own (see ledger.go).
type block interface {
	table() string
	partKey() uint32
	rows() int
	// origin names the Kafka messages that contributed rows.
	origin() *origin
	insert(ctx context.Context, conn driver.Conn, db string) error
	// firstRow returns a WHERE condition, with its arguments, on the
	// table's identifying columns (a sample's cluster, host, GPU and time;
	// a job event's job, type and time, …) that holds for the block's
	// first row from the message at Kafka partition p, offset off; ok is
	// false when the block has no row from it. After a reset, it tells
	// that message's rows from the old log's at the same offset (landed).
	firstRow(p int32, off int64) (cond string, args []any, ok bool)
	reset()
}

// partExprs are the partition key expressions of the tables ingest writes,
// as in their DDL: the rows of a block have partExprs[table] = its part key.
var partExprs = map[string]string{
	"gpu_samples":     "toYYYYMMDD(ts)",
	"gpu_events":      "toYYYYMM(ts_received)",
	"job_events":      "toYYYYMM(event_ts)",
	"gpu_allocations": "toYYYYMM(alloc_start)",
}

// origin records which Kafka messages a block's rows came from: per Kafka
// partition, the first and last offset. A batch reads each partition in
// order, so every message between the two that has rows of the block's part
// key contributed them. The first span's first message is the block's
// witness: its ledger rows exist exactly when the INSERT landed whole.
type origin struct{ spans []span }

type span struct {
	partition   int32
	first, last int64
}

// note records that the message at partition p, offset off contributed rows.
func (o *origin) note(p int32, off int64) {
	for i := range o.spans {
		if s := &o.spans[i]; s.partition == p {
			s.first, s.last = min(s.first, off), max(s.last, off)
			return
		}
	}
	o.spans = append(o.spans, span{partition: p, first: off, last: off})
}

func (o *origin) reset() { o.spans = o.spans[:0] }

// dayKey returns toYYYYMMDD of a Unix-seconds UTC time without allocating.
func dayKey(sec int64) uint32 {
	days := sec / 86400
	if sec < 0 && sec%86400 != 0 {
		days--
	}
	y, m, d := civil(days)
	return uint32(y*10000 + m*100 + d)
}

// monthKey returns toYYYYMM of a Unix-seconds UTC time.
func monthKey(sec int64) uint32 { return dayKey(sec) / 100 }

// civil converts days since 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's days_from_civil inverse).
func civil(z int64) (y, m, d int64) {
	z += 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// floorDiv splits Unix milliseconds into seconds and the millisecond part.
func floorDiv(ms int64) (sec int64, rem uint16) {
	sec = ms / 1000
	r := ms % 1000
	if r < 0 {
		sec--
		r += 1000
	}
	return sec, uint16(r)
}

// sampleBlock is the columns of gpu_samples for one day.
type sampleBlock struct {
	key        uint32
	from       origin
	ts         []int64
	millis     []uint16
	cluster    []string
	host       []string
	gpuIndex   []uint16
	gpuUUID    []string
	migUUID    []string
	metrics    [schemas.NumMetrics]metricColumn
	kPartition []uint32
	kOffset    []uint64
}

func newSampleBlock(key uint32) *sampleBlock {
	b := &sampleBlock{key: key}
	for m := range b.metrics {
		b.metrics[m] = newMetricColumn(schemas.Metric(m))
	}
	return b
}

// sampleInsert is the INSERT with its explicit column list (18.16 needs one).
var sampleInsert = func() string {
	cols := []string{"ts", "ts_millis", "cluster", "host", "gpu_index", "gpu_uuid", "mig_uuid"}
	for m := schemas.Metric(0); m < schemas.NumMetrics; m++ {
		cols = append(cols, m.String())
	}
	cols = append(cols, "kafka_partition", "kafka_offset")
	return "INSERT INTO %s.gpu_samples (" + strings.Join(cols, ", ") + ")"
}()

func (b *sampleBlock) table() string   { return "gpu_samples" }
func (b *sampleBlock) partKey() uint32 { return b.key }
func (b *sampleBlock) rows() int       { return len(b.ts) }
func (b *sampleBlock) origin() *origin { return &b.from }

func (b *sampleBlock) firstRow(p int32, off int64) (string, []any, bool) {
	i := rowFrom(b.kPartition, b.kOffset, p, off)
	if i < 0 {
		return "", nil, false
	}
	return "cluster = ? AND host = ? AND gpu_uuid = ? AND mig_uuid = ? AND toUInt32(ts) = ? AND ts_millis = ?",
		[]any{b.cluster[i], b.host[i], b.gpuUUID[i], b.migUUID[i], uint32(b.ts[i]), b.millis[i]}, true
}

// rowFrom returns the index of the first row whose Kafka partition and
// offset are p and off, or -1.
func rowFrom(partitions []uint32, offsets []uint64, p int32, off int64) int {
	for i := range partitions {
		if partitions[i] == uint32(p) && offsets[i] == uint64(off) {
			return i
		}
	}
	return -1
}

// appendSample appends s with the metrics present marks (s.Present, less
// those stored as unknown).
func (b *sampleBlock) appendSample(batch *schemas.SampleBatch, s *schemas.Sample, present uint32, sec int64, ms uint16, p int32, off int64) {
	g := &batch.GPUs[s.GPU]
	b.ts = append(b.ts, sec)
	b.millis = append(b.millis, ms)
	b.cluster = append(b.cluster, batch.Cluster)
	b.host = append(b.host, batch.Host)
	b.gpuIndex = append(b.gpuIndex, uint16(g.Index))
	b.gpuUUID = append(b.gpuUUID, g.UUID)
	b.migUUID = append(b.migUUID, g.MIGUUID)
	for m := range b.metrics {
		b.metrics[m].add(s.Values[m], present&(1<<m) != 0)
	}
	b.kPartition = append(b.kPartition, uint32(p))
	b.kOffset = append(b.kOffset, uint64(off))
}

func (b *sampleBlock) insert(ctx context.Context, conn driver.Conn, db string) error {
	cols := []any{b.ts, b.millis, b.cluster, b.host, b.gpuIndex, b.gpuUUID, b.migUUID}
	for m := range b.metrics {
		cols = append(cols, b.metrics[m].column())
	}
	cols = append(cols, b.kPartition, b.kOffset)
	return insertColumns(ctx, conn, fmt.Sprintf(sampleInsert, db), "gpu_samples", len(b.ts), cols)
}

// insertColumns sends one INSERT whose columns are given whole, in the order of
// the query's column list.
func insertColumns(ctx context.Context, conn driver.Conn, query, table string, rows int, cols []any) error {
	batch, err := conn.PrepareBatch(ctx, query)
	if err != nil {
		return fmt.Errorf("prepare %s insert: %w", table, err)
	}
	defer batch.Abort()
	for i, c := range cols {
		if err := batch.Column(i).Append(c); err != nil {
			return fmt.Errorf("append %s column %d: %w", table, i, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("send %s block of %d rows: %w", table, rows, err)
	}
	return nil
}

func (b *sampleBlock) reset() {
	b.ts, b.millis = b.ts[:0], b.millis[:0]
	b.cluster, b.host = b.cluster[:0], b.host[:0]
	b.gpuIndex, b.gpuUUID, b.migUUID = b.gpuIndex[:0], b.gpuUUID[:0], b.migUUID[:0]
	for _, c := range b.metrics {
		c.reset()
	}
	b.kPartition, b.kOffset = b.kPartition[:0], b.kOffset[:0]
	b.from.reset()
}

// eventBlock is the columns of gpu_events for one month.
type eventBlock struct {
	key        uint32
	from       origin
	ts         []int64
	millis     []uint16
	cluster    []string
	host       []string
	gpuUUID    []string
	eventType  []string
	xid        []uint64
	kPartition []uint32
	kOffset    []uint64
}

func (b *eventBlock) table() string   { return "gpu_events" }
func (b *eventBlock) partKey() uint32 { return b.key }
func (b *eventBlock) rows() int       { return len(b.ts) }
func (b *eventBlock) origin() *origin { return &b.from }

func (b *eventBlock) firstRow(p int32, off int64) (string, []any, bool) {
	i := rowFrom(b.kPartition, b.kOffset, p, off)
	if i < 0 {
		return "", nil, false
	}
	return "cluster = ? AND host = ? AND gpu_uuid = ? AND event_type = ? AND xid = ? AND toUInt32(ts_received) = ? AND ts_millis = ?",
		[]any{b.cluster[i], b.host[i], b.gpuUUID[i], b.eventType[i], b.xid[i], uint32(b.ts[i]), b.millis[i]}, true
}

func (b *eventBlock) insert(ctx context.Context, conn driver.Conn, db string) error {
	return insertColumns(ctx, conn,
		"INSERT INTO "+db+".gpu_events (ts_received, ts_millis, cluster, host, gpu_uuid, event_type, xid, kafka_partition, kafka_offset)",
		"gpu_events", len(b.ts), []any{b.ts, b.millis, b.cluster, b.host, b.gpuUUID, b.eventType, b.xid, b.kPartition, b.kOffset})
}

func (b *eventBlock) reset() {
	b.ts, b.millis, b.cluster, b.host = b.ts[:0], b.millis[:0], b.cluster[:0], b.host[:0]
	b.gpuUUID, b.eventType, b.xid = b.gpuUUID[:0], b.eventType[:0], b.xid[:0]
	b.kPartition, b.kOffset = b.kPartition[:0], b.kOffset[:0]
	b.from.reset()
}

// partBlocks files a batch's rows into one block per part key, creating each
// block on first use. Handlers whose blocks are not pooled embed it for their
// blocks and reset methods.
type partBlocks[B block] struct {
	byKey  map[uint32]B
	active []block
	newB   func(key uint32) B
}

func newPartBlocks[B block](newB func(key uint32) B) partBlocks[B] {
	return partBlocks[B]{byKey: map[uint32]B{}, newB: newB}
}

// get returns the block for key.
func (p *partBlocks[B]) get(key uint32) B {
	b, ok := p.byKey[key]
	if !ok {
		b = p.newB(key)
		p.byKey[key] = b
		p.active = append(p.active, b)
	}
	return b
}

// blocks returns the blocks in order of part key.
// release does nothing: these handlers keep no pool of decoded messages.
func (p *partBlocks[B]) release(any) {}

func (p *partBlocks[B]) blocks() []block {
	sort.Slice(p.active, func(i, j int) bool { return p.active[i].partKey() < p.active[j].partKey() })
	return p.active
}

func (p *partBlocks[B]) reset() {
	clear(p.byKey)
	p.active = p.active[:0]
}
