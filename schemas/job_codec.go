package schemas

import (
	"encoding/binary"
	"fmt"
)

// Job event batch wire format, version 1 (after the header 'H' 'S' 'J' 1):
// cluster string, source uvarint, event count uvarint, then per event in the
// order of the JobEvent fields: type uvarint, event time varint (Unix ms), job
// id, array job id strings, array task id varint, name, user strings, uid
// varint, group, account, partition, qos strings, state uvarint, exit code,
// priority, submit, eligible, start, end (Unix ms), time limit, node count
// varints, node list (uvarint count, strings), cpus, gpus varints, GPU type
// string, memory varint, command hash, work dir strings. Integers that may be
// Unknown (-1) are signed varints.

// Alloc batch wire format, version 1 (after 'H' 'S' 'A' 1): cluster string,
// count uvarint, then per allocation: host string, GPU index varint, GPU uuid,
// MIG uuid, job id, user strings, start, end varints (Unix ms), source uvarint.

// AppendJobEventBatch appends the encoding of b to dst. On error it returns dst
// as it was.
func AppendJobEventBatch(dst []byte, b *JobEventBatch) ([]byte, error) {
	out, err := appendJobEventBatch(dst, b)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func appendJobEventBatch(dst []byte, b *JobEventBatch) ([]byte, error) {
	if err := checkString("cluster", b.Cluster); err != nil {
		return dst, err
	}
	if b.Source == 0 || b.Source >= numJobSources {
		return dst, fmt.Errorf("schemas: encode job events: source %d is unknown", b.Source)
	}
	if len(b.Events) > MaxEventsPerMessage {
		return dst, fmt.Errorf("schemas: encode job events: %d events exceeds %d", len(b.Events), MaxEventsPerMessage)
	}
	dst = appendHeader(dst, kindJobEvents)
	dst = appendString(dst, b.Cluster)
	dst = binary.AppendUvarint(dst, uint64(b.Source))
	dst = binary.AppendUvarint(dst, uint64(len(b.Events)))
	for i := range b.Events {
		e := &b.Events[i]
		if err := e.check(); err != nil {
			return dst, fmt.Errorf("schemas: encode job events: events[%d]: %w", i, err)
		}
		dst = binary.AppendUvarint(dst, uint64(e.Type))
		dst = binary.AppendVarint(dst, e.EventMillis)
		dst = appendString(dst, e.JobID)
		dst = appendString(dst, e.ArrayJobID)
		dst = binary.AppendVarint(dst, e.ArrayTaskID)
		dst = appendString(dst, e.Name)
		dst = appendString(dst, e.User)
		dst = binary.AppendVarint(dst, e.UID)
		dst = appendString(dst, e.Group)
		dst = appendString(dst, e.Account)
		dst = appendString(dst, e.Partition)
		dst = appendString(dst, e.QOS)
		dst = binary.AppendUvarint(dst, uint64(e.State))
		for _, v := range [...]int64{e.ExitCode, e.Priority, e.SubmitMillis, e.EligibleMillis, e.StartMillis, e.EndMillis, e.TimeLimitS, e.NodeCount} {
			dst = binary.AppendVarint(dst, v)
		}
		dst = binary.AppendUvarint(dst, uint64(len(e.Nodes)))
		for _, n := range e.Nodes {
			dst = appendString(dst, n)
		}
		dst = binary.AppendVarint(dst, e.CPUs)
		dst = binary.AppendVarint(dst, e.GPUs)
		dst = appendString(dst, e.GPUType)
		dst = binary.AppendVarint(dst, e.MemReqBytes)
		dst = appendString(dst, e.CommandHash)
		dst = appendString(dst, e.WorkDir)
	}
	return dst, nil
}

// CheckJobEvent reports what makes e unencodable (unknown type or state, empty
// job id, an over-long or invalid string, a time outside 0..MaxTimeMillis),
// or nil.
func CheckJobEvent(e *JobEvent) error { return e.check() }

func (e *JobEvent) check() error {
	if e.Type == 0 || e.Type >= numJobEventTypes {
		return fmt.Errorf("type %d is unknown", e.Type)
	}
	if e.State == 0 || e.State >= numJobStates {
		return fmt.Errorf("state %d is unknown", e.State)
	}
	if e.JobID == "" {
		return fmt.Errorf("job id is empty")
	}
	if len(e.Nodes) > MaxNodesPerJob {
		return fmt.Errorf("%d nodes exceeds %d", len(e.Nodes), MaxNodesPerJob)
	}
	for _, s := range [...]struct{ what, v string }{
		{"job id", e.JobID}, {"array job id", e.ArrayJobID}, {"name", e.Name}, {"user", e.User},
		{"group", e.Group}, {"account", e.Account}, {"partition", e.Partition}, {"qos", e.QOS},
		{"gpu type", e.GPUType}, {"command hash", e.CommandHash}, {"work dir", e.WorkDir},
	} {
		if err := checkString(s.what, s.v); err != nil {
			return err
		}
	}
	for _, n := range e.Nodes {
		if err := checkString("node", n); err != nil {
			return err
		}
	}
	for _, t := range [...]struct {
		what string
		ms   int64
	}{
		{"event time", e.EventMillis}, {"submit time", e.SubmitMillis}, {"eligible time", e.EligibleMillis},
		{"start time", e.StartMillis}, {"end time", e.EndMillis},
	} {
		if p := TimeProblem(t.ms); p != "" {
			return fmt.Errorf("%s: %s", t.what, p)
		}
	}
	return nil
}

// jobEventMinLen is the fewest bytes one job event takes: 28 fields of one
// byte at their shortest, and a job id of at least one byte. (It was 30,
// which refused a message of events that short as truncated.)
const jobEventMinLen = 29

// DecodeJobEventBatch decodes msg into b, reusing b's event slice. On error the
// error is a *DecodeError.
func DecodeJobEventBatch(msg []byte, b *JobEventBatch) error {
	b.Cluster, b.Source, b.Events = "", 0, b.Events[:0]
	r := reader{b: msg, msg: "job events"}
	if err := r.header(kindJobEvents); err != nil {
		return err
	}
	var err error
	if b.Cluster, err = r.string("cluster", -1); err != nil {
		return err
	}
	src, err := r.enum("source", -1, numJobSources)
	if err != nil {
		return err
	}
	b.Source = JobSource(src)
	n, err := r.bounded("event count", -1, MaxEventsPerMessage)
	if err != nil {
		return err
	}
	if left := uint64(len(msg) - r.off); n > left/jobEventMinLen {
		return r.fail("event count", -1, ErrKindTruncated, fmt.Sprintf("%d events cannot fit in %d bytes", n, left))
	}
	for i := 0; i < int(n); i++ {
		var e JobEvent
		if err := r.jobEvent(i, &e); err != nil {
			return err
		}
		b.Events = append(b.Events, e)
	}
	return r.end()
}

func (r *reader) jobEvent(i int, e *JobEvent) error {
	t, err := r.enum("events[%d].type", i, numJobEventTypes)
	if err != nil {
		return err
	}
	e.Type = JobEventType(t)
	if e.EventMillis, err = r.time("events[%d].event_ts", i); err != nil {
		return err
	}
	start := r.off
	if e.JobID, err = r.string("events[%d].job_id", i); err != nil {
		return err
	}
	if e.JobID == "" {
		r.off = start
		return r.fail("events[%d].job_id", i, ErrKindRange, "job id is empty")
	}
	if e.ArrayJobID, err = r.string("events[%d].array_job_id", i); err != nil {
		return err
	}
	if e.ArrayTaskID, err = r.varint("events[%d].array_task_id", i); err != nil {
		return err
	}
	if e.Name, err = r.string("events[%d].job_name", i); err != nil {
		return err
	}
	if e.User, err = r.string("events[%d].user", i); err != nil {
		return err
	}
	if e.UID, err = r.varint("events[%d].uid", i); err != nil {
		return err
	}
	for _, f := range [...]struct {
		name string
		dst  *string
	}{{"events[%d].group", &e.Group}, {"events[%d].account", &e.Account}, {"events[%d].partition", &e.Partition}, {"events[%d].qos", &e.QOS}} {
		if *f.dst, err = r.string(f.name, i); err != nil {
			return err
		}
	}
	s, err := r.enum("events[%d].state", i, numJobStates)
	if err != nil {
		return err
	}
	e.State = JobState(s)
	for _, f := range [...]struct {
		name   string
		dst    *int64
		isTime bool
	}{
		{"events[%d].exit_code", &e.ExitCode, false}, {"events[%d].priority", &e.Priority, false},
		{"events[%d].submit_time", &e.SubmitMillis, true}, {"events[%d].eligible_time", &e.EligibleMillis, true},
		{"events[%d].start_time", &e.StartMillis, true}, {"events[%d].end_time", &e.EndMillis, true},
		{"events[%d].time_limit_s", &e.TimeLimitS, false}, {"events[%d].node_count", &e.NodeCount, false},
	} {
		read := r.varint
		if f.isTime {
			read = r.time
		}
		if *f.dst, err = read(f.name, i); err != nil {
			return err
		}
	}
	nn, err := r.bounded("events[%d].nodes", i, MaxNodesPerJob)
	if err != nil {
		return err
	}
	if left := uint64(len(r.b) - r.off); nn > left {
		return r.fail("events[%d].nodes", i, ErrKindTruncated, fmt.Sprintf("%d nodes cannot fit in %d bytes", nn, left))
	}
	if nn > 0 {
		e.Nodes = make([]string, nn)
		for k := range e.Nodes {
			if e.Nodes[k], err = r.string("events[%d].nodes", i); err != nil {
				return err
			}
		}
	}
	if e.CPUs, err = r.varint("events[%d].cpus", i); err != nil {
		return err
	}
	if e.GPUs, err = r.varint("events[%d].gpus", i); err != nil {
		return err
	}
	if e.GPUType, err = r.string("events[%d].gpu_type", i); err != nil {
		return err
	}
	if e.MemReqBytes, err = r.varint("events[%d].mem_req_bytes", i); err != nil {
		return err
	}
	if e.CommandHash, err = r.string("events[%d].command_hash", i); err != nil {
		return err
	}
	if e.WorkDir, err = r.string("events[%d].work_dir", i); err != nil {
		return err
	}
	return nil
}

// enum reads an unsigned varint that must be in [1, limit).
func (r *reader) enum(field string, idx int, limit uint64) (uint64, error) {
	start := r.off
	v, err := r.uvarint(field, idx)
	if err != nil {
		return 0, err
	}
	if v == 0 || v >= limit {
		r.off = start
		return 0, r.fail(field, idx, ErrKindUnknownEnum, fmt.Sprintf("value %d", v))
	}
	return v, nil
}

// AppendAllocBatch appends the encoding of b to dst. On error it returns dst as
// it was.
func AppendAllocBatch(dst []byte, b *AllocBatch) ([]byte, error) {
	out, err := appendAllocBatch(dst, b)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func appendAllocBatch(dst []byte, b *AllocBatch) ([]byte, error) {
	if err := checkString("cluster", b.Cluster); err != nil {
		return dst, err
	}
	if len(b.Allocs) > MaxEventsPerMessage {
		return dst, fmt.Errorf("schemas: encode allocs: %d allocations exceeds %d", len(b.Allocs), MaxEventsPerMessage)
	}
	dst = appendHeader(dst, kindAllocBatch)
	dst = appendString(dst, b.Cluster)
	dst = binary.AppendUvarint(dst, uint64(len(b.Allocs)))
	for i := range b.Allocs {
		a := &b.Allocs[i]
		if a.Source == 0 || a.Source >= numAllocSources {
			return dst, fmt.Errorf("schemas: encode allocs: allocs[%d].source %d is unknown", i, a.Source)
		}
		if a.JobID == "" {
			return dst, fmt.Errorf("schemas: encode allocs: allocs[%d].job_id is empty", i)
		}
		for _, s := range [...]string{a.Host, a.GPUUUID, a.MIGUUID, a.JobID, a.User} {
			if err := checkString("allocation field", s); err != nil {
				return dst, err
			}
		}
		for _, t := range [...]struct {
			what string
			ms   int64
		}{{"alloc_start", a.StartMillis}, {"alloc_end", a.EndMillis}} {
			if p := TimeProblem(t.ms); p != "" {
				return dst, fmt.Errorf("schemas: encode allocs: allocs[%d].%s: %s", i, t.what, p)
			}
		}
		dst = appendString(dst, a.Host)
		dst = binary.AppendVarint(dst, a.GPUIndex)
		dst = appendString(dst, a.GPUUUID)
		dst = appendString(dst, a.MIGUUID)
		dst = appendString(dst, a.JobID)
		dst = appendString(dst, a.User)
		dst = binary.AppendVarint(dst, a.StartMillis)
		dst = binary.AppendVarint(dst, a.EndMillis)
		dst = binary.AppendUvarint(dst, uint64(a.Source))
	}
	return dst, nil
}

// DecodeAllocBatch decodes msg into b, reusing b's slice. On error the error is
// a *DecodeError.
func DecodeAllocBatch(msg []byte, b *AllocBatch) error {
	b.Cluster, b.Allocs = "", b.Allocs[:0]
	r := reader{b: msg, msg: "alloc batch"}
	if err := r.header(kindAllocBatch); err != nil {
		return err
	}
	var err error
	if b.Cluster, err = r.string("cluster", -1); err != nil {
		return err
	}
	n, err := r.bounded("alloc count", -1, MaxEventsPerMessage)
	if err != nil {
		return err
	}
	if left := uint64(len(msg) - r.off); n > left/9 {
		return r.fail("alloc count", -1, ErrKindTruncated, fmt.Sprintf("%d allocations cannot fit in %d bytes", n, left))
	}
	for i := 0; i < int(n); i++ {
		var a Alloc
		if a.Host, err = r.string("allocs[%d].host", i); err != nil {
			return err
		}
		if a.GPUIndex, err = r.varint("allocs[%d].gpu_index", i); err != nil {
			return err
		}
		if a.GPUUUID, err = r.string("allocs[%d].gpu_uuid", i); err != nil {
			return err
		}
		if a.MIGUUID, err = r.string("allocs[%d].mig_uuid", i); err != nil {
			return err
		}
		start := r.off
		if a.JobID, err = r.string("allocs[%d].job_id", i); err != nil {
			return err
		}
		if a.JobID == "" {
			r.off = start
			return r.fail("allocs[%d].job_id", i, ErrKindRange, "job id is empty")
		}
		if a.User, err = r.string("allocs[%d].user", i); err != nil {
			return err
		}
		if a.StartMillis, err = r.time("allocs[%d].alloc_start", i); err != nil {
			return err
		}
		if a.EndMillis, err = r.time("allocs[%d].alloc_end", i); err != nil {
			return err
		}
		s, err := r.enum("allocs[%d].source", i, numAllocSources)
		if err != nil {
			return err
		}
		a.Source = AllocSource(s)
		b.Allocs = append(b.Allocs, a)
	}
	return r.end()
}
