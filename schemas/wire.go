package schemas

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// Every message starts with a four-byte header: 'H', 'S', the message kind and the
// format version. A decoder refuses kinds it does not expect and versions it does
// not know, so that a consumer never misreads a newer producer.
const (
	magic0 = 'H'
	magic1 = 'S'

	kindSampleBatch = 'G'
	kindEventBatch  = 'E'
	kindJobEvents   = 'J'
	kindAllocBatch  = 'A'

	headerLen = 4
)

// Limits that bound what one message may claim, so that a corrupt length cannot
// make a decoder allocate without bound.
const (
	MaxGPUsPerMessage    = 4096
	MaxSamplesPerMessage = 1 << 20
	MaxEventsPerMessage  = 1 << 16
	MaxNodesPerJob       = 1 << 16
	MaxStringLen         = 1024
)

// MaxTimeMillis is the last Unix millisecond a ClickHouse DateTime column
// holds: 2106-02-07 06:28:15.999 UTC (DateTime is a UInt32 of seconds). A
// time outside 0..MaxTimeMillis would wrap on insert and be stored as
// another time, so encoders and decoders refuse it: every time field of
// every message (each "Unix ms" of the formats below) lies in that range,
// a sample's after its delta is added.
const MaxTimeMillis = (1<<32-1)*1000 + 999

// TimeProblem says why the Unix millisecond ms cannot be stored in a
// DateTime column, or "" when it can.
func TimeProblem(ms int64) string {
	switch {
	case ms < 0:
		return fmt.Sprintf("%d ms is before 1970-01-01T00:00:00Z, the first time a ClickHouse DateTime holds", ms)
	case ms > MaxTimeMillis:
		return fmt.Sprintf("%d ms is after 2106-02-07T06:28:15Z, the last time a ClickHouse DateTime holds", ms)
	}
	return ""
}

// Kinds of decode failure, stable strings for metrics labels.
const (
	ErrKindTruncated   = "truncated"
	ErrKindMagic       = "bad_magic"
	ErrKindKind        = "wrong_kind"
	ErrKindVersion     = "unsupported_version"
	ErrKindRange       = "out_of_range"
	ErrKindUTF8        = "invalid_utf8"
	ErrKindTrailing    = "trailing_bytes"
	ErrKindVarint      = "bad_varint"
	ErrKindUnknownEnum = "unknown_enum"
)

// DecodeErrorKinds returns every ErrKind constant, so that counters by kind
// can start at zero.
func DecodeErrorKinds() []string {
	return []string{ErrKindTruncated, ErrKindMagic, ErrKindKind, ErrKindVersion, ErrKindRange, ErrKindUTF8, ErrKindTrailing,
		ErrKindVarint, ErrKindUnknownEnum}
}

// DecodeError says what is wrong with a message: which field, at which byte
// offset, and why.
type DecodeError struct {
	Message string // "sample batch", "event batch"
	Field   string // e.g. "samples[12].gpu"
	Offset  int    // byte offset in the message where the field starts
	Kind    string // one of the ErrKind constants
	Detail  string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("schemas: decode %s: %s at byte %d: %s: %s", e.Message, e.Field, e.Offset, e.Kind, e.Detail)
}

// reader decodes primitives from a message and turns every failure into a
// DecodeError. Field names are built only on failure, so the happy path does not
// allocate for them.
type reader struct {
	b   []byte
	off int
	msg string
}

func (r *reader) fail(field string, idx int, kind, detail string) error {
	if idx >= 0 {
		field = fmt.Sprintf(field, idx)
	}
	return &DecodeError{Message: r.msg, Field: field, Offset: r.off, Kind: kind, Detail: detail}
}

func (r *reader) header(kind byte) error {
	if len(r.b) < headerLen {
		return r.fail("header", -1, ErrKindTruncated, fmt.Sprintf("message is %d bytes, header needs %d", len(r.b), headerLen))
	}
	if r.b[0] != magic0 || r.b[1] != magic1 {
		return r.fail("header", -1, ErrKindMagic, fmt.Sprintf("got %#x %#x, want 'H' 'S'", r.b[0], r.b[1]))
	}
	if r.b[2] != kind {
		return r.fail("header.kind", -1, ErrKindKind, fmt.Sprintf("got %q, want %q", r.b[2], kind))
	}
	if r.b[3] != 1 {
		return r.fail("header.version", -1, ErrKindVersion, fmt.Sprintf("version %d, this decoder knows 1", r.b[3]))
	}
	r.off = headerLen
	return nil
}

func (r *reader) uvarint(field string, idx int) (uint64, error) {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		if n == 0 {
			return 0, r.fail(field, idx, ErrKindTruncated, "message ends inside a varint")
		}
		return 0, r.fail(field, idx, ErrKindVarint, "varint overflows 64 bits")
	}
	r.off += n
	return v, nil
}

func (r *reader) varint(field string, idx int) (int64, error) {
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		if n == 0 {
			return 0, r.fail(field, idx, ErrKindTruncated, "message ends inside a varint")
		}
		return 0, r.fail(field, idx, ErrKindVarint, "varint overflows 64 bits")
	}
	r.off += n
	return v, nil
}

// bounded reads an unsigned varint and checks it against max.
func (r *reader) bounded(field string, idx int, max uint64) (uint64, error) {
	start := r.off
	v, err := r.uvarint(field, idx)
	if err != nil {
		return 0, err
	}
	if v > max {
		r.off = start
		return 0, r.fail(field, idx, ErrKindRange, fmt.Sprintf("%d exceeds %d", v, max))
	}
	return v, nil
}

// time reads a signed varint of Unix milliseconds that a DateTime column
// holds (see TimeProblem).
func (r *reader) time(field string, idx int) (int64, error) {
	start := r.off
	v, err := r.varint(field, idx)
	if err != nil {
		return 0, err
	}
	if p := TimeProblem(v); p != "" {
		r.off = start
		return 0, r.fail(field, idx, ErrKindRange, p)
	}
	return v, nil
}

// int32 reads a signed varint that must fit an int32.
func (r *reader) int32(field string, idx int) (int32, error) {
	start := r.off
	v, err := r.varint(field, idx)
	if err != nil {
		return 0, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.off = start
		return 0, r.fail(field, idx, ErrKindRange, fmt.Sprintf("%d does not fit int32", v))
	}
	return int32(v), nil
}

func (r *reader) float32(field string, idx int) (uint32, error) {
	if len(r.b)-r.off < 4 {
		return 0, r.fail(field, idx, ErrKindTruncated, "message ends inside a float32")
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v, nil
}

func (r *reader) string(field string, idx int) (string, error) {
	n, err := r.bounded(field, idx, MaxStringLen)
	if err != nil {
		return "", err
	}
	return r.stringBody(field, idx, n)
}

// stringBody reads the n bytes of a string whose length was just read; they
// must be there and be UTF-8.
func (r *reader) stringBody(field string, idx int, n uint64) (string, error) {
	if uint64(len(r.b)-r.off) < n {
		return "", r.fail(field, idx, ErrKindTruncated, fmt.Sprintf("string of %d bytes, %d left", n, len(r.b)-r.off))
	}
	raw := r.b[r.off : r.off+int(n)]
	if !utf8.Valid(raw) {
		return "", r.fail(field, idx, ErrKindUTF8, "string is not valid UTF-8")
	}
	r.off += int(n)
	return string(raw), nil
}

func (r *reader) end() error {
	if r.off != len(r.b) {
		return r.fail("end", -1, ErrKindTrailing, fmt.Sprintf("%d bytes after the last field", len(r.b)-r.off))
	}
	return nil
}

// Encoding helpers append to a byte slice.

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendHeader(b []byte, kind byte) []byte {
	return append(b, magic0, magic1, kind, 1)
}

func checkString(what, s string) error {
	if len(s) > MaxStringLen {
		return fmt.Errorf("schemas: encode %s: %d bytes exceeds %d", what, len(s), MaxStringLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("schemas: encode %s: not valid UTF-8", what)
	}
	return nil
}
