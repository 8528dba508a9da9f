package spool

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/heliostat-dev/heliostat/internal/tmpfs"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func open(t *testing.T, dir string, maxBytes int64, opts ...Option) *Spool {
	t.Helper()
	s, err := Open(dir, maxBytes, testLogger(t), opts...)
	if err != nil {
		t.Fatalf("Open(%q) = %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rec is the i-th test record. Records of one-digit i have the same size,
// which the size tests rely on.
func rec(i int) Record {
	return Record{Topic: "heliostat.gpu.samples", Key: fmt.Appendf(nil, "host-%d", i%3), Value: fmt.Appendf(nil, "value-%d", i),
		Headers: []Header{{Key: "heliostat-seq", Value: fmt.Appendf(nil, "%d", i%10)}}}
}

func appendRange(t *testing.T, s *Spool, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		r := rec(i)
		if err := s.Append(r.Topic, r.Key, r.Value, r.Headers...); err != nil {
			t.Fatalf("Append(record %d) = %v", i, err)
		}
	}
}

// consume reads and commits up to n records, batch at a time.
func consume(t *testing.T, s *Spool, n, batch int) []Record {
	t.Helper()
	var out []Record
	for len(out) < n {
		recs, err := s.PeekN(min(batch, n-len(out)), 1<<20)
		if err != nil {
			t.Fatalf("PeekN = %v", err)
		}
		if len(recs) == 0 {
			break
		}
		if err := s.Commit(len(recs)); err != nil {
			t.Fatalf("Commit(%d) = %v", len(recs), err)
		}
		out = append(out, recs...)
	}
	return out
}

// values describes records by value and headers, so order checks see both.
func values(recs []Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, describe(r))
	}
	return out
}

func describe(r Record) string {
	s := string(r.Value)
	for _, h := range r.Headers {
		s += fmt.Sprintf(" %s=%s", h.Key, h.Value)
	}
	return s
}

func wantValues(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, describe(rec(i)))
	}
	return out
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segmentSuffix))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// TestHeadersAcrossReopen mixes records with and without headers (spools
// written before headers existed hold only the latter) and reads them back
// after a reopen.
func TestHeadersAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20)
	var want []Record
	for i := range 6 {
		r := rec(i)
		if i%2 == 0 {
			r.Headers = nil
		} else {
			r.Headers = append(r.Headers, Header{Key: "empty"}, Header{Key: "heliostat-producer", Value: []byte("p1")})
		}
		if err := s.Append(r.Topic, r.Key, r.Value, r.Headers...); err != nil {
			t.Fatalf("Append(record %d) = %v", i, err)
		}
		want = append(want, r)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	got := consume(t, open(t, dir, 1<<20), 10, 4)
	if !slices.Equal(values(got), values(want)) {
		t.Fatalf("after reopen: %q; want %q", values(got), values(want))
	}
	for i, r := range got {
		if (r.Headers == nil) != (i%2 == 0) {
			t.Errorf("record %d: headers %+v; want none for even records only", i, r.Headers)
		}
	}
}

func TestAppendRefusesUnencodable(t *testing.T) {
	s := open(t, t.TempDir(), 1<<20)
	long := string(make([]byte, MaxTopicBytes+1))
	if err := s.Append(long, nil, nil); err == nil {
		t.Errorf("Append(topic of %d bytes) = nil; want an error", len(long))
	}
	if err := s.Append("t", nil, nil, Header{Key: string(make([]byte, 70000))}); err == nil {
		t.Errorf("Append(header key of 70000 bytes) = nil; want an error")
	}
	if s.Len() != 0 {
		t.Errorf("Len() = %d after refused appends; want 0", s.Len())
	}
}

func TestOrderAcrossReopen(t *testing.T) {
	tests := []struct {
		name         string
		segmentBytes int64
		appended     int
		consumed     int // before the reopen
		batch        int
	}{
		{"one segment nothing consumed", DefaultSegmentBytes, 10, 0, 4},
		{"one segment half consumed", DefaultSegmentBytes, 10, 5, 4},
		{"many segments", 100, 50, 0, 7},
		{"many segments some consumed", 100, 50, 23, 7},
		{"segment boundary consumed", 100, 50, 2, 1},
		{"all consumed", 100, 20, 20, 3},
		{"empty", DefaultSegmentBytes, 0, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, 1<<20, WithSegmentBytes(tt.segmentBytes))
			appendRange(t, s, 0, tt.appended)
			got := consume(t, s, tt.consumed, tt.batch)
			if !slices.Equal(values(got), wantValues(0, tt.consumed)) {
				t.Fatalf("before reopen: consumed %q; want %q", values(got), wantValues(0, tt.consumed))
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}

			s = open(t, dir, 1<<20, WithSegmentBytes(tt.segmentBytes))
			if got, want := s.Len(), tt.appended-tt.consumed; got != want {
				t.Errorf("Len() after reopen = %d; want %d", got, want)
			}
			// Appends after the reopen queue behind the old records.
			appendRange(t, s, tt.appended, tt.appended+3)
			got = consume(t, s, 1000, tt.batch)
			if want := wantValues(tt.consumed, tt.appended+3); !slices.Equal(values(got), want) {
				t.Errorf("after reopen: consumed %q; want %q", values(got), want)
			}
			if s.Len() != 0 || s.Bytes() != 0 {
				t.Errorf("Len(), Bytes() after draining = %d, %d; want 0, 0", s.Len(), s.Bytes())
			}
		})
	}
}

func TestRecordRoundTrip(t *testing.T) {
	tests := []Record{
		{Topic: "t", Key: nil, Value: []byte("nil key")},
		{Topic: "t", Key: []byte{}, Value: []byte("empty key")},
		{Topic: "", Key: []byte("k"), Value: nil},
		{Topic: "heliostat.gpu.events", Key: bytes.Repeat([]byte{0xff}, 300), Value: bytes.Repeat([]byte{0}, 70000)},
	}
	s := open(t, t.TempDir(), 1<<20)
	for _, r := range tests {
		if err := s.Append(r.Topic, r.Key, r.Value, r.Headers...); err != nil {
			t.Fatalf("Append(%q) = %v", r.Topic, err)
		}
	}
	got := consume(t, s, len(tests), 10)
	if len(got) != len(tests) {
		t.Fatalf("consumed %d records; want %d", len(got), len(tests))
	}
	for i, want := range tests {
		g := got[i]
		if g.Topic != want.Topic || !bytes.Equal(g.Key, want.Key) || (g.Key == nil) != (want.Key == nil) || !bytes.Equal(g.Value, want.Value) {
			t.Errorf("record %d = {%q %q(nil=%v) %d bytes}; want {%q %q(nil=%v) %d bytes}",
				i, g.Topic, g.Key, g.Key == nil, len(g.Value), want.Topic, want.Key, want.Key == nil, len(want.Value))
		}
	}
}

func TestAppendFull(t *testing.T) {
	size := encodedLen(rec(0).Topic, rec(0).Key, rec(0).Value, rec(0).Headers)
	tests := []struct {
		name     string
		maxBytes int64
		fits     int
	}{
		{"exactly three", 3 * size, 3},
		{"three and a bit", 3*size + size - 1, 3},
		{"smaller than one record", size - 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, t.TempDir(), tt.maxBytes, WithSegmentBytes(2*size))
			appendRange(t, s, 0, tt.fits)
			r := rec(tt.fits)
			err := s.Append(r.Topic, r.Key, r.Value, r.Headers...)
			if !errors.Is(err, ErrFull) {
				t.Fatalf("Append(record %d) = %v; want ErrFull", tt.fits, err)
			}
			if got := s.Len(); got != tt.fits {
				t.Errorf("Len() after ErrFull = %d; want %d", got, tt.fits)
			}
			if tt.fits == 0 {
				return
			}
			// Consuming one record makes room for one more.
			consume(t, s, 1, 1)
			if err := s.Append(r.Topic, r.Key, r.Value, r.Headers...); err != nil {
				t.Fatalf("Append after consuming = %v; want nil", err)
			}
			if err := s.Append(r.Topic, r.Key, r.Value, r.Headers...); !errors.Is(err, ErrFull) {
				t.Fatalf("second Append after consuming = %v; want ErrFull", err)
			}
		})
	}
}

// TestAppendDiskFull: an Append refused by a full disk (ENOSPC), long before
// the spool's bound, leaves the spool as it was, on disk too: once space is
// freed the next Append lands after the records before it, and a reopened
// spool hands out exactly those, in order. The publisher relies on this to
// give a refused message's sequence number to the next one.
func TestAppendDiskFull(t *testing.T) {
	disk := tmpfs.Mount(t, 16<<10)
	filler := filepath.Join(disk, "filler")
	writeFile(t, filler, make([]byte, 4<<10))
	dir := filepath.Join(disk, "spool")
	s := open(t, dir, 1<<30)
	n := 0
	for ; ; n++ {
		if n > 1000 {
			t.Fatal("a 16 KiB disk took 1000 records")
		}
		r := rec(n)
		err := s.Append(r.Topic, r.Key, r.Value, r.Headers...)
		if err == nil {
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrFull) || errors.Is(err, ErrTorn) {
			t.Fatalf("Append(record %d) on a full disk = %v; want ENOSPC, not ErrFull or ErrTorn", n, err)
		}
		break
	}
	size := int64(0)
	for i := range n {
		r := rec(i)
		size += encodedLen(r.Topic, r.Key, r.Value, r.Headers)
	}
	segs := segmentFiles(t, dir)
	if len(segs) != 1 || int64(len(readFile(t, segs[0]))) != size || s.Len() != n || s.Bytes() != size {
		t.Fatalf("after the refused Append: segments %q of %d bytes, Len() %d, Bytes() %d; want one of %d bytes, %d, %d",
			segs, len(readFile(t, segs[0])), s.Len(), s.Bytes(), size, n, size)
	}
	mustRemove(t, filler)
	appendRange(t, s, n, n+1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, 1<<30)
	if got, want := values(consume(t, s, n+1, 100)), wantValues(0, n+1); !slices.Equal(got, want) {
		t.Errorf("reopened spool hands out %q; want %q", got, want)
	}
}

// TestAppendTorn: an Append whose failed write cannot be cut off the
// segment again says so (ErrTorn): the record may be found by the next Open.
// The segment here is /dev/full, which refuses every write (ENOSPC) and
// cannot be truncated.
func TestAppendTorn(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full here (%v); test skipped", err)
	}
	dir := t.TempDir()
	// A new spool appends to segment 1.
	if err := os.Symlink("/dev/full", filepath.Join(dir, "00000000000000000001.seg")); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, 1<<20)
	r := rec(0)
	if err := s.Append(r.Topic, r.Key, r.Value, r.Headers...); !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrTorn) {
		t.Fatalf("Append to /dev/full = %v; want ENOSPC and ErrTorn", err)
	}
	if s.Len() != 0 {
		t.Errorf("Len() = %d; want 0", s.Len())
	}
}

// TestRecovery damages the files of a closed spool and checks what Open
// makes of them.
func TestRecovery(t *testing.T) {
	size := encodedLen(rec(0).Topic, rec(0).Key, rec(0).Value, rec(0).Headers)
	flip := func(path string, off int64) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			b := readFile(t, path)
			b[off] ^= 0x55
			writeFile(t, path, b)
		}
	}
	tests := []struct {
		name         string
		segmentBytes int64
		damage       func(t *testing.T, dir string)
		want         []string
		skipped      int64
		discarded    int64
	}{{
		name:      "torn tail",
		damage:    func(t *testing.T, dir string) { chop(t, segmentFiles(t, dir)[0], 5) },
		want:      wantValues(0, 9),
		discarded: size - 5,
	}, {
		name:      "torn header",
		damage:    func(t *testing.T, dir string) { chop(t, segmentFiles(t, dir)[0], size-3) },
		want:      wantValues(0, 9),
		discarded: 3,
	}, {
		name: "zeros after the tail",
		damage: func(t *testing.T, dir string) {
			p := segmentFiles(t, dir)[0]
			writeFile(t, p, append(readFile(t, p), make([]byte, 100)...))
		},
		want:      wantValues(0, 10),
		discarded: 100,
	}, {
		name: "last record garbled",
		damage: func(t *testing.T, dir string) {
			flip(segmentFiles(t, dir)[0], 9*size+frameHeaderLen+3)(t, dir)
		},
		want:      wantValues(0, 9),
		discarded: size,
	}, {
		name: "corrupt record in the middle",
		damage: func(t *testing.T, dir string) {
			flip(segmentFiles(t, dir)[0], 4*size+frameHeaderLen+3)(t, dir)
		},
		want:    slices.Delete(wantValues(0, 10), 4, 5),
		skipped: 1,
	}, {
		name: "two corrupt records",
		damage: func(t *testing.T, dir string) {
			flip(segmentFiles(t, dir)[0], 0*size+frameHeaderLen)(t, dir)
			flip(segmentFiles(t, dir)[0], 8*size+4)(t, dir) // the CRC itself
		},
		want:    slices.Delete(slices.Delete(wantValues(0, 10), 8, 9), 0, 1),
		skipped: 2,
	}, {
		name:         "corrupt length in an older segment",
		segmentBytes: 4 * size,
		damage: func(t *testing.T, dir string) {
			p := segmentFiles(t, dir)[0]
			b := readFile(t, p)
			copy(b[size:], []byte{0xff, 0xff, 0xff, 0xff})
			writeFile(t, p, b)
		},
		want:      slices.Delete(wantValues(0, 10), 1, 4),
		discarded: 3 * size,
	}, {
		name:   "damaged cursor",
		damage: func(t *testing.T, dir string) { flip(filepath.Join(dir, cursorName), 2)(t, dir) },
		want:   wantValues(0, 10),
	}, {
		name:   "missing cursor",
		damage: func(t *testing.T, dir string) { mustRemove(t, filepath.Join(dir, cursorName)) },
		want:   wantValues(0, 10),
	}, {
		name: "whole segment is garbage",
		damage: func(t *testing.T, dir string) {
			writeFile(t, segmentFiles(t, dir)[0], bytes.Repeat([]byte{0xab}, 1000))
		},
		want:      nil,
		discarded: 1000,
	}, {
		name:   "stray files",
		damage: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "x.seg"), []byte("junk")) },
		want:   wantValues(0, 10),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			segBytes := cmp.Or(tt.segmentBytes, DefaultSegmentBytes)
			s := open(t, dir, 1<<20, WithSegmentBytes(segBytes))
			appendRange(t, s, 0, 10)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			tt.damage(t, dir)

			s = open(t, dir, 1<<20, WithSegmentBytes(segBytes))
			if got := s.Len(); got != len(tt.want) {
				t.Errorf("Len() after recovery = %d; want %d", got, len(tt.want))
			}
			if got := s.Skipped(); got != tt.skipped {
				t.Errorf("Skipped() = %d; want %d", got, tt.skipped)
			}
			if got := s.DiscardedBytes(); got != tt.discarded {
				t.Errorf("DiscardedBytes() = %d; want %d", got, tt.discarded)
			}
			// The spool keeps working: new records land after the
			// survivors and nothing is lost at the seam.
			appendRange(t, s, 10, 12)
			got := consume(t, s, 1000, 3)
			if want := append(slices.Clone(tt.want), wantValues(10, 12)...); !slices.Equal(values(got), want) {
				t.Errorf("consumed %q; want %q", values(got), want)
			}
			if s.Len() != 0 || s.Bytes() != 0 {
				t.Errorf("Len(), Bytes() after draining = %d, %d; want 0, 0", s.Len(), s.Bytes())
			}
		})
	}
}

// TestCorruptionAfterOpen damages a record the open spool already counted.
func TestCorruptionAfterOpen(t *testing.T) {
	dir := t.TempDir()
	size := encodedLen(rec(0).Topic, rec(0).Key, rec(0).Value, rec(0).Headers)
	s := open(t, dir, 1<<20)
	appendRange(t, s, 0, 5)
	p := segmentFiles(t, dir)[0]
	b := readFile(t, p)
	b[2*size+frameHeaderLen+1] ^= 1
	writeFile(t, p, b)

	got := consume(t, s, 1000, 2)
	if want := slices.Delete(wantValues(0, 5), 2, 3); !slices.Equal(values(got), want) {
		t.Errorf("consumed %q; want %q", values(got), want)
	}
	if s.Len() != 0 || s.Skipped() != 1 {
		t.Errorf("Len(), Skipped() = %d, %d; want 0, 1", s.Len(), s.Skipped())
	}
}

func TestReclaim(t *testing.T) {
	size := encodedLen(rec(0).Topic, rec(0).Key, rec(0).Value, rec(0).Headers)
	tests := []struct {
		name     string
		appended int
		consumed int
		segments int // segment files left
	}{
		{"nothing consumed", 10, 0, 5},
		{"first segment consumed", 10, 2, 4},
		{"half of a segment consumed", 10, 3, 4},
		{"all but one consumed", 10, 9, 1},
		{"all consumed", 10, 10, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, 1<<20, WithSegmentBytes(2*size))
			appendRange(t, s, 0, tt.appended)
			consume(t, s, tt.consumed, 1)
			files := segmentFiles(t, dir)
			if len(files) != tt.segments {
				t.Errorf("segment files = %q; want %d", files, tt.segments)
			}
			if want := int64(tt.appended-tt.consumed) * size; s.Bytes() != want {
				t.Errorf("Bytes() = %d; want %d", s.Bytes(), want)
			}
			if tt.consumed == tt.appended {
				if fi, err := os.Stat(files[0]); err != nil || fi.Size() != 0 {
					t.Errorf("drained spool's segment %s: size %d, err %v; want empty", files[0], fi.Size(), err)
				}
			}
		})
	}
}

func TestPeekNBounds(t *testing.T) {
	size := encodedLen(rec(0).Topic, rec(0).Key, rec(0).Value, rec(0).Headers)
	tests := []struct {
		n        int
		maxBytes int64
		want     int
	}{
		{n: 3, maxBytes: 1 << 20, want: 3},
		{n: 100, maxBytes: 1 << 20, want: 10},
		{n: 100, maxBytes: 2*size + 1, want: 2},
		{n: 100, maxBytes: 1, want: 1}, // always at least one
		{n: 0, maxBytes: 1 << 20, want: 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n=%d,max=%d", tt.n, tt.maxBytes), func(t *testing.T) {
			s := open(t, t.TempDir(), 1<<20, WithSegmentBytes(3*size))
			appendRange(t, s, 0, 10)
			recs, err := s.PeekN(tt.n, tt.maxBytes)
			if err != nil || len(recs) != tt.want {
				t.Fatalf("PeekN(%d, %d) = %d records, %v; want %d", tt.n, tt.maxBytes, len(recs), err, tt.want)
			}
			if err := s.Commit(tt.want + 1); err == nil {
				t.Errorf("Commit(%d) after peeking %d = nil; want error", tt.want+1, tt.want)
			}
			// Peeking does not consume.
			if again, _ := s.PeekN(tt.n, tt.maxBytes); !slices.Equal(values(again), values(recs)) {
				t.Errorf("second PeekN = %q; want %q", values(again), values(recs))
			}
			if s.Len() != 10 {
				t.Errorf("Len() after PeekN = %d; want 10", s.Len())
			}
		})
	}
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20)
	if s2, err := Open(dir, 1<<20, testLogger(t)); err == nil {
		_ = s2.Close()
		t.Fatalf("second Open(%q) = nil error; want locked", dir)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir, 1<<20)
	if err := s2.Append("t", nil, nil); err != nil {
		t.Fatalf("Append after reopen = %v", err)
	}
}

func TestClosed(t *testing.T) {
	s := open(t, t.TempDir(), 1<<20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v; want nil", err)
	}
	if err := s.Append("t", nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v; want ErrClosed", err)
	}
	if _, err := s.PeekN(1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("PeekN after Close = %v; want ErrClosed", err)
	}
}

func TestOpenInvalid(t *testing.T) {
	if _, err := Open(t.TempDir(), 0, nil); err == nil {
		t.Error("Open(maxBytes 0) = nil error; want error")
	}
	s := open(t, t.TempDir(), 1<<20)
	if err := s.Append(string(make([]byte, 70000)), nil, nil); err == nil {
		t.Error("Append(70000-byte topic) = nil; want error")
	}
	if err := s.Append("t", nil, make([]byte, MaxRecordBytes)); err == nil || errors.Is(err, ErrFull) {
		t.Errorf("Append(%d-byte value) = %v; want a size error", MaxRecordBytes, err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}
}

func chop(t *testing.T, path string, n int64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-n); err != nil {
		t.Fatal(err)
	}
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// TestDamageWhileOpen damages the files of an open spool, as an admin, a tmp
// cleaner or a failing disk would, and checks that reading skips what cannot
// be read any more, counts it, and goes on with what follows and with what is
// appended afterwards.
func TestDamageWhileOpen(t *testing.T) {
	size := encodedLen(rec(0).Topic, rec(0).Key, rec(0).Value, rec(0).Headers)
	badLength := func(seg int, off int64) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			p := segmentFiles(t, dir)[seg]
			b := readFile(t, p)
			copy(b[off:], []byte{0xff, 0xff, 0xff, 0xff})
			writeFile(t, p, b)
		}
	}
	tests := []struct {
		name         string
		segmentBytes int64
		consumed     int // records consumed before the damage
		damage       func(t *testing.T, dir string)
		want         []string // of records 0..9, after the consumed ones
		lost         int64
		discarded    int64
		// reread are the records read again after a reopen, of those
		// consumed: only where the cursor was deleted too.
		reread []string
	}{{
		name:         "older segment deleted",
		segmentBytes: 4 * size,
		damage:       func(t *testing.T, dir string) { mustRemove(t, segmentFiles(t, dir)[1]) },
		want:         append(wantValues(0, 4), wantValues(8, 10)...),
		lost:         4,
		discarded:    4 * size,
	}, {
		name:         "segment deleted while it is read",
		segmentBytes: 4 * size,
		consumed:     1,
		// The spool holds the file open: nothing is lost.
		damage: func(t *testing.T, dir string) { mustRemove(t, segmentFiles(t, dir)[0]) },
		want:   wantValues(1, 10),
	}, {
		name:      "active segment deleted",
		damage:    func(t *testing.T, dir string) { mustRemove(t, segmentFiles(t, dir)[0]) },
		lost:      10,
		discarded: 10 * size,
	}, {
		name:      "every file deleted",
		damage:    func(t *testing.T, dir string) { removeAll(t, dir) },
		lost:      10,
		discarded: 10 * size,
		// The cursor written since is gone with its file: a reopened
		// spool reads from the oldest segment again (at least once).
		reread: wantValues(10, 11),
	}, {
		name: "directory deleted",
		damage: func(t *testing.T, dir string) {
			removeAll(t, dir)
			mustRemove(t, dir)
		},
		lost:      10,
		discarded: 10 * size,
		reread:    wantValues(10, 11),
	}, {
		name:      "length damaged in the active segment",
		damage:    badLength(0, 4*size),
		want:      wantValues(0, 4),
		lost:      6,
		discarded: 6 * size,
	}, {
		name:         "length damaged in an older segment",
		segmentBytes: 4 * size,
		damage:       badLength(0, size),
		want:         append(wantValues(0, 1), wantValues(4, 10)...),
		lost:         3,
		discarded:    3 * size,
	}, {
		name:      "active segment cut short",
		damage:    func(t *testing.T, dir string) { chop(t, segmentFiles(t, dir)[0], 3*size+5) },
		want:      wantValues(0, 6),
		lost:      4,
		discarded: 4 * size,
	}, {
		// The oldest file left holds records 4..7; 6's length is hit.
		name:         "length damaged after some records were consumed",
		segmentBytes: 4 * size,
		consumed:     5,
		damage:       badLength(0, 2*size),
		want:         append(wantValues(5, 6), wantValues(8, 10)...),
		lost:         2,
		discarded:    2 * size,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, 1<<20, WithSegmentBytes(cmp.Or(tt.segmentBytes, DefaultSegmentBytes)))
			appendRange(t, s, 0, 10)
			consume(t, s, tt.consumed, 1)
			tt.damage(t, dir)

			got := consume(t, s, 1000, 3)
			if !slices.Equal(values(got), tt.want) {
				t.Errorf("consumed %q; want %q", values(got), tt.want)
			}
			if s.LostRecords() != tt.lost || s.DiscardedBytes() != tt.discarded {
				t.Errorf("LostRecords(), DiscardedBytes() = %d, %d; want %d, %d", s.LostRecords(), s.DiscardedBytes(), tt.lost, tt.discarded)
			}
			if s.Len() != 0 || s.Bytes() != 0 {
				t.Errorf("Len(), Bytes() after reading past the damage = %d, %d; want 0, 0", s.Len(), s.Bytes())
			}
			// What is appended afterwards is read, and survives a reopen.
			appendRange(t, s, 10, 12)
			if got := consume(t, s, 1, 1); !slices.Equal(values(got), wantValues(10, 11)) {
				t.Errorf("consumed after the damage %q; want %q", values(got), wantValues(10, 11))
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}
			s = open(t, dir, 1<<20)
			if got, want := consume(t, s, 1000, 3), append(tt.reread, wantValues(11, 12)...); !slices.Equal(values(got), want) {
				t.Errorf("consumed after reopening %q; want %q", values(got), want)
			}
		})
	}
}

// removeAll deletes every file of dir but the directory itself.
func removeAll(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		mustRemove(t, filepath.Join(dir, e.Name()))
	}
}

// TestReadErrorIsRetried: a segment that cannot be read for a reason other
// than damage (EIO; here a directory in its place) fails PeekN, consumes
// nothing, and is read again once it can be.
func TestReadErrorIsRetried(t *testing.T) {
	dir := t.TempDir()
	size := encodedLen(rec(0).Topic, rec(0).Key, rec(0).Value, rec(0).Headers)
	s := open(t, dir, 1<<20, WithSegmentBytes(4*size))
	appendRange(t, s, 0, 10)
	seg := segmentFiles(t, dir)[1]
	aside := seg + ".aside"
	if err := os.Rename(seg, aside); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(seg, 0o750); err != nil {
		t.Fatal(err)
	}
	got := consume(t, s, 4, 4)
	for range 3 {
		if recs, err := s.PeekN(10, 1<<20); err == nil || errors.Is(err, os.ErrNotExist) {
			t.Fatalf("PeekN with segment 2 unreadable = %d records, %v; want an error", len(recs), err)
		}
	}
	if s.Len() != 6 || s.LostRecords() != 0 {
		t.Errorf("Len(), LostRecords() after failed reads = %d, %d; want 6, 0", s.Len(), s.LostRecords())
	}
	mustRemove(t, seg)
	if err := os.Rename(aside, seg); err != nil {
		t.Fatal(err)
	}
	got = append(got, consume(t, s, 1000, 3)...)
	if want := wantValues(0, 10); !slices.Equal(values(got), want) {
		t.Errorf("consumed %q; want %q", values(got), want)
	}
}

// TestCommitPersistFails: a Commit that cannot finish (here: the next
// segment cannot be created) consumes its records all the same and says so;
// Persist and later Commits try again, and a reopened spool does not hand the
// records out again once one succeeded.
func TestCommitPersistFails(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20)
	appendRange(t, s, 0, 3)
	next := filepath.Join(dir, "00000000000000000002.seg")
	if got := segmentFiles(t, dir); len(got) != 1 || filepath.Base(got[0]) != "00000000000000000001.seg" {
		t.Fatalf("segment files = %q; want only segment 1", got)
	}
	if err := os.Mkdir(next, 0o750); err != nil {
		t.Fatal(err)
	}
	recs, err := s.PeekN(10, 1<<20)
	if err != nil || len(recs) != 3 {
		t.Fatalf("PeekN = %d records, %v; want 3, nil", len(recs), err)
	}
	if err := s.Commit(3); err == nil {
		t.Fatalf("Commit(3) with segment 2 uncreatable = nil; want an error")
	}
	if s.Len() != 0 {
		t.Errorf("Len() after a Commit that could not persist = %d; want 0", s.Len())
	}
	if err := s.Persist(); err == nil {
		t.Errorf("Persist() with segment 2 still uncreatable = nil; want an error")
	}
	// Appends still land, and are read, in the segment in use; their
	// Commit cannot finish either.
	appendRange(t, s, 3, 4)
	recs, err = s.PeekN(10, 1<<20)
	if err != nil || !slices.Equal(values(recs), wantValues(3, 4)) {
		t.Fatalf("PeekN = %q, %v; want %q", values(recs), err, wantValues(3, 4))
	}
	if err := s.Commit(1); err == nil {
		t.Errorf("Commit(1) with segment 2 still uncreatable = nil; want an error")
	}
	mustRemove(t, next)
	if err := s.Persist(); err != nil {
		t.Fatalf("Persist() = %v; want nil", err)
	}
	if err := s.Persist(); err != nil {
		t.Fatalf("Persist() with nothing left to do = %v; want nil", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, 1<<20)
	if s.Len() != 0 {
		t.Errorf("Len() after reopening = %d; want 0: the records were committed", s.Len())
	}
}
