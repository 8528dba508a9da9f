package schemas_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

func TestTimeProblem(t *testing.T) {
	for _, tt := range []struct {
		ms   int64
		want string // "" or a part of the problem
	}{
		{0, ""},
		{1_700_000_000_000, ""},
		{schemas.MaxTimeMillis, ""},
		{-1, "before 1970-01-01T00:00:00Z"},
		{math.MinInt64, "before 1970"},
		{schemas.MaxTimeMillis + 1, "after 2106-02-07T06:28:15Z"},
		{math.MaxInt64, "after 2106"},
	} {
		got := schemas.TimeProblem(tt.ms)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("TimeProblem(%d) = %q; want %q", tt.ms, got, tt.want)
		}
	}
	// The last millisecond is the last second a UInt32 holds.
	if got := (schemas.MaxTimeMillis + 1) / 1000; got != math.MaxUint32+1 {
		t.Errorf("(MaxTimeMillis+1)/1000 = %d; want 2^32", got)
	}
}

// TestDecodeTimeOutOfRange puts a time outside ClickHouse's DateTime range in
// each time field of each message kind: the decoder refuses it as
// out_of_range at that field and that byte, and the encoder refuses to write
// it. A sentinel time, unique in the message, marks where the field is.
func TestDecodeTimeOutOfRange(t *testing.T) {
	const sentinel = 1_234_567_890_123
	type message struct {
		field  string
		encode func(ms int64) ([]byte, error)
		decode func([]byte) error
	}
	sample := func(ms int64) ([]byte, error) {
		b := &schemas.SampleBatch{Cluster: "c", Host: "h"}
		b.AddGPU(schemas.GPU{UUID: "GPU-a"})
		b.Samples = []schemas.Sample{{TSMillis: ms}}
		return schemas.AppendSampleBatch(nil, b)
	}
	event := func(ms int64) ([]byte, error) {
		return schemas.AppendEventBatch(nil, &schemas.EventBatch{Cluster: "c", Host: "h",
			Events: []schemas.GPUEvent{{TSMillis: ms, Type: schemas.EventXID, XID: 79}}})
	}
	job := func(set func(e *schemas.JobEvent, ms int64)) func(int64) ([]byte, error) {
		return func(ms int64) ([]byte, error) {
			b := jobBatch()
			b.Events = b.Events[3:] // END: every time is set
			set(&b.Events[0], ms)
			return schemas.AppendJobEventBatch(nil, b)
		}
	}
	alloc := func(set func(a *schemas.Alloc, ms int64)) func(int64) ([]byte, error) {
		return func(ms int64) ([]byte, error) {
			b := allocBatch()
			b.Allocs = b.Allocs[1:2] // closed: both times set
			set(&b.Allocs[0], ms)
			return schemas.AppendAllocBatch(nil, b)
		}
	}
	action := func(set func(a *schemas.Action, ms int64)) func(int64) ([]byte, error) {
		return func(ms int64) ([]byte, error) {
			b := actionsBatch()
			b.Actions = b.Actions[:1]
			set(&b.Actions[0], ms)
			return schemas.AppendActionBatch(nil, b)
		}
	}
	decodeJobs := func(m []byte) error { return schemas.DecodeJobEventBatch(m, &schemas.JobEventBatch{}) }
	decodeAllocs := func(m []byte) error { return schemas.DecodeAllocBatch(m, &schemas.AllocBatch{}) }
	decodeActions := func(m []byte) error { return schemas.DecodeActionBatch(m, &schemas.ActionBatch{}) }
	for _, m := range []message{
		{"samples[0].ts", sample, func(m []byte) error { return schemas.DecodeSampleBatch(m, &schemas.SampleBatch{}) }},
		{"events[0].ts", event, func(m []byte) error { return schemas.DecodeEventBatch(m, &schemas.EventBatch{}) }},
		{"events[0].event_ts", job(func(e *schemas.JobEvent, ms int64) { e.EventMillis = ms }), decodeJobs},
		{"events[0].submit_time", job(func(e *schemas.JobEvent, ms int64) { e.SubmitMillis = ms }), decodeJobs},
		{"events[0].eligible_time", job(func(e *schemas.JobEvent, ms int64) { e.EligibleMillis = ms }), decodeJobs},
		{"events[0].start_time", job(func(e *schemas.JobEvent, ms int64) { e.StartMillis = ms }), decodeJobs},
		{"events[0].end_time", job(func(e *schemas.JobEvent, ms int64) { e.EndMillis = ms }), decodeJobs},
		{"allocs[0].alloc_start", alloc(func(a *schemas.Alloc, ms int64) { a.StartMillis = ms }), decodeAllocs},
		{"allocs[0].alloc_end", alloc(func(a *schemas.Alloc, ms int64) { a.EndMillis = ms }), decodeAllocs},
		{"actions[0].decided_at", action(func(a *schemas.Action, ms int64) { a.DecidedAtMillis = ms }), decodeActions},
		{"actions[0].recorded_at", action(func(a *schemas.Action, ms int64) { a.RecordedAtMillis = ms }), decodeActions},
	} {
		good, err := m.encode(sentinel)
		if err != nil {
			t.Fatalf("%s: encode: %v", m.field, err)
		}
		mark := binary.AppendVarint(nil, sentinel)
		at := bytes.Index(good, mark)
		if at < 0 || bytes.Count(good, mark) != 1 {
			t.Fatalf("%s: the sentinel is %d times in the message; want once", m.field, bytes.Count(good, mark))
		}
		if err := m.decode(good); err != nil {
			t.Fatalf("%s: decode the good message: %v", m.field, err)
		}
		for _, bad := range []int64{-1, -86_400_000, schemas.MaxTimeMillis + 1, math.MaxInt64, math.MinInt64} {
			if _, err := m.encode(bad); err == nil || !strings.Contains(err.Error(), "ClickHouse DateTime") {
				t.Errorf("%s = %d: encode error = %v; want one about the DateTime range", m.field, bad, err)
			}
			msg := append(append(append([]byte(nil), good[:at]...), binary.AppendVarint(nil, bad)...), good[at+len(mark):]...)
			err := m.decode(msg)
			var de *schemas.DecodeError
			if !errors.As(err, &de) || de.Field != m.field || de.Kind != schemas.ErrKindRange || de.Offset != at {
				t.Errorf("%s = %d: decode error = %v; want out_of_range at %s, byte %d", m.field, bad, err, m.field, at)
			}
		}
	}
}

// TestDecodeSampleStepOutOfRange: samples are delta-coded, so a step that
// leaves the range, or one too large for any two times in it, is refused at
// the sample it reaches.
func TestDecodeSampleStepOutOfRange(t *testing.T) {
	head := sampleHeader().str("c").str("h").uv(1).gpu(0, "GPU-a").uv(2).sv(schemas.MaxTimeMillis).uv(0).uv(0)
	for _, step := range []int64{1, math.MaxInt64, math.MinInt64, -schemas.MaxTimeMillis - 1} {
		msg := head.sv(step).uv(0).uv(0)
		err := schemas.DecodeSampleBatch(msg, &schemas.SampleBatch{})
		var de *schemas.DecodeError
		if !errors.As(err, &de) || de.Field != "samples[1].ts" || de.Kind != schemas.ErrKindRange || de.Offset != len(head) {
			t.Errorf("step %d after the last time: %v; want out_of_range at samples[1].ts, byte %d", step, err, len(head))
		}
	}
	// The largest step down is in range.
	var b schemas.SampleBatch
	if err := schemas.DecodeSampleBatch(head.sv(-schemas.MaxTimeMillis).uv(0).uv(0), &b); err != nil || b.Samples[1].TSMillis != 0 {
		t.Errorf("step down to 0: %v, %+v; want a sample at 0", err, b.Samples)
	}
}
