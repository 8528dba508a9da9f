package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// SWF field positions (0-based), in the Parallel Workloads Archive's order.
const (
	swfJob = iota
	swfSubmit
	swfWait
	swfRun
	swfProcs
	swfAvgCPU
	swfUsedMem
	swfReqProcs
	swfReqTime
	swfReqMem
	swfStatus
	swfUser
	swfGroup
	swfExecutable
	swfQueue
	swfPartition
	swfPreceding
	swfThink
	swfFields // 18
)

var swfFieldNames = [swfFields]string{
	"job number", "submit time", "wait time", "run time", "allocated processors",
	"average CPU time", "used memory", "requested processors", "requested time",
	"requested memory", "status", "user id", "group id", "executable number",
	"queue number", "partition number", "preceding job", "think time",
}

const (
	// maxSWFLine is the longest SWF line read; a longer one is rejected as
	// "line_too_long" (18 numbers fit in a few hundred bytes).
	maxSWFLine = 64 << 10
	// maxSeconds is the longest duration time.Duration holds (about 292 years).
	maxSeconds = math.MaxInt64 / int64(time.Second)
	// maxUnixStart is 9999-12-31T23:59:59Z, the latest UnixStartTime accepted.
	maxUnixStart = 253402300799
)

// swfState maps the SWF status field to a Job state. The archive defines 0
// failed, 1 completed, 2 partial execution to be continued, 3 last partial
// execution (the job completed), 4 partial execution that failed, 5 cancelled;
// 2 says nothing of the job's outcome, so it stays unknown like -1.
var swfState = map[int64]string{0: "FAILED", 1: "COMPLETED", 3: "COMPLETED", 4: "FAILED", 5: "CANCELLED"}

// ReadSWF reads a trace in the Standard Workload Format of the Parallel
// Workloads Archive: header comments starting with ";" and then one job a
// line, 18 whitespace-separated numbers, -1 for unknown.
//
// Header comments before the first job set the time origin (UnixStartTime,
// seconds; 0 when absent), the machine size (Trace.MaxProcs: MaxProcs, else
// MaxNodes) and Trace.TimeZone (TimeZoneString). A header value the reader
// uses that is not a number in range (UnixStartTime from 0 to 9999-12-31,
// MaxProcs and MaxNodes -1 to 4294967295) makes ReadSWF fail with
// ErrBadHeader, naming the line and the field.
//
// Jobs map as follows: Submit = UnixStartTime + submit time (UTC); Wait, Run
// and ReqTime are the wait, run and requested times; Start = Submit+Wait and
// End = Start+Run where those are known; Procs and ReqProcs are the allocated
// and requested processors; User, Group and Executable are the decimal ids;
// Queue is the queue number, followed by "/" and the partition number when the
// partition is known (so "/1" is partition 1 of an unknown queue); GPUs and
// Nodes are -1. State is COMPLETED for status 1 and 3, FAILED for 0 and 4,
// CANCELLED for 5, and "" otherwise.
//
// A job line with other than 18 fields, a field that is not an integer (the
// average CPU time and used memory, which are averages, may be decimals), a
// negative submit time, another negative value than -1, a time beyond what
// time.Duration holds, a requested time or a processor count above
// 4294967295 (what job_events stores), or a job number written in more than
// 1004 bytes is rejected and
// counted in the Trace with its line number and reason ("bad_field_count",
// "bad_number", "negative_submit", "negative_value", "out_of_range",
// "line_too_long", "bad_string"); reading goes on. ReadSWF
// returns an error only when r fails or the header is bad.
func ReadSWF(r io.Reader) (*Trace, error) {
	t := newTrace("swf")
	br := bufio.NewReaderSize(r, maxSWFLine)
	p := swfParser{
		t:        t,
		maxProcs: -1,
		maxNodes: -1,
		ids:      make(map[int64]string),
		queues:   make(map[[2]int64]string),
	}
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			comment := bytes.HasPrefix(trimSpace(line), []byte(";"))
			for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of the line
				_, err = br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("trace: swf: read line %d: %w", lineNo, err)
			}
			if !comment { // a long comment is still only a comment
				t.reject(lineNo, "line_too_long", func() string {
					return fmt.Sprintf("longer than %d bytes", maxSWFLine)
				})
			}
			if err != nil {
				break
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("trace: swf: read line %d: %w", lineNo, err)
		}
		if len(line) > 0 {
			if lineNo == 1 {
				line = bytes.TrimPrefix(line, []byte("\uFEFF")) // byte-order mark
			}
			if herr := p.line(lineNo, line); herr != nil {
				return nil, herr
			}
		}
		if err != nil { // io.EOF
			break
		}
	}
	t.Jobs = p.jobs.jobs()
	switch {
	case p.maxProcs > 0:
		t.MaxProcs = int(p.maxProcs)
	case p.maxNodes > 0:
		t.MaxProcs = int(p.maxNodes)
	}
	return t, nil
}

type swfParser struct {
	t        *Trace
	start    int64 // UnixStartTime
	maxProcs int64 // -1 when absent
	maxNodes int64 // -1 when absent
	seenJob  bool  // header comments after the first accepted job are plain comments
	jobs     jobList
	ids      map[int64]string
	queues   map[[2]int64]string
	fields   [swfFields][]byte
	vals     [swfFields]int64
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// line handles one line; it returns an error only for a bad header.
func (p *swfParser) line(lineNo int, line []byte) error {
	line = trimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if line[0] == ';' {
		if p.seenJob {
			return nil
		}
		return p.header(lineNo, line[1:])
	}
	// Split into fields without allocating.
	n := 0
	for i := 0; i < len(line); {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			break
		}
		j := i
		for j < len(line) && !isSpace(line[j]) {
			j++
		}
		if n < swfFields {
			p.fields[n] = line[i:j]
		}
		n++
		i = j
	}
	t := p.t
	if n != swfFields {
		t.reject(lineNo, "bad_field_count", func() string {
			return fmt.Sprintf("%d fields, want %d", n, swfFields)
		})
		return nil
	}

	for i := range swfFields {
		f := p.fields[i]
		if i == swfAvgCPU || i == swfUsedMem {
			// Averages: the archive's own logs write "142.00". The value is
			// only checked, Job has no field for it.
			v, err := strconv.ParseFloat(string(f), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				t.reject(lineNo, "bad_number", func() string {
					return fmt.Sprintf("field %d (%s) %q: not a number", i+1, swfFieldNames[i], f)
				})
				return nil
			}
			switch {
			case v == -1:
				p.vals[i] = -1
			case v < 0:
				p.vals[i] = -2 // negative_value below
			default:
				p.vals[i] = 0
			}
			continue
		}
		v, ok, inRange := parseInt(f)
		if !ok {
			t.reject(lineNo, "bad_number", func() string {
				return fmt.Sprintf("field %d (%s) %q: not an integer", i+1, swfFieldNames[i], f)
			})
			return nil
		}
		if !inRange {
			t.reject(lineNo, "out_of_range", func() string {
				return fmt.Sprintf("field %d (%s) %q: out of range", i+1, swfFieldNames[i], f)
			})
			return nil
		}
		p.vals[i] = v
	}
	v := &p.vals
	if v[swfSubmit] < 0 {
		t.reject(lineNo, "negative_submit", func() string {
			return fmt.Sprintf("field 2 (submit time) %q", p.fields[swfSubmit])
		})
		return nil
	}
	for i := range swfFields {
		if v[i] < -1 {
			t.reject(lineNo, "negative_value", func() string {
				return fmt.Sprintf("field %d (%s) %q: negative and not -1", i+1, swfFieldNames[i], p.fields[i])
			})
			return nil
		}
	}
	for _, i := range [...]int{swfSubmit, swfWait, swfRun} {
		if v[i] > maxSeconds {
			t.reject(lineNo, "out_of_range", func() string {
				return fmt.Sprintf("field %d (%s) %q: more seconds than a duration holds", i+1, swfFieldNames[i], p.fields[i])
			})
			return nil
		}
	}
	// What a job event stores as a number (job_events: UInt32); the times
	// above it stores as times, which RejectTimesOutside checks.
	for _, i := range [...]int{swfProcs, swfReqProcs, swfReqTime} {
		if v[i] > maxValue {
			t.reject(lineNo, "out_of_range", func() string {
				return fmt.Sprintf("field %d (%s) %q: more than %d, the most a job event holds", i+1, swfFieldNames[i], p.fields[i], maxValue)
			})
			return nil
		}
	}
	if len(p.fields[swfJob]) > maxIDLen { // only zeros make a number this long
		t.reject(lineNo, "bad_string", func() string {
			return fmt.Sprintf("field 1 (%s): %d bytes, more than %d", swfFieldNames[swfJob], len(p.fields[swfJob]), maxIDLen)
		})
		return nil
	}

	j := Job{
		Line:       lineNo,
		ID:         string(p.fields[swfJob]),
		User:       p.id(v[swfUser]),
		Group:      p.id(v[swfGroup]),
		Executable: p.id(v[swfExecutable]),
		Queue:      p.queue(v[swfQueue], v[swfPartition]),
		State:      swfState[v[swfStatus]],
		Submit:     time.Unix(p.start+v[swfSubmit], 0).UTC(),
		Run:        seconds(v[swfRun]),
		Wait:       seconds(v[swfWait]),
		ReqTime:    seconds(v[swfReqTime]),
		Procs:      int(v[swfProcs]),
		ReqProcs:   int(v[swfReqProcs]),
		ReqMem:     v[swfReqMem],
		GPUs:       -1,
		Nodes:      -1,
	}
	if j.Wait >= 0 {
		j.Start = j.Submit.Add(j.Wait)
		if j.Run >= 0 {
			j.End = j.Start.Add(j.Run)
		}
	}
	p.jobs.add(&j)
	p.seenJob = true
	return nil
}

// header reads one header comment ("; Key: value"); body is the line after ";".
func (p *swfParser) header(lineNo int, body []byte) error {
	key, val, ok := bytes.Cut(body, []byte(":"))
	if !ok {
		return nil
	}
	key, val = trimSpace(key), trimSpace(val)
	var dst *int64
	switch string(key) {
	case "TimeZoneString":
		p.t.TimeZone = string(val)
		return nil
	case "UnixStartTime":
		dst = &p.start
	case "MaxProcs":
		dst = &p.maxProcs
	case "MaxNodes":
		dst = &p.maxNodes
	default:
		return nil
	}
	// "MaxNodes: 338 (batch partition; 512 total)": the number comes first.
	tok := val
	if i := bytes.IndexFunc(val, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) }); i >= 0 {
		tok = val[:i]
	}
	if len(tok) == 0 {
		return nil // "; MaxProcs:" says nothing
	}
	n, ok, inRange := parseInt(tok)
	switch {
	case !ok || !inRange:
		return fmt.Errorf("trace: swf: line %d: %s %q: %w: not an integer", lineNo, key, val, ErrBadHeader)
	case dst == &p.start && (n < 0 || n > maxUnixStart):
		return fmt.Errorf("trace: swf: line %d: %s %q: %w: not between 0 and %d", lineNo, key, val, ErrBadHeader, maxUnixStart)
	case dst != &p.start && n < -1:
		return fmt.Errorf("trace: swf: line %d: %s %q: %w: negative", lineNo, key, val, ErrBadHeader)
	case dst != &p.start && n > maxValue:
		// No job could use such a machine: a job's processors are bounded
		// the same way.
		return fmt.Errorf("trace: swf: line %d: %s %q: %w: more than %d, the most processors a job event holds", lineNo, key, val, ErrBadHeader, maxValue)
	}
	*dst = n
	return nil
}

// id returns the decimal string of an SWF id, "" for -1 (unknown).
func (p *swfParser) id(v int64) string {
	if v < 0 {
		return ""
	}
	s, ok := p.ids[v]
	if !ok {
		s = strconv.FormatInt(v, 10)
		p.ids[v] = s
	}
	return s
}

func (p *swfParser) queue(q, part int64) string {
	if part < 0 {
		return p.id(q)
	}
	k := [2]int64{q, part}
	s, ok := p.queues[k]
	if !ok {
		s = p.id(q) + "/" + p.id(part)
		p.queues[k] = s
	}
	return s
}

func seconds(v int64) time.Duration {
	if v < 0 {
		return -1
	}
	return time.Duration(v) * time.Second
}

// parseInt parses an optionally signed decimal integer. ok is false when b is
// not one; inRange is false when it does not fit an int64.
func parseInt(b []byte) (v int64, ok, inRange bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false, false
	}
	var u uint64
	inRange = true
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false, false
		}
		if u > (math.MaxUint64-9)/10 {
			inRange = false
			continue
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case !inRange:
	case neg && u <= 1<<63:
		return -int64(u), true, true
	case !neg && u <= math.MaxInt64:
		return int64(u), true, true
	}
	return 0, true, false
}
