package spool

import (
	"bytes"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDecodeRecord(t *testing.T) {
	withHdr := appendRecord(nil, "topic", []byte("key"), []byte("value"), testHeaders)
	good := appendRecord(nil, "topic", []byte("key"), []byte("value"), nil)
	tests := []struct {
		name    string
		in      []byte
		wantErr error
		wantLen int
	}{
		{"good", good, nil, len(good)},
		{"good with trailing bytes", append(bytes.Clone(good), 1, 2, 3), nil, len(good)},
		{"empty", nil, errTruncated, 0},
		{"short header", good[:5], errTruncated, 0},
		{"short payload", good[:len(good)-1], errTruncated, 0},
		{"zero length", make([]byte, 16), errLength, 0},
		{"huge length", []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0}, errLength, 0},
		{"bad checksum", flipped(good, 5), errChecksum, len(good)},
		{"bad payload", flipped(good, len(good)-1), errChecksum, len(good)},
		{"topic length past payload", reframe(good, func(p []byte) { p[0] = 0xff }), errPayload, len(good)},
		{"key length past payload", reframe(good, func(p []byte) { p[2+5] = 0x7f }), errPayload, len(good)},
		{"good with headers", withHdr, nil, len(withHdr)},
		// Payload offsets with headers: topic length 2, topic 5, count 2,
		// then the first header's key length.
		{"header count zero", reframe(withHdr, func(p []byte) { p[7], p[8] = 0, 0 }), errPayload, len(withHdr)},
		{"header count past payload", reframe(withHdr, func(p []byte) { p[7] = 0x7f }), errPayload, len(withHdr)},
		{"header key length past payload", reframe(withHdr, func(p []byte) { p[9] = 0x7f }), errPayload, len(withHdr)},
		{"header value length past payload", reframe(withHdr, func(p []byte) { p[11+len(testHeaders[0].Key)] = 0x7f }), errPayload, len(withHdr)},
		{"headers flag on a record without headers", reframe(good, func(p []byte) { p[0] |= 0x80 }), errPayload, len(good)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, n, err := decodeRecord(tt.in)
			if !errors.Is(err, tt.wantErr) || n != tt.wantLen {
				t.Fatalf("decodeRecord(%x) = _, %d, %v; want %d, %v", tt.in, n, err, tt.wantLen, tt.wantErr)
			}
			if err == nil && (r.Topic != "topic" || string(r.Key) != "key" || string(r.Value) != "value") {
				t.Errorf("decodeRecord(%x) = %+v; want topic, key, value", tt.in, r)
			}
			if err == nil && !equalHeaders(r.Headers, headersOf(tt.in, withHdr)) {
				t.Errorf("decodeRecord(%x) headers = %+v; want %+v", tt.in, r.Headers, headersOf(tt.in, withHdr))
			}
		})
	}
}

// testHeaders are what the publisher puts on a record: producer and sequence.
var testHeaders = []Header{{Key: "heliostat-producer", Value: []byte("0123456789abcdef")}, {Key: "heliostat-seq", Value: []byte("42")}}

func headersOf(in, withHdr []byte) []Header {
	if bytes.Equal(in, withHdr) {
		return testHeaders
	}
	return nil
}

func equalHeaders(a, b []Header) bool {
	return slices.EqualFunc(a, b, func(x, y Header) bool { return x.Key == y.Key && bytes.Equal(x.Value, y.Value) })
}

func flipped(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x80
	return b
}

// reframe edits the payload and fixes the CRC, so only the payload check can
// catch the damage.
func reframe(b []byte, edit func(payload []byte)) []byte {
	b = bytes.Clone(b)
	edit(b[frameHeaderLen:])
	crc := crc32.Checksum(b[frameHeaderLen:], castagnoli)
	b[4], b[5], b[6], b[7] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	return b
}

// FuzzDecodeRecord checks that the decoder of on-disk frames never panics,
// never claims more bytes than it was given, and that whatever it accepts
// re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, "heliostat.gpu.samples", []byte("host-1"), []byte("value"), nil))
	f.Add(appendRecord(nil, "heliostat.gpu.samples", []byte("host-1"), []byte("value"), testHeaders))
	f.Add(appendRecord(nil, "", nil, nil, nil))
	f.Add(appendRecord(nil, "t", []byte{}, []byte{0}, nil))
	f.Add(appendRecord(nil, "t", nil, nil, []Header{{Key: "", Value: nil}}))
	f.Add([]byte{0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := decodeRecord(b)
		if n < 0 || n > len(b) {
			t.Fatalf("decodeRecord(%x) frame length %d outside [0, %d]", b, n, len(b))
		}
		if err != nil {
			return
		}
		again := appendRecord(nil, r.Topic, r.Key, r.Value, r.Headers)
		if !bytes.Equal(again, b[:n]) {
			t.Fatalf("decodeRecord(%x) = %+v, which re-encodes to %x", b, r, again)
		}
	})
}

// FuzzOpen feeds arbitrary bytes to Open as a segment file, then drains the
// spool: recovery must neither panic nor hand out more records than it
// counted.
func FuzzOpen(f *testing.F) {
	one := appendRecord(nil, "t", []byte("k"), []byte("v"), testHeaders)
	f.Add(one)
	f.Add(append(bytes.Clone(one), one[:5]...))
	f.Add(append(flipped(one, 9), one...))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000001.seg"), b, 0o640); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, 1<<30, nil)
		if err != nil {
			t.Fatalf("Open = %v", err)
		}
		defer s.Close()
		want := s.Len()
		got := 0
		for range 1000 {
			recs, err := s.PeekN(7, 1<<20)
			if err != nil {
				t.Fatalf("PeekN = %v", err)
			}
			if len(recs) == 0 {
				break
			}
			if err := s.Commit(len(recs)); err != nil {
				t.Fatalf("Commit = %v", err)
			}
			got += len(recs)
		}
		if got != want || s.Len() != 0 {
			t.Fatalf("drained %d records, Len() now %d; Open counted %d", got, s.Len(), want)
		}
	})
}
