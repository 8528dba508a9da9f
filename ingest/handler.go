package ingest

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/schemas"
)

// handler turns one topic's messages into rows of one table. decode runs on the
// partition readers' goroutines; the other methods run on the single batching
// goroutine.
type handler interface {
	topic() string
	table() string
	decode(value []byte) (any, error)
	// add files the rows of decoded message d into blocks by part key, leaving
	// out rows whose part key is in skip (already in ClickHouse), releases d,
	// and returns the rows added.
	add(d any, partition int32, offset int64, skip []uint32) int
	// release gives back decoded message d without filing it.
	release(d any)
	blocks() []block
	// flushExtra writes what is derived from the batch beyond the exactly-once
	// rows (e.g. GPU inventory); it is idempotent.
	flushExtra(ctx context.Context, conn driver.Conn, db string) error
	reset()
}

// sampleHandler handles TopicGPUSamples → gpu_samples (+ gpu_inventory).
type sampleHandler struct {
	pool   *sync.Pool
	unfit  func(column string) // counts a ratio stored as unknown; nil: not counted
	byKey  map[uint32]*sampleBlock
	spare  []*sampleBlock
	active []block
	inv    map[invKey]invRow
}

type invKey struct{ cluster, host, uuid, mig string }

type invRow struct {
	gpu      schemas.GPU
	lastSeen int64
}

func newSampleHandler(pool *sync.Pool, unfit func(column string)) *sampleHandler {
	return &sampleHandler{
		pool:  pool,
		unfit: unfit,
		byKey: map[uint32]*sampleBlock{},
		inv:   map[invKey]invRow{},
	}
}

func (h *sampleHandler) topic() string { return schemas.TopicGPUSamples }
func (h *sampleHandler) table() string { return "gpu_samples" }

func (h *sampleHandler) decode(value []byte) (any, error) {
	b := h.pool.Get().(*schemas.SampleBatch)
	if err := schemas.DecodeSampleBatch(value, b); err != nil {
		h.pool.Put(b)
		return nil, err
	}
	return b, nil
}

func (h *sampleHandler) block(key uint32) *sampleBlock {
	if b, ok := h.byKey[key]; ok {
		return b
	}
	var b *sampleBlock
	if n := len(h.spare); n > 0 {
		b, h.spare = h.spare[n-1], h.spare[:n-1]
		b.key = key
	} else {
		b = newSampleBlock(key)
	}
	h.byKey[key] = b
	h.active = append(h.active, b)
	return b
}

func (h *sampleHandler) add(d any, partition int32, offset int64, skip []uint32) int {
	batch := d.(*schemas.SampleBatch)
	defer h.pool.Put(batch)
	var (
		cur    *sampleBlock
		curKey uint32
		added  int
		maxSec int64
	)
	for i := range batch.Samples {
		s := &batch.Samples[i]
		sec, ms := floorDiv(s.TSMillis)
		if sec > maxSec {
			maxSec = sec
		}
		key := dayKey(sec)
		if len(skip) > 0 && slices.Contains(skip, key) {
			continue
		}
		if cur == nil || key != curKey {
			cur, curKey = h.block(key), key
			cur.from.note(partition, offset)
		}
		present := s.Present
		// A ratio that is NaN, infinite, negative or above 1 is no
		// measurement (the wire carries any float32 bits; a percentage
		// sent as is reads 50 for 0.5): stored as unknown and counted,
		// since one NaN would make every average over the GPU NaN, and
		// one 50 would make it meaningless.
		for q := present & ratioMetrics; q != 0; q &= q - 1 {
			m := schemas.Metric(bits.TrailingZeros32(q))
			if f := float64(math.Float32frombits(uint32(s.Values[m]))); !(f >= 0 && f <= 1+schemas.RatioSlack) {
				present &^= 1 << m
				if h.unfit != nil {
					h.unfit(m.String())
				}
			}
		}
		cur.appendSample(batch, s, present, sec, ms, partition, offset)
		added++
	}
	for _, g := range batch.GPUs {
		k := invKey{batch.Cluster, batch.Host, g.UUID, g.MIGUUID}
		if r, ok := h.inv[k]; !ok || r.lastSeen < maxSec || r.gpu != g {
			h.inv[k] = invRow{gpu: g, lastSeen: max(maxSec, r.lastSeen)}
		}
	}
	return added
}

// ratioMetrics has bit m set for each ratio (float) metric m.
var ratioMetrics = func() (mask uint32) {
	for m := range schemas.NumMetrics {
		if m.Info().Float {
			mask |= 1 << m
		}
	}
	return mask
}()

func (h *sampleHandler) release(d any) { h.pool.Put(d.(*schemas.SampleBatch)) }

func (h *sampleHandler) blocks() []block {
	sort.Slice(h.active, func(i, j int) bool { return h.active[i].partKey() < h.active[j].partKey() })
	return h.active
}

func (h *sampleHandler) flushExtra(ctx context.Context, conn driver.Conn, db string) error {
	if len(h.inv) == 0 {
		return nil
	}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".gpu_inventory (cluster, host, gpu_uuid, mig_uuid, gpu_index, pci_bus_id, minor_number, model, driver_version, gi_id, ci_id, mig_profile, last_seen)")
	if err != nil {
		return fmt.Errorf("prepare gpu_inventory insert: %w", err)
	}
	defer batch.Abort()
	for k, r := range h.inv {
		g := r.gpu
		if err := batch.Append(k.cluster, k.host, k.uuid, k.mig, uint16(g.Index), g.PCIBusID, g.Minor, g.Model, g.DriverVersion,
			g.GIID, g.CIID, g.MIGProfile, time.Unix(r.lastSeen, 0)); err != nil {
			return fmt.Errorf("append gpu_inventory row: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("send gpu_inventory rows: %w", err)
	}
	return nil
}

// maxSpareBlocks is how many emptied gpu_samples blocks a handler keeps for
// the next flush. Live samples need one or two (today's, and yesterday's
// late ones around midnight); without a bound, a backlog spread over many
// days would leave a spare block per day, each as large as its largest
// flush, for the life of the process.
const maxSpareBlocks = 2

func (h *sampleHandler) reset() {
	for _, b := range h.byKey {
		if len(h.spare) < maxSpareBlocks {
			b.reset()
			h.spare = append(h.spare, b)
		}
	}
	clear(h.byKey)
	h.active = h.active[:0]
	clear(h.inv)
}

// eventHandler handles TopicGPUEvents → gpu_events.
type eventHandler struct {
	partBlocks[*eventBlock]
}

func newEventHandler() *eventHandler {
	return &eventHandler{newPartBlocks(func(key uint32) *eventBlock { return &eventBlock{key: key} })}
}

func (h *eventHandler) topic() string { return schemas.TopicGPUEvents }
func (h *eventHandler) table() string { return "gpu_events" }

func (h *eventHandler) decode(value []byte) (any, error) {
	b := new(schemas.EventBatch)
	if err := schemas.DecodeEventBatch(value, b); err != nil {
		return nil, err
	}
	return b, nil
}

func (h *eventHandler) add(d any, partition int32, offset int64, skip []uint32) int {
	batch := d.(*schemas.EventBatch)
	added := 0
	for _, e := range batch.Events {
		sec, ms := floorDiv(e.TSMillis)
		key := monthKey(sec)
		if slices.Contains(skip, key) {
			continue
		}
		b := h.get(key)
		b.from.note(partition, offset)
		b.ts = append(b.ts, sec)
		b.millis = append(b.millis, ms)
		b.cluster = append(b.cluster, batch.Cluster)
		b.host = append(b.host, batch.Host)
		b.gpuUUID = append(b.gpuUUID, e.GPUUUID)
		b.eventType = append(b.eventType, e.Type.String())
		b.xid = append(b.xid, e.XID)
		b.kPartition = append(b.kPartition, uint32(partition))
		b.kOffset = append(b.kOffset, uint64(offset))
		added++
	}
	return added
}

func (h *eventHandler) flushExtra(context.Context, driver.Conn, string) error { return nil }
