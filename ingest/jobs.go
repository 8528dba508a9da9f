package ingest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/schemas"
)

// ErrUnfitValue is InsertJobEvents' error for an event holding a known value
// too large for its column of job_events.
var ErrUnfitValue = errors.New("ingest: value too large for its column, which would store it as unknown")

// directPartition is the kafka_partition recorded for rows written straight into
// ClickHouse (InsertJobEvents) rather than consumed from Kafka. No Kafka topic
// has that many partitions, so their ledger rows never make a consumer skip a
// real message.
const directPartition = math.MaxUint32

// jobEventHandler handles TopicJobEvents → job_events (and, through a
// materialized view, jobs).
type jobEventHandler struct {
	partBlocks[*jobEventBlock]
	unfit func(column string) // counts a known value its column cannot hold; nil: not counted
}

func newJobEventHandler(unfit func(column string)) *jobEventHandler {
	return &jobEventHandler{partBlocks: newPartBlocks(newJobEventBlock), unfit: unfit}
}

func newJobEventBlock(key uint32) *jobEventBlock { return &jobEventBlock{key: key} }

func (h *jobEventHandler) topic() string { return schemas.TopicJobEvents }
func (h *jobEventHandler) table() string { return "job_events" }

func (h *jobEventHandler) decode(value []byte) (any, error) {
	b := new(schemas.JobEventBatch)
	if err := schemas.DecodeJobEventBatch(value, b); err != nil {
		return nil, err
	}
	return b, nil
}

func (h *jobEventHandler) add(d any, partition int32, offset int64, skip []uint32) int {
	batch := d.(*schemas.JobEventBatch)
	added := 0
	for i := range batch.Events {
		e := &batch.Events[i]
		sec, _ := floorDiv(e.EventMillis)
		key := monthKey(sec)
		if slices.Contains(skip, key) {
			continue
		}
		b := h.get(key)
		b.from.note(partition, offset)
		b.add(batch.Cluster, batch.Source, e, uint32(partition), uint64(offset))
		if h.unfit != nil {
			for _, c := range unfitColumns(e) {
				h.unfit(c)
			}
		}
		added++
	}
	return added
}

func (h *jobEventHandler) flushExtra(context.Context, driver.Conn, string) error { return nil }

// jobEventBlock is the rows of job_events for one month. Job events are few
// (thousands per second at most), so rows are kept as structs and turned into
// columns at insert time.
type jobEventBlock struct {
	key  uint32
	from origin
	rs   []jobEventRow
}

type jobEventRow struct {
	cluster   string
	source    schemas.JobSource
	e         schemas.JobEvent
	partition uint32
	offset    uint64
}

func (b *jobEventBlock) table() string   { return "job_events" }
func (b *jobEventBlock) partKey() uint32 { return b.key }
func (b *jobEventBlock) rows() int       { return len(b.rs) }
func (b *jobEventBlock) origin() *origin { return &b.from }

func (b *jobEventBlock) firstRow(p int32, off int64) (string, []any, bool) {
	for i := range b.rs {
		if r := &b.rs[i]; r.partition == uint32(p) && r.offset == uint64(off) {
			sec, ms := floorDiv(r.e.EventMillis)
			return "cluster = ? AND job_id = ? AND event_type = ? AND source = ? AND toUInt32(event_ts) = ? AND event_ms = ?",
				[]any{r.cluster, r.e.JobID, r.e.Type.String(), r.source.String(), uint32(sec), ms}, true
		}
	}
	return "", nil, false
}
func (b *jobEventBlock) reset() {
	b.rs = b.rs[:0]
	b.from.reset()
}

func (b *jobEventBlock) add(cluster string, src schemas.JobSource, e *schemas.JobEvent, partition uint32, offset uint64) {
	b.rs = append(b.rs, jobEventRow{cluster: cluster, source: src, e: *e, partition: partition, offset: offset})
}

const jobEventInsert = "INSERT INTO %s.job_events (event_ts, event_ms, event_type, cluster, source, job_id, array_job_id, array_task_id, " +
	"job_name, user, uid, group_name, account, partition_name, qos, state, exit_code, priority, submit_time, eligible_time, " +
	"start_time, end_time, time_limit_s, node_count, nodes, cpus, gpus, gpu_type, mem_req_bytes, command_hash, work_dir, " +
	"kafka_partition, kafka_offset)"

func (b *jobEventBlock) insert(ctx context.Context, conn driver.Conn, db string) error {
	n := len(b.rs)
	var (
		eventTS                           = make([]int64, n)
		eventMS                           = make([]uint16, n)
		eventType, cluster, source, jobID = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		arrayJob, name, user, group       = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		account, partition, qos, state    = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		gpuType, cmdHash, workDir         = make([]string, n), make([]string, n), make([]string, n)
		arrayTask, uid, priority          = make([]*int64, n), make([]*int64, n), make([]*int64, n)
		exitCode                          = make([]*int32, n)
		submit                            = make([]int64, n)
		eligible, start, end              = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		timeLimit, nodeCount, cpus, gpus  = make([]*uint32, n), make([]*uint32, n), make([]*uint32, n), make([]*uint32, n)
		mem                               = make([]*uint64, n)
		nodes                             = make([][]string, n)
		kPart                             = make([]uint32, n)
		kOff                              = make([]uint64, n)
	)
	for i := range b.rs {
		r := &b.rs[i]
		e := &r.e
		sec, ms := floorDiv(e.EventMillis)
		eventTS[i], eventMS[i] = sec, ms
		eventType[i], cluster[i], source[i], jobID[i] = e.Type.String(), r.cluster, r.source.String(), e.JobID
		arrayJob[i], name[i], user[i], group[i] = e.ArrayJobID, e.Name, e.User, e.Group
		account[i], partition[i], qos[i], state[i] = e.Account, e.Partition, e.QOS, e.State.String()
		gpuType[i], cmdHash[i], workDir[i] = e.GPUType, e.CommandHash, e.WorkDir
		arrayTask[i], uid[i], priority[i] = known(e.ArrayTaskID), known(e.UID), known(e.Priority)
		exitCode[i] = knownInt32(e.ExitCode)
		submit[i], _ = floorDiv(e.SubmitMillis)
		eligible[i], start[i], end[i] = knownTime(e.EligibleMillis), knownTime(e.StartMillis), knownTime(e.EndMillis)
		timeLimit[i], nodeCount[i], cpus[i], gpus[i] = knownUint32(e.TimeLimitS), knownUint32(e.NodeCount), knownUint32(e.CPUs), knownUint32(e.GPUs)
		if e.MemReqBytes >= 0 {
			v := uint64(e.MemReqBytes)
			mem[i] = &v
		}
		nodes[i] = e.Nodes
		if nodes[i] == nil {
			nodes[i] = []string{}
		}
		kPart[i], kOff[i] = r.partition, r.offset
	}
	return insertColumns(ctx, conn, fmt.Sprintf(jobEventInsert, db), "job_events", n, []any{
		eventTS, eventMS, eventType, cluster, source, jobID, arrayJob, arrayTask,
		name, user, uid, group, account, partition, qos, state, exitCode, priority, submit, eligible,
		start, end, timeLimit, nodeCount, nodes, cpus, gpus, gpuType, mem, cmdHash, workDir,
		kPart, kOff,
	})
}

// unfitColumns names the columns of job_events for which e holds a known
// (non-negative) value too large to store: the insert stores them as NULL,
// as unknown.
func unfitColumns(e *schemas.JobEvent) []string {
	var out []string
	if e.ExitCode > math.MaxInt32 {
		out = append(out, "exit_code")
	}
	for _, c := range [...]struct {
		name string
		v    int64
	}{{"time_limit_s", e.TimeLimitS}, {"node_count", e.NodeCount}, {"cpus", e.CPUs}, {"gpus", e.GPUs}} {
		if c.v > math.MaxUint32 {
			out = append(out, c.name)
		}
	}
	return out
}

// known maps schemas.Unknown (any negative value) to NULL.
func known(v int64) *int64 {
	if v < 0 {
		return nil
	}
	return &v
}

func knownInt32(v int64) *int32 {
	if v < 0 || v > math.MaxInt32 {
		return nil
	}
	x := int32(v)
	return &x
}

func knownUint32(v int64) *uint32 {
	if v < 0 || v > math.MaxUint32 {
		return nil
	}
	x := uint32(v)
	return &x
}

func knownTime(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

// InsertJobEvents writes events straight into job_events (and so into jobs),
// for sites that import traces without Kafka. It writes one INSERT per month of
// event time. Re-inserting the same events is harmless: job_events and jobs
// collapse identical rows. The rows are recorded in the ledger under a
// partition number no Kafka topic has, so they never make a consumer skip.
//
// An event schemas.CheckJobEvent refuses, or one with a known value its
// column cannot hold (an exit code beyond Int32; a time limit, node, CPU or
// GPU count beyond UInt32), fails the whole call before anything is written,
// naming the event and the column: the Kafka path can only store such a
// value as NULL and count it, but a direct caller can refuse it, and nothing
// is turned into unknown silently.
func InsertJobEvents(ctx context.Context, conn driver.Conn, database, cluster string, source schemas.JobSource, events []schemas.JobEvent) error {
	blocks := newPartBlocks(newJobEventBlock)
	for i := range events {
		e := &events[i]
		if err := schemas.CheckJobEvent(e); err != nil {
			return fmt.Errorf("insert job events: events[%d] (job %q): %w", i, e.JobID, err)
		}
		if cols := unfitColumns(e); len(cols) > 0 {
			return fmt.Errorf("insert job events: events[%d] (job %q): %s: %w", i, e.JobID, strings.Join(cols, ", "), ErrUnfitValue)
		}
		sec, _ := floorDiv(e.EventMillis)
		key := monthKey(sec)
		blocks.get(key).add(cluster, source, e, directPartition, 0)
	}
	for _, b := range blocks.blocks() {
		if err := b.insert(ctx, conn, database); err != nil {
			return fmt.Errorf("insert job events: %w", err)
		}
	}
	return nil
}

// allocHandler handles TopicAllocations → gpu_allocations.
type allocHandler struct {
	partBlocks[*allocBlock]
	unfit func(column string) // as jobEventHandler's
}

func newAllocHandler(unfit func(column string)) *allocHandler {
	return &allocHandler{partBlocks: newPartBlocks(func(key uint32) *allocBlock { return &allocBlock{key: key} }), unfit: unfit}
}

func (h *allocHandler) topic() string { return schemas.TopicAllocations }
func (h *allocHandler) table() string { return "gpu_allocations" }

func (h *allocHandler) decode(value []byte) (any, error) {
	b := new(schemas.AllocBatch)
	if err := schemas.DecodeAllocBatch(value, b); err != nil {
		return nil, err
	}
	return b, nil
}

func (h *allocHandler) add(d any, partition int32, offset int64, skip []uint32) int {
	batch := d.(*schemas.AllocBatch)
	added := 0
	for i := range batch.Allocs {
		a := &batch.Allocs[i]
		sec, _ := floorDiv(a.StartMillis)
		key := monthKey(sec)
		if slices.Contains(skip, key) {
			continue
		}
		b := h.get(key)
		b.from.note(partition, offset)
		b.cluster = append(b.cluster, batch.Cluster)
		b.host = append(b.host, a.Host)
		idx := int32(-1)
		switch {
		case a.GPUIndex >= 0 && a.GPUIndex <= math.MaxInt32:
			idx = int32(a.GPUIndex)
		case a.GPUIndex > math.MaxInt32 && h.unfit != nil:
			h.unfit("gpu_index")
		}
		b.gpuIndex = append(b.gpuIndex, idx)
		b.gpuUUID = append(b.gpuUUID, a.GPUUUID)
		b.migUUID = append(b.migUUID, a.MIGUUID)
		b.jobID = append(b.jobID, a.JobID)
		b.user = append(b.user, a.User)
		b.start = append(b.start, sec)
		b.end = append(b.end, knownTime(a.EndMillis))
		b.source = append(b.source, a.Source.String())
		var version uint64
		if a.EndMillis > 0 {
			version = uint64(a.EndMillis)
		}
		b.version = append(b.version, version)
		b.kPartition = append(b.kPartition, uint32(partition))
		b.kOffset = append(b.kOffset, uint64(offset))
		added++
	}
	return added
}

func (h *allocHandler) flushExtra(context.Context, driver.Conn, string) error { return nil }

// allocBlock is the columns of gpu_allocations for one month of start time.
type allocBlock struct {
	key        uint32
	from       origin
	cluster    []string
	host       []string
	gpuIndex   []int32
	gpuUUID    []string
	migUUID    []string
	jobID      []string
	user       []string
	start      []int64
	end        []*time.Time
	source     []string
	version    []uint64
	kPartition []uint32
	kOffset    []uint64
}

func (b *allocBlock) table() string   { return "gpu_allocations" }
func (b *allocBlock) partKey() uint32 { return b.key }
func (b *allocBlock) rows() int       { return len(b.start) }

func (b *allocBlock) firstRow(p int32, off int64) (string, []any, bool) {
	i := rowFrom(b.kPartition, b.kOffset, p, off)
	if i < 0 {
		return "", nil, false
	}
	return "cluster = ? AND host = ? AND gpu_index = ? AND gpu_uuid = ? AND mig_uuid = ? AND job_id = ? AND source = ? AND version = ? AND toUInt32(alloc_start) = ?",
		[]any{b.cluster[i], b.host[i], b.gpuIndex[i], b.gpuUUID[i], b.migUUID[i], b.jobID[i], b.source[i], b.version[i], uint32(b.start[i])}, true
}
func (b *allocBlock) origin() *origin { return &b.from }

func (b *allocBlock) insert(ctx context.Context, conn driver.Conn, db string) error {
	return insertColumns(ctx, conn,
		"INSERT INTO "+db+".gpu_allocations (cluster, host, gpu_index, gpu_uuid, mig_uuid, job_id, user, alloc_start, alloc_end, source, version, kafka_partition, kafka_offset)",
		"gpu_allocations", len(b.start), []any{b.cluster, b.host, b.gpuIndex, b.gpuUUID, b.migUUID, b.jobID, b.user, b.start, b.end, b.source, b.version, b.kPartition, b.kOffset})
}

func (b *allocBlock) reset() {
	b.from.reset()
	*b = allocBlock{key: b.key, from: b.from, cluster: b.cluster[:0], host: b.host[:0], gpuIndex: b.gpuIndex[:0], gpuUUID: b.gpuUUID[:0],
		migUUID: b.migUUID[:0], jobID: b.jobID[:0], user: b.user[:0], start: b.start[:0], end: b.end[:0],
		source: b.source[:0], version: b.version[:0], kPartition: b.kPartition[:0], kOffset: b.kOffset[:0]}
}
