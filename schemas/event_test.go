package schemas_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

func TestEventTypeString(t *testing.T) {
	tests := []struct {
		t    schemas.EventType
		want string
	}{
		{0, "event_type(0)"},
		{schemas.EventXID, "xid"},
		{schemas.EventECCSingleBit, "ecc_single_bit"},
		{schemas.EventECCDoubleBit, "ecc_double_bit"},
		{schemas.EventPState, "pstate"},
		{schemas.EventClock, "clock"},
		{schemas.EventPowerSource, "power_source"},
		{7, "event_type(7)"},
		{255, "event_type(255)"},
	}
	for _, tt := range tests {
		if got := tt.t.String(); got != tt.want {
			t.Errorf("EventType(%d).String() = %q; want %q", uint8(tt.t), got, tt.want)
		}
	}
}

func TestDecodeEventBatchErrors(t *testing.T) {
	const (
		truncated   = schemas.ErrKindTruncated
		badMagic    = schemas.ErrKindMagic
		wrongKind   = schemas.ErrKindKind
		version     = schemas.ErrKindVersion
		outRange    = schemas.ErrKindRange
		badUTF8     = schemas.ErrKindUTF8
		trailing    = schemas.ErrKindTrailing
		badVarint   = schemas.ErrKindVarint
		unknownEnum = schemas.ErrKindUnknownEnum
	)
	hdr := eventHeader()
	ids := hdr.str("eos").str("dgx-h100-017")
	// One event, up to its type.
	one := ids.uv(1).sv(baseTS).str("GPU-a")
	valid := encodeEvents(t, eventsBatch())
	samples := encodeSamples(t, migBatch())
	long := strings.Repeat("x", schemas.MaxStringLen+1)
	// Nine continuation bytes and a tenth that sets bits above 64.
	overflow := append(bytes.Repeat([]byte{0xff}, 9), 0x02)

	tests := []decodeErrorCase{
		{"empty", nil, "header", truncated, 0},
		{"short header", []byte("HS"), "header", truncated, 0},
		{"bad magic", []byte("HXE\x01"), "header", badMagic, 0},
		{"sample batch", samples, "header.kind", wrongKind, 0},
		{"version 2", []byte("HSE\x02"), "header.version", version, 0},
		{"version 255", []byte("HSE\xff"), "header.version", version, 0},
		{"header only", hdr, "cluster", truncated, 4},
		{"host not UTF-8", hdr.str("eos").str("\xfe"), "host", badUTF8, len(hdr.str("eos")) + 1},
		{"truncated in event count", ids.raw(0x80), "event count", truncated, len(ids)},
		{"event count overflows 64 bits", ids.raw(overflow...), "event count", badVarint, len(ids)},
		{"event count over MaxEventsPerMessage", ids.uv(schemas.MaxEventsPerMessage + 1), "event count", outRange, len(ids)},
		// The size check runs after the count is read, so the offset is past it.
		{"event count cannot fit", ids.uv(2).raw(0, 0, 0, 0, 0, 0, 0), "event count", truncated, len(ids) + 1},
		{"truncated in ts", ids.uv(1).raw(0x80, 0x80, 0x80, 0x80), "events[0].ts", truncated, len(ids) + 1},
		{"ts overflows 64 bits", ids.uv(1).raw(overflow...), "events[0].ts", badVarint, len(ids) + 1},
		{"truncated in gpu_uuid", ids.uv(1).sv(5).uv(36).text("GPU-"), "events[0].gpu_uuid", truncated, len(ids) + 3},
		{"gpu_uuid not UTF-8", ids.uv(1).sv(5).str("GPU-\xc3").uv(1).uv(79), "events[0].gpu_uuid", badUTF8, len(ids) + 3},
		{"gpu_uuid over MaxStringLen", ids.uv(1).sv(5).str(long).uv(1).uv(79), "events[0].gpu_uuid", outRange, len(ids) + 2},
		{"truncated in type", one.raw(0x80), "events[0].type", truncated, len(one)},
		{"type 0", one.uv(0).uv(0), "events[0].type", unknownEnum, len(one)},
		{"type 7", one.uv(7).uv(0), "events[0].type", unknownEnum, len(one)},
		{"type over 8 bits", one.uv(1<<8 | uint64(schemas.EventXID)).uv(0), "events[0].type", unknownEnum, len(one)},
		{"truncated in xid", one.uv(1).raw(0x80), "events[0].xid", truncated, len(one) + 1},
		{"xid overflows 64 bits", one.uv(1).raw(overflow...), "events[0].xid", badVarint, len(one) + 1},
		{"second event of unknown type", ids.uv(2).sv(1).str("GPU-a").uv(1).uv(79).sv(2).str("GPU-a").uv(9).uv(0), "events[1].type", unknownEnum, len(ids.uv(2).sv(1).str("GPU-a").uv(1).uv(79).sv(2).str("GPU-a"))},
		{"trailing byte", wire(valid).raw(1), "end", trailing, len(valid)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b schemas.EventBatch
			err := schemas.DecodeEventBatch(tt.msg, &b)
			checkDecodeError(t, "DecodeEventBatch", "event batch", tt, err)
		})
	}
}

func TestAppendEventBatchRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(b *schemas.EventBatch)
		want   string // in the error text
	}{
		{"type 0", func(b *schemas.EventBatch) { b.Events[2].Type = 0 }, "events[2].type 0 is unknown"},
		{"type 7", func(b *schemas.EventBatch) { b.Events[0].Type = 7 }, "events[0].type 7 is unknown"},
		{"gpu uuid not UTF-8", func(b *schemas.EventBatch) { b.Events[1].GPUUUID = "GPU-\xff" }, "gpu uuid: not valid UTF-8"},
		{"gpu uuid too long", func(b *schemas.EventBatch) { b.Events[1].GPUUUID = strings.Repeat("u", 1025) }, "gpu uuid: 1025 bytes exceeds 1024"},
		{"host not UTF-8", func(b *schemas.EventBatch) { b.Host = "\xc0" }, "host: not valid UTF-8"},
		{"cluster too long", func(b *schemas.EventBatch) { b.Cluster = strings.Repeat("c", 2048) }, "cluster: 2048 bytes exceeds 1024"},
		{"too many events", func(b *schemas.EventBatch) {
			b.Events = make([]schemas.GPUEvent, schemas.MaxEventsPerMessage+1)
		}, "65537 events exceeds 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := eventsBatch()
			tt.mutate(b)
			_, err := schemas.AppendEventBatch(nil, b)
			if err == nil {
				t.Fatalf("AppendEventBatch(%s) error = nil; want one containing %q", tt.name, tt.want)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "schemas: encode ") || !strings.Contains(msg, tt.want) {
				t.Errorf("AppendEventBatch(%s) error = %q; want one starting with \"schemas: encode \" and containing %q", tt.name, msg, tt.want)
			}
		})
	}
}

// TestEventBatchLimits round-trips the largest event batch the format allows:
// MaxEventsPerMessage events of the smallest size, which the decoder's
// size check must still let through.
func TestEventBatchLimits(t *testing.T) {
	b := &schemas.EventBatch{
		Cluster: strings.Repeat("c", schemas.MaxStringLen),
		Host:    strings.Repeat("ü", schemas.MaxStringLen/2),
		Events:  make([]schemas.GPUEvent, schemas.MaxEventsPerMessage),
	}
	for i := range b.Events {
		b.Events[i].Type = schemas.EventXID
	}
	b.Events[0] = schemas.GPUEvent{TSMillis: schemas.MaxTimeMillis, GPUUUID: strings.Repeat("g", schemas.MaxStringLen), Type: schemas.EventPowerSource, XID: math.MaxUint64}
	msg := encodeEvents(t, b)
	var got schemas.EventBatch
	if err := schemas.DecodeEventBatch(msg, &got); err != nil {
		t.Fatalf("DecodeEventBatch(%d bytes): %v", len(msg), err)
	}
	if !reflect.DeepEqual(got, *b) {
		t.Errorf("DecodeEventBatch(AppendEventBatch(b)) differs from b")
	}
}

// TestDecodeEventBatchReuse decodes a short batch into one that held a longer
// one.
func TestDecodeEventBatchReuse(t *testing.T) {
	b := eventsBatch()
	short := &schemas.EventBatch{Cluster: "c", Host: "h", Events: []schemas.GPUEvent{{TSMillis: 1, GPUUUID: "GPU-x", Type: schemas.EventClock, XID: 2}}}
	for _, want := range []*schemas.EventBatch{short, {}, eventsBatch()} {
		if err := schemas.DecodeEventBatch(encodeEvents(t, want), b); err != nil {
			t.Fatalf("DecodeEventBatch(%s): %v", want.Host, err)
		}
		if g, w := normEvents(b), normEvents(want); !reflect.DeepEqual(g, w) {
			t.Errorf("DecodeEventBatch into a used batch = %+v; want %+v", g, w)
		}
	}
}

func FuzzDecodeEventBatch(f *testing.F) {
	for _, c := range goldenCases() {
		if c.events != nil {
			f.Add(c.encode(f))
		}
	}
	ids := eventHeader().str("eos").str("h")
	for _, msg := range [][]byte{
		nil,
		[]byte("HSE\x01"),
		[]byte("HSG\x01"),
		ids.uv(schemas.MaxEventsPerMessage),
		ids.uv(1).sv(-1).str("GPU-a").uv(0).uv(0),
		ids.uv(1).sv(-1).str("GPU-\xff").uv(1).uv(79),
		ids.uv(1).raw(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		// Overlong varints: valid, and re-encoded shorter.
		ids.raw(0x81, 0x00).raw(0x80, 0x00).str("").raw(0x83, 0x00).raw(0x80, 0x80, 0x00),
	} {
		f.Add(msg)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var b schemas.EventBatch
		err := schemas.DecodeEventBatch(msg, &b)
		if err != nil {
			var de *schemas.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("DecodeEventBatch(%q) error = %v (%T); want a *schemas.DecodeError", msg, err, err)
			}
			if de.Offset < 0 || de.Offset > len(msg) || de.Field == "" || de.Kind == "" {
				t.Fatalf("DecodeEventBatch(%q) = %#v; want a field, a kind and an offset within the message", msg, de)
			}
			return
		}
		enc, err := schemas.AppendEventBatch(nil, &b)
		if err != nil {
			t.Fatalf("AppendEventBatch(DecodeEventBatch(%q)): %v; the encoder must accept what the decoder accepts", msg, err)
		}
		if len(enc) > len(msg) {
			t.Errorf("re-encoding %d bytes gave %d; the encoder should write minimal varints", len(msg), len(enc))
		}
		again := eventsBatch() // dirty: reuse must not leak old events
		if err := schemas.DecodeEventBatch(enc, again); err != nil {
			t.Fatalf("DecodeEventBatch(AppendEventBatch(DecodeEventBatch(%q))): %v", msg, err)
		}
		if g, w := normEvents(again), normEvents(&b); !reflect.DeepEqual(g, w) {
			t.Fatalf("round trip of %q = %+v; want %+v", msg, g, w)
		}
		enc2, err := schemas.AppendEventBatch(nil, again)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("second re-encoding of %q = %x, %v; want %x", msg, enc2, err, enc)
		}
	})
}
