// Package spool is a bounded, crash-safe, append-only FIFO of Kafka messages
// on local disk. The collector's publisher spools messages while the brokers
// are unreachable and replays them, oldest first, when they are back.
//
// # Layout
//
// A spool directory holds segment files named by a 20-digit sequence number
// ("00000000000000000007.seg"), a cursor file holding the read position
// (segment and offset, with a CRC) and a LOCK file that keeps a second
// process out. Records are framed as length, CRC-32C and payload (see
// record.go). Segments are at most 16 MiB by default; a segment is deleted as
// soon as the read position passes its end, and when the spool drains empty
// its only segment is replaced by a fresh one, so consumed space is
// reclaimed.
//
// # Guarantees
//
// Append writes the record and fsyncs the segment before it returns nil: an
// appended record survives a process crash, a kernel crash and a power loss
// (on storage that honours fsync). Commit writes and fsyncs the cursor
// before it returns. Records are handed out at least once: a crash after the
// consumer delivered records but before Commit returned replays those records
// (at most the records of one PeekN) on the next Open. A clean Close loses
// and replays nothing.
//
// On Open the spool recovers what a crash left behind: a torn record at the
// end of the newest segment is truncated, a record whose checksum fails is
// skipped and counted (see Skipped), and an unreadable tail of an older
// segment is skipped. Each case is logged. Nothing on disk can make Open or
// the readers panic.
//
// Damage found while reading (PeekN) is handled the same way, so that one
// bad spot does not stop the replay: a record whose checksum fails is
// skipped, and the rest of a segment whose framing is damaged, that is
// shorter than was written, or whose file was deleted, is skipped, its
// records counted as lost (see LostRecords and DiscardedBytes) and logged.
// Other read errors (EIO) are returned, and PeekN can be called again; the
// segment file is opened anew each time.
package spool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ErrFull is returned by Append when the record would take the spool over
// its size bound.
var ErrFull = errors.New("spool: full")

// ErrTorn is wrapped by the error of an Append whose failed write could not
// be cut off the segment again: part of the record, or all of it, may have
// stayed on disk, where the next Open can find it and hand it out. The
// segment is sealed before those bytes; later records go to a new one.
var ErrTorn = errors.New("spool: failed append left on disk")

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("spool: closed")

// DefaultSegmentBytes is the size at which the spool starts a new segment.
const DefaultSegmentBytes = 16 << 20

const (
	segmentSuffix = ".seg"
	cursorName    = "cursor"
	lockName      = "LOCK"
	cursorLen     = 8 + 8 + 4
)

// Option changes how Open sets up a spool.
type Option func(*Spool)

// WithSegmentBytes sets the size at which a new segment is started (default
// DefaultSegmentBytes). A record larger than n gets a segment of its own.
func WithSegmentBytes(n int64) Option {
	return func(s *Spool) {
		if n > 0 {
			s.segmentBytes = n
		}
	}
}

// Spool is an on-disk FIFO of records. Its methods are safe for concurrent
// use; readers (PeekN, Commit) are expected to be a single goroutine.
type Spool struct {
	dir          string
	maxBytes     int64
	segmentBytes int64
	logger       *slog.Logger

	mu     sync.Mutex
	closed bool
	lock   *os.File
	cursor *os.File
	// segs are the live segments, oldest first. segs[0] holds the read
	// position; the last one is the active segment that Append writes to.
	segs  []*segment
	w     *os.File // active segment, append-only
	r     *os.File // segment being read, cached between reads
	rSeq  uint64
	read  position
	count int   // unconsumed records, corrupt ones excluded
	bytes int64 // unconsumed bytes, framing and corrupt records included
	// bad holds the positions of corrupt records found by Open that the
	// read position has not passed yet.
	bad     map[position]bool
	skipped int64
	// discarded counts the bytes of torn or unreadable segment tails cut
	// off at Open or skipped by PeekN.
	discarded int64
	// lost counts the records in the tails PeekN skipped.
	lost   int64
	peeked []mark
	wbuf   []byte
	// dirty says that a Commit consumed records but could not finish
	// advance (write the cursor, create or remove a segment file); the
	// next Commit or Persist tries again. doomed are the consumed
	// segments whose files are still to be removed.
	dirty  bool
	doomed []uint64
	// torn says that a failed Append left bytes in the active segment
	// past its end that could not be cut off (ErrTorn). A record appended
	// behind them could not be read: reading stops at the torn bytes. So
	// the next Append starts a new segment first, and the torn one ends
	// where its last good record does.
	torn bool
}

type segment struct {
	seq uint64
	// end is where readable data stops: the file size for the active
	// segment, possibly less for an older one with an unreadable tail.
	end int64
	// records are the good records of the segment not yet consumed.
	records int
}

type position struct {
	seq uint64
	off int64
}

// mark is one frame handed past by PeekN: the position after it, its size
// and whether it was a good record (false: a corrupt one that was skipped).
// A lost mark is the unreadable rest of a segment instead, err saying why.
type mark struct {
	after  position
	bytes  int64
	record bool
	known  bool // corrupt record that Open already found
	lost   bool
	err    error
}

// Open opens the spool in dir, creating the directory if needed, and
// recovers its contents. maxBytes bounds the unconsumed records (framing
// included) that the spool holds; on disk it may use up to one more segment
// of already-consumed records. Open reads every live segment once to
// validate it, so a full 1 GiB spool costs about a second of reading.
func Open(dir string, maxBytes int64, logger *slog.Logger, opts ...Option) (*Spool, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("spool: max bytes must be positive, got %d", maxBytes)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Spool{
		dir:          dir,
		maxBytes:     maxBytes,
		segmentBytes: DefaultSegmentBytes,
		logger:       logger,
		bad:          map[position]bool{},
	}
	for _, o := range opts {
		o(s)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("spool: create directory: %w", err)
	}
	lock, err := lockDir(filepath.Join(dir, lockName))
	if err != nil {
		return nil, err
	}
	s.lock = lock
	if err := s.recover(); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

// recover rebuilds the in-memory state from the directory.
func (s *Spool) recover() error {
	seqs, err := s.listSegments()
	if err != nil {
		return err
	}
	s.cursor, err = os.OpenFile(filepath.Join(s.dir, cursorName), os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("spool: open cursor: %w", err)
	}
	cur, ok, err := s.readCursor()
	if err != nil {
		return err
	}
	if !ok && len(seqs) > 0 {
		cur = position{seq: seqs[0]}
	}

	// Segments before the cursor were consumed; a crash between moving the
	// cursor and deleting them leaves them behind.
	var live []uint64
	for _, seq := range seqs {
		if seq < cur.seq {
			if err := os.Remove(s.segmentPath(seq)); err != nil {
				return fmt.Errorf("spool: remove consumed segment %d: %w", seq, err)
			}
			continue
		}
		live = append(live, seq)
	}
	if len(live) > 0 && live[0] != cur.seq {
		s.logger.Warn("spool cursor names a missing segment, reading from the oldest one",
			"dir", s.dir, "cursor_segment", cur.seq, "segment", live[0])
		cur = position{seq: live[0]}
	}

	for i, seq := range live {
		start := int64(0)
		if seq == cur.seq {
			start = cur.off
		}
		seg, err := s.scan(seq, start, i == len(live)-1)
		if err != nil {
			return err
		}
		if seq == cur.seq && cur.off > seg.end {
			s.logger.Warn("spool cursor beyond segment end, treating segment as consumed",
				"dir", s.dir, "segment", seq, "offset", cur.off, "end", seg.end)
			cur.off = seg.end
		}
		s.segs = append(s.segs, seg)
	}
	s.read = cur

	if s.count == 0 {
		// Nothing left to deliver (or only corrupt records): start afresh.
		clear(s.bad)
		s.bytes = 0
		next := cur.seq + 1
		if len(live) > 0 {
			next = max(next, live[len(live)-1]+1)
		}
		if err := s.createActive(next); err != nil {
			return err
		}
		old := s.segs
		s.segs = []*segment{{seq: next}}
		s.read = position{seq: next}
		if err := s.writeCursor(); err != nil {
			return err
		}
		for _, seg := range old {
			if err := os.Remove(s.segmentPath(seg.seq)); err != nil {
				return fmt.Errorf("spool: remove consumed segment %d: %w", seg.seq, err)
			}
		}
		return nil
	}

	active := s.segs[len(s.segs)-1]
	s.w, err = os.OpenFile(s.segmentPath(active.seq), os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("spool: open segment %d: %w", active.seq, err)
	}
	if s.bytes > s.maxBytes {
		s.logger.Warn("spool holds more than its bound, appends fail until it drains",
			"dir", s.dir, "bytes", s.bytes, "max_bytes", s.maxBytes)
	}
	s.logger.Info("spool recovered", "dir", s.dir, "messages", s.count, "bytes", s.bytes,
		"segments", len(s.segs))
	return s.advance()
}

// scan validates segment seq from offset start, counting its records. The
// newest segment (last) is truncated after its last intact record.
func (s *Spool) scan(seq uint64, start int64, last bool) (*segment, error) {
	path := s.segmentPath(seq)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spool: read segment %d: %w", seq, err)
	}
	seg := &segment{seq: seq, end: int64(len(data))}
	off := min(start, int64(len(data)))
	for off < int64(len(data)) {
		_, n, err := decodeRecord(data[off:])
		if err == nil {
			s.count++
			seg.records++
			s.bytes += int64(n)
			off += int64(n)
			continue
		}
		torn := errors.Is(err, errTruncated) || errors.Is(err, errLength) ||
			(last && off+int64(n) == int64(len(data)))
		if !torn {
			s.logger.Warn("spool record corrupt, skipping it",
				"dir", s.dir, "segment", seq, "offset", off, "bytes", n, "err", err)
			s.bad[position{seq, off}] = true
			s.skipped++
			s.bytes += int64(n)
			off += int64(n)
			continue
		}
		seg.end = off
		s.discarded += int64(len(data)) - off
		if !last {
			s.logger.Warn("spool segment has an unreadable tail, skipping it",
				"dir", s.dir, "segment", seq, "offset", off, "bytes", int64(len(data))-off, "err", err)
			break
		}
		s.logger.Warn("spool truncating torn record",
			"dir", s.dir, "segment", seq, "offset", off, "bytes", int64(len(data))-off, "err", err)
		if err := truncate(path, off); err != nil {
			return nil, err
		}
		break
	}
	return seg, nil
}

func truncate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("spool: truncate torn record: %w", err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spool: truncate torn record: %w", err)
	}
	return nil
}

// Append adds a record, with the given Kafka headers, at the tail of the
// spool and syncs it to disk. It returns an error wrapping ErrFull if the
// record would take the spool over its bound. After any error the spool
// holds the records it held, and no part of this one: a write that failed (a
// full disk: ENOSPC) is cut off the segment again, unless the error also
// wraps ErrTorn. After ErrTorn the segment is sealed at its last good record
// and the next Append starts a new one (failing, and trying again at the
// next, while it cannot be created), so that no record accepted later lands
// behind the torn bytes, where reading would stop.
func (s *Spool) Append(topic string, key, value []byte, headers ...Header) error {
	if len(topic) > MaxTopicBytes {
		return fmt.Errorf("spool: topic name of %d bytes is too long (at most %d)", len(topic), MaxTopicBytes)
	}
	if err := checkHeaders(headers); err != nil {
		return err
	}
	n := encodedLen(topic, key, value, headers)
	if n > MaxRecordBytes {
		return fmt.Errorf("spool: record of %d bytes exceeds the limit of %d", n, MaxRecordBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.bytes+n > s.maxBytes {
		return fmt.Errorf("%w: %d of %d bytes used, record needs %d", ErrFull, s.bytes, s.maxBytes, n)
	}
	active := s.segs[len(s.segs)-1]
	if s.torn || active.end > 0 && active.end+n > s.segmentBytes {
		if err := s.rollover(); err != nil {
			if s.torn {
				return fmt.Errorf("spool: seal segment %d after a torn append: %w", active.seq, err)
			}
			return err
		}
		active = s.segs[len(s.segs)-1]
	}
	s.wbuf = appendRecord(s.wbuf[:0], topic, key, value, headers)
	_, err := s.w.Write(s.wbuf)
	if err == nil {
		err = s.w.Sync()
	}
	if cap(s.wbuf) > 1<<20 {
		s.wbuf = nil // do not pin a buffer sized for one large record
	}
	if err != nil {
		// Cut off whatever part of the record reached the file so the
		// next append does not land behind garbage. If even that fails,
		// Open's torn-tail recovery is the fallback.
		if terr := s.w.Truncate(active.end); terr != nil {
			err = errors.Join(err, fmt.Errorf("%w: %w", ErrTorn, terr))
			s.torn = true
		}
		return fmt.Errorf("spool: append to segment %d: %w", active.seq, err)
	}
	active.end += n
	active.records++
	s.count++
	s.bytes += n
	return nil
}

// rollover starts a new active segment.
func (s *Spool) rollover() error {
	active := s.segs[len(s.segs)-1]
	old := s.w
	if err := s.createActive(active.seq + 1); err != nil {
		return err
	}
	s.segs = append(s.segs, &segment{seq: active.seq + 1})
	s.torn = false
	if err := old.Close(); err != nil {
		return fmt.Errorf("spool: close segment %d: %w", active.seq, err)
	}
	return nil
}

// createActive creates segment seq and makes it the append target. The
// directory is synced so the new file survives a power loss.
func (s *Spool) createActive(seq uint64) error {
	f, err := os.OpenFile(s.segmentPath(seq), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o640)
	if errors.Is(err, fs.ErrNotExist) {
		// The directory was removed under the spool (a tmp cleaner):
		// without it nothing appended could be read again.
		s.logger.Warn("spool directory gone, creating it again", "dir", s.dir)
		if err = os.MkdirAll(s.dir, 0o750); err == nil {
			f, err = os.OpenFile(s.segmentPath(seq), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o640)
		}
	}
	if err != nil {
		return fmt.Errorf("spool: create segment %d: %w", seq, err)
	}
	if err := syncDir(s.dir); err != nil {
		_ = f.Close()
		return err
	}
	s.w = f
	return nil
}

// PeekN returns up to n of the oldest records without consuming them. It
// stops early once the records' encoded size would exceed maxBytes, but
// always returns at least one record if the spool is not empty. Corrupt
// records are skipped and counted; so is the rest of a segment that cannot
// be read any further (damaged framing, a file shorter than written or
// deleted): its records are lost, and when it is the segment Append writes
// to, a new one is started. Any other read error is returned, with nothing
// consumed. Call Commit to consume records returned by the latest PeekN.
func (s *Spool) PeekN(n int, maxBytes int64) ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	s.peeked = s.peeked[:0]
	var (
		recs  []Record
		bytes int64
		pos   = s.read
		idx   = 0
	)
	for len(recs) < n {
		seg := s.segs[idx]
		if pos.off >= seg.end {
			if idx == len(s.segs)-1 {
				break
			}
			idx++
			pos = position{seq: s.segs[idx].seq}
			continue
		}
		rec, fl, err := s.readAt(seg, pos.off)
		switch {
		case errors.Is(err, errChecksum) || errors.Is(err, errPayload):
			known := s.bad[pos]
			if !known {
				s.logger.Warn("spool record corrupt, skipping it",
					"dir", s.dir, "segment", seg.seq, "offset", pos.off, "bytes", fl, "err", err)
			}
			pos.off += fl
			s.peeked = append(s.peeked, mark{after: pos, bytes: fl, known: known})
			continue
		case errors.Is(err, errLength) || errors.Is(err, errTruncated) || errors.Is(err, fs.ErrNotExist):
			// Nothing more of this segment can be read; retrying would
			// stop the replay for good. Open would skip the same.
			if idx == len(s.segs)-1 {
				// Later appends must land where the spool knows their
				// offsets, in a file that exists.
				if err := s.rollover(); err != nil {
					return nil, err
				}
			}
			end := position{seq: seg.seq, off: seg.end}
			s.peeked = append(s.peeked, mark{after: end, bytes: seg.end - pos.off, lost: true, err: err})
			pos = end
			continue
		case err != nil:
			return nil, fmt.Errorf("spool: read segment %d at offset %d: %w", seg.seq, pos.off, err)
		}
		if len(recs) > 0 && bytes+fl > maxBytes {
			break
		}
		pos.off += fl
		bytes += fl
		recs = append(recs, rec)
		s.peeked = append(s.peeked, mark{after: pos, bytes: fl, record: true})
	}
	if len(recs) == 0 && len(s.peeked) > 0 {
		// Only corrupt records or lost tails: consume them now, nobody
		// will Commit.
		if err := s.commit(0); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// readAt reads and decodes the frame at off in seg. A file shorter than seg
// says reads as errTruncated. After any other failure to read the file is
// closed, so that the next read opens it anew.
func (s *Spool) readAt(seg *segment, off int64) (Record, int64, error) {
	if s.r == nil || s.rSeq != seg.seq {
		s.closeReader()
		f, err := os.Open(s.segmentPath(seg.seq))
		if err != nil {
			return Record{}, 0, err
		}
		s.r, s.rSeq = f, seg.seq
	}
	var hdr [frameHeaderLen]byte
	if seg.end-off < frameHeaderLen {
		return Record{}, 0, errTruncated
	}
	if _, err := s.r.ReadAt(hdr[:], off); err != nil {
		if errors.Is(err, io.EOF) {
			return Record{}, 0, errTruncated
		}
		s.closeReader()
		return Record{}, 0, err
	}
	fl, err := frameLen(hdr[:])
	if err != nil {
		return Record{}, 0, err
	}
	if seg.end-off < int64(fl) {
		return Record{}, 0, errTruncated
	}
	buf := make([]byte, fl)
	if _, err := s.r.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return Record{}, 0, errTruncated
		}
		s.closeReader()
		return Record{}, 0, err
	}
	rec, _, err := decodeRecord(buf)
	return rec, int64(fl), err
}

func (s *Spool) closeReader() {
	if s.r != nil {
		_ = s.r.Close()
		s.r = nil
	}
}

// Commit consumes the first n records returned by the latest PeekN (and any
// corrupt records or lost tails PeekN skipped among them), and persists the
// new read position before it returns. If persisting fails (the cursor
// cannot be written, a segment file cannot be created or removed), the
// records are consumed all the same and the error says why: until a later
// Commit or Persist succeeds, a crash hands them out again.
func (s *Spool) Commit(n int) error {
	if n <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.commit(n)
}

func (s *Spool) commit(n int) error {
	i, records := 0, 0
	for ; i < len(s.peeked) && records < n; i++ {
		if s.peeked[i].record {
			records++
		}
	}
	if records < n {
		return fmt.Errorf("spool: commit %d records, only %d peeked", n, records)
	}
	// Corrupt records right after the last committed one go too.
	for i < len(s.peeked) && !s.peeked[i].record {
		i++
	}
	if i == 0 {
		return nil
	}
	for _, m := range s.peeked[:i] {
		s.bytes -= m.bytes
		seg := s.segment(m.after.seq)
		switch {
		case m.record:
			s.count--
			seg.records--
		case m.lost:
			s.logger.Error("spool segment unreadable, skipping the rest of it; its messages are lost",
				"dir", s.dir, "segment", seg.seq, "offset", m.after.off-m.bytes, "bytes", m.bytes,
				"messages", seg.records, "err", m.err)
			s.count -= seg.records
			s.lost += int64(seg.records)
			s.discarded += m.bytes
			seg.records = 0
		case m.known:
			delete(s.bad, position{seq: m.after.seq, off: m.after.off - m.bytes})
		default:
			// Corrupted after Open counted it as a good record.
			s.skipped++
			s.count--
			seg.records--
		}
	}
	s.read = s.peeked[i-1].after
	s.peeked = s.peeked[:0]
	return s.advance()
}

// segment returns the live segment seq. Marks only name live segments; a
// segment that is not would get a throwaway one, which leaves the counts as
// they were.
func (s *Spool) segment(seq uint64) *segment {
	for _, seg := range s.segs {
		if seg.seq == seq {
			return seg
		}
	}
	return &segment{seq: seq}
}

// advance deletes segments the read position has passed, replaces the active
// segment with an empty one when the spool drained, and persists the cursor.
// What it could not do is left for the next call (dirty).
func (s *Spool) advance() error {
	s.dirty = true
	for len(s.segs) > 1 && (s.segs[0].seq < s.read.seq || s.read.off >= s.segs[0].end) {
		s.doomed = append(s.doomed, s.segs[0].seq)
		s.segs = s.segs[1:]
		if s.read.seq < s.segs[0].seq {
			s.read = position{seq: s.segs[0].seq}
		}
	}
	if active := s.segs[0]; len(s.segs) == 1 && active.end > 0 && s.read.off >= active.end {
		old := s.w
		if err := s.createActive(active.seq + 1); err != nil {
			return err
		}
		if err := old.Close(); err != nil {
			s.logger.Warn("spool closing a drained segment failed", "dir", s.dir, "segment", active.seq, "err", err)
		}
		s.doomed = append(s.doomed, active.seq)
		s.segs[0] = &segment{seq: active.seq + 1}
		s.read = position{seq: active.seq + 1}
		// Records that a crash left uncounted cannot remain; keep the
		// gauges honest.
		s.count, s.bytes = 0, 0
	}
	// The cursor goes first: a crash before the removals leaves segments
	// that the next Open recognises as consumed.
	if err := s.writeCursor(); err != nil {
		return err
	}
	for len(s.doomed) > 0 {
		seq := s.doomed[0]
		if s.rSeq == seq {
			s.closeReader()
		}
		// A file already gone (deleted under the spool) is as good as
		// removed.
		if err := os.Remove(s.segmentPath(seq)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("spool: remove consumed segment %d: %w", seq, err)
		}
		s.doomed = s.doomed[1:]
	}
	s.dirty = false
	return nil
}

// Persist finishes what a failed Commit left undone: it writes the read
// position and creates or removes segment files as that Commit would have.
// It returns nil at once when nothing is left undone.
func (s *Spool) Persist() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if !s.dirty {
		return nil
	}
	return s.advance()
}

// Len returns the number of records not yet consumed.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// Bytes returns the encoded size of the records not yet consumed.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Skipped returns the number of corrupt records found since Open. They are
// never handed out; Len does not count them.
func (s *Spool) Skipped() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skipped
}

// DiscardedBytes returns the bytes of torn or unreadable segment tails
// that Open cut off or PeekN skipped (each logged): a record torn by a crash
// while it was appended, the unreadable rest of a damaged segment, or a
// segment whose file was deleted.
func (s *Spool) DiscardedBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.discarded
}

// LostRecords returns the records that PeekN skipped since Open because the
// rest of their segment could not be read (damaged framing, a file shorter
// than written or deleted). Records in tails that Open cut off are not
// counted: their number cannot be known (see DiscardedBytes).
func (s *Spool) LostRecords() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// Close syncs and closes the spool, first trying once more to persist what a
// failed Commit left undone. Records not yet committed stay on disk for the
// next Open. Close is idempotent.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.dirty {
		// A last try, so that the next Open does not hand out again
		// what was consumed.
		err = s.advance()
	}
	if s.w != nil {
		err = errors.Join(err, s.w.Sync())
	}
	return errors.Join(err, s.closeFiles())
}

func (s *Spool) closeFiles() error {
	var errs []error
	for _, f := range []*os.File{s.w, s.r, s.cursor, s.lock} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	s.w, s.r, s.cursor, s.lock = nil, nil, nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("spool: close: %w", err)
	}
	return nil
}

func (s *Spool) segmentPath(seq uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", seq, segmentSuffix))
}

// listSegments returns the sequence numbers of the segment files, ascending.
func (s *Spool) listSegments() ([]uint64, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("spool: list segments: %w", err)
	}
	var seqs []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), segmentSuffix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		seq, err := strconv.ParseUint(name, 10, 64)
		if err != nil || seq == 0 {
			s.logger.Warn("spool ignoring unexpected file", "dir", s.dir, "file", e.Name())
			continue
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs, nil
}

// readCursor reads the persisted read position. ok is false when there is
// none or it is damaged (logged); the caller then reads from the oldest
// segment.
func (s *Spool) readCursor() (position, bool, error) {
	var b [cursorLen]byte
	n, err := s.cursor.ReadAt(b[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return position{}, false, fmt.Errorf("spool: read cursor: %w", err)
	}
	if n == 0 {
		return position{}, false, nil
	}
	if n < cursorLen || crc32.Checksum(b[:16], castagnoli) != binary.BigEndian.Uint32(b[16:]) {
		s.logger.Warn("spool cursor damaged, replaying from the oldest segment", "dir", s.dir)
		return position{}, false, nil
	}
	off := binary.BigEndian.Uint64(b[8:])
	if off > math.MaxInt64 {
		s.logger.Warn("spool cursor damaged, replaying from the oldest segment", "dir", s.dir)
		return position{}, false, nil
	}
	return position{seq: binary.BigEndian.Uint64(b[:]), off: int64(off)}, true, nil
}

// writeCursor persists the read position. The 20-byte record is rewritten
// in place; its CRC catches a torn write, after which Open falls back to the
// oldest segment.
func (s *Spool) writeCursor() error {
	var b [cursorLen]byte
	binary.BigEndian.PutUint64(b[:], s.read.seq)
	binary.BigEndian.PutUint64(b[8:], uint64(s.read.off))
	binary.BigEndian.PutUint32(b[16:], crc32.Checksum(b[:16], castagnoli))
	_, err := s.cursor.WriteAt(b[:], 0)
	if err == nil {
		err = s.cursor.Sync()
	}
	if err != nil {
		return fmt.Errorf("spool: write cursor: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("spool: sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("spool: sync directory: %w", err)
	}
	return nil
}
