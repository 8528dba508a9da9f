package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/heliostat-dev/heliostat/internal/bom"
	"github.com/heliostat-dev/heliostat/schemas"
)

// heliosTimeLayout is how Helios writes times: no zone, the cluster's clock.
const heliosTimeLayout = "2006-01-02 15:04:05"

// Helios columns the reader uses; the index into heliosCols.
const (
	hJobID = iota
	hUser
	hVC
	hName
	hGPUs
	hCPUs
	hNodes
	hState
	hSubmit
	hStart
	hEnd
	hDuration
	hQueue
	hCols
)

// heliosColumn maps a header name (lower case) to the column it fills. The
// public files name the job "jobname" where they have it; job_name and name
// are accepted too.
var heliosColumn = map[string]int{
	"job_id": hJobID, "user": hUser, "vc": hVC,
	"job_name": hName, "jobname": hName, "name": hName,
	"gpu_num": hGPUs, "cpu_num": hCPUs, "node_num": hNodes, "state": hState,
	"submit_time": hSubmit, "start_time": hStart, "end_time": hEnd,
	"duration": hDuration, "queue": hQueue,
}

var heliosColumnNames = [hCols]string{
	"job_id", "user", "vc", "job_name", "gpu_num", "cpu_num", "node_num", "state",
	"submit_time", "start_time", "end_time", "duration", "queue",
}

// ReadHelios reads a Helios cluster_log.csv (SenseTime's Helios traces, Hu et
// al., SC'21). Columns are matched by header name, in any order: job_id,
// user, vc, job_name (or jobname, name), gpu_num, cpu_num, node_num, state,
// submit_time, start_time, end_time, duration, queue. Only job_id and
// submit_time are required (ErrMissingColumn otherwise); unknown columns are
// ignored. Times are "YYYY-MM-DD HH:MM:SS" in loc (nil means UTC); duration
// and queue are seconds and may be decimals ("123.0"); an empty cell is
// unknown. A UTF-8 byte-order mark before the header is dropped.
//
// Queue is the VC, Executable the job name, GPUs/Procs/Nodes come from
// gpu_num/cpu_num/node_num, Run from duration (else end-start), Wait from
// queue (else start-submit), Start from start_time (else Submit+Wait), End from
// end_time (else Start+Run). State is upper-cased ("CANCELLED by 42", as Slurm
// writes it, becomes CANCELLED). Group and ReqProcs are unknown, ReqTime -1.
//
// A row with another number of cells than the header, malformed CSV (with
// every line a badly quoted cell ran on over), an empty job_id or
// submit_time, a bad time, a bad or negative number, a duration or queue
// beyond what time.Duration holds, a count above 4294967295 (what job_events
// stores), a string that is not
// valid UTF-8 or is longer than schemas.MaxStringLen bytes (a job_id: 1004,
// leaving room for the #N of a repeated id), or times out of order (a start
// before the submit, an end before the start or the submit, as given or as
// derived from duration and queue) is rejected and counted with its line
// number and reason ("bad_field_count", "bad_csv", "missing_job_id",
// "missing_submit", "bad_time", "bad_number", "negative_value",
// "out_of_range", "bad_string"); reading goes on. ReadHelios returns an error only when r fails or the header lacks a
// required column.
func ReadHelios(r io.Reader, loc *time.Location) (*Trace, error) {
	if loc == nil {
		loc = time.UTC
	}
	// The mark goes before the CSV reader sees it: a quoted first cell
	// after it would be a bare quote.
	cr := csv.NewReader(bom.Skip(r))
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1 // counts are checked here, to reject rows, not fail

	header, err := cr.Read()
	switch {
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("trace: helios: empty file: %w: job_id, submit_time", ErrMissingColumn)
	case err != nil:
		return nil, fmt.Errorf("trace: helios: read header: %w", err)
	}
	var col [hCols]int
	for i := range col {
		col[i] = -1
	}
	for i, name := range header {
		c, ok := heliosColumn[strings.ToLower(strings.TrimSpace(name))]
		if !ok {
			continue
		}
		if col[c] >= 0 {
			return nil, fmt.Errorf("trace: helios: header: column %s twice (cells %d and %d)", heliosColumnNames[c], col[c]+1, i+1)
		}
		col[c] = i
	}
	var missing []string
	for _, c := range [...]int{hJobID, hSubmit} {
		if col[c] < 0 {
			missing = append(missing, heliosColumnNames[c])
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("trace: helios: header: %w: %s", ErrMissingColumn, strings.Join(missing, ", "))
	}

	p := heliosParser{t: newTrace("helios"), col: col, loc: loc, width: len(header), in: make(interner)}
	lastLine := 1
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return nil, fmt.Errorf("trace: helios: read after line %d: %w", lastLine, err)
			}
			lastLine = pe.Line
			// A quote that is never closed properly takes the lines after
			// it into its cell, up to the error (often the end of the
			// file): each is rejected too, so none is lost uncounted.
			p.t.reject(pe.StartLine, "bad_csv", func() string {
				if pe.Line > pe.StartLine {
					return fmt.Sprintf("%v (the quoted cell ran on from line %d: lines %d to %d are rejected with it)", pe, pe.StartLine, pe.StartLine+1, pe.Line)
				}
				return pe.Error()
			})
			for l := pe.StartLine + 1; l <= pe.Line; l++ {
				p.t.reject(l, "bad_csv", func() string {
					return fmt.Sprintf("inside the quoted cell opened on line %d, which is not closed properly", pe.StartLine)
				})
			}
			continue
		}
		line, _ := cr.FieldPos(0)
		lastLine = line
		p.row(line, rec)
	}
	p.t.Jobs = p.jobs.jobs()
	return p.t, nil
}

type heliosParser struct {
	t     *Trace
	col   [hCols]int
	loc   *time.Location
	width int // header cells
	in    interner
	jobs  jobList
}

// cell returns the trimmed cell of column c, "" when the file lacks it.
func (p *heliosParser) cell(rec []string, c int) string {
	if p.col[c] < 0 {
		return ""
	}
	return strings.TrimSpace(rec[p.col[c]])
}

func (p *heliosParser) row(line int, rec []string) {
	t := p.t
	if len(rec) != p.width {
		t.reject(line, "bad_field_count", func() string {
			return fmt.Sprintf("%d cells, header has %d", len(rec), p.width)
		})
		return
	}
	j := Job{Line: line, Run: -1, Wait: -1, ReqTime: -1, Procs: -1, ReqProcs: -1, GPUs: -1, Nodes: -1, ReqMem: -1}

	if j.ID = p.cell(rec, hJobID); j.ID == "" {
		t.reject(line, "missing_job_id", func() string { return "job_id is empty" })
		return
	}
	if why := stringProblem(j.ID, maxIDLen); why != "" {
		t.reject(line, "bad_string", func() string { return fmt.Sprintf("%s %s", heliosColumnNames[hJobID], why) })
		return
	}
	j.ID = strings.Clone(j.ID) // rec's cells share one string per row
	sub := p.cell(rec, hSubmit)
	if sub == "" {
		t.reject(line, "missing_submit", func() string { return "submit_time is empty" })
		return
	}
	var ok bool
	if j.Submit, ok = p.parseTime(line, hSubmit, sub); !ok {
		return
	}
	if j.Start, ok = p.parseTime(line, hStart, p.cell(rec, hStart)); !ok {
		return
	}
	if j.End, ok = p.parseTime(line, hEnd, p.cell(rec, hEnd)); !ok {
		return
	}
	if j.Run, ok = p.parseSeconds(line, hDuration, p.cell(rec, hDuration)); !ok {
		return
	}
	if j.Wait, ok = p.parseSeconds(line, hQueue, p.cell(rec, hQueue)); !ok {
		return
	}
	for _, f := range [...]struct {
		c   int
		dst *int
	}{{hGPUs, &j.GPUs}, {hCPUs, &j.Procs}, {hNodes, &j.Nodes}} {
		if *f.dst, ok = p.parseCount(line, f.c, p.cell(rec, f.c)); !ok {
			return
		}
	}

	// Strings go into job events as they are: what those cannot hold is
	// refused here, named, rather than by the encoder, which would stop an
	// import at this job.
	for _, c := range [...]int{hUser, hVC, hName, hState} {
		if why := stringProblem(p.cell(rec, c), schemas.MaxStringLen); why != "" {
			t.reject(line, "bad_string", func() string { return fmt.Sprintf("%s %s", heliosColumnNames[c], why) })
			return
		}
	}

	// Derive what the file leaves out from what it gives: a derived time
	// is never earlier than the one it is derived from.
	startFrom, endFrom := heliosColumnNames[hStart], heliosColumnNames[hEnd]
	if j.Run < 0 && !j.Start.IsZero() && !j.End.IsZero() {
		j.Run = max(j.End.Sub(j.Start), -1) // negative: refused below
	}
	if j.Wait < 0 && !j.Start.IsZero() {
		j.Wait = max(j.Start.Sub(j.Submit), -1)
	}
	if j.Start.IsZero() && j.Wait >= 0 {
		j.Start, startFrom = j.Submit.Add(j.Wait), "submit_time + queue"
	}
	if j.End.IsZero() && !j.Start.IsZero() && j.Run >= 0 {
		j.End, endFrom = j.Start.Add(j.Run), startFrom+" + duration"
	}
	// Times out of order would make a job end before it starts, or start
	// before it is submitted: its events would leave it RUNNING or PENDING
	// for good. Submit <= start <= end, each where known.
	for _, o := range [...]struct {
		later, earlier       time.Time
		laterName, earlyName string
	}{
		{j.Start, j.Submit, startFrom, heliosColumnNames[hSubmit]},
		{j.End, j.Start, endFrom, startFrom},
		{j.End, j.Submit, endFrom, heliosColumnNames[hSubmit]},
	} {
		if !o.later.IsZero() && !o.earlier.IsZero() && o.later.Before(o.earlier) {
			t.reject(line, "negative_value", func() string {
				return fmt.Sprintf("%s %s before %s %s", o.laterName, o.later.Format(heliosTimeLayout), o.earlyName, o.earlier.Format(heliosTimeLayout))
			})
			return
		}
	}

	j.User = p.in.str(p.cell(rec, hUser))
	j.Queue = p.in.str(p.cell(rec, hVC))
	j.Executable = p.in.str(p.cell(rec, hName))
	if s := strings.ToUpper(p.cell(rec, hState)); strings.HasPrefix(s, "CANCELLED") {
		j.State = "CANCELLED"
	} else {
		j.State = p.in.str(s)
	}
	p.jobs.add(&j)
}

// parseTime parses a time cell; "" is unknown (the zero time).
func (p *heliosParser) parseTime(line, c int, s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, true
	}
	v, err := time.ParseInLocation(heliosTimeLayout, s, p.loc)
	if err == nil && v.IsZero() {
		// 0001-01-01 00:00:00 UTC is Go's "unknown" time; no trace means it.
		err = errors.New("the zero time")
	}
	if err != nil {
		p.t.reject(line, "bad_time", func() string {
			return fmt.Sprintf("%s %q: want YYYY-MM-DD HH:MM:SS: %v", heliosColumnNames[c], s, err)
		})
		return time.Time{}, false
	}
	return v, true
}

// parseSeconds parses a duration cell in seconds, possibly decimal; "" is unknown (-1).
func (p *heliosParser) parseSeconds(line, c int, s string) (time.Duration, bool) {
	if s == "" {
		return -1, true
	}
	v, err := strconv.ParseFloat(s, 64)
	reason, why := "", ""
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		reason, why = "bad_number", "not a number of seconds"
	case v < 0:
		reason, why = "negative_value", "negative"
	case v > float64(maxSeconds):
		reason, why = "out_of_range", "more seconds than a duration holds"
	default:
		return time.Duration(math.Round(v * float64(time.Second))), true
	}
	p.t.reject(line, reason, func() string { return fmt.Sprintf("%s %q: %s", heliosColumnNames[c], s, why) })
	return 0, false
}

// parseCount parses a count cell: an integer, or a decimal with no fraction
// ("8.0", as pandas writes an integer column that has gaps); "" is unknown (-1).
func (p *heliosParser) parseCount(line, c int, s string) (int, bool) {
	if s == "" {
		return -1, true
	}
	reason, why := "", ""
	if n, err := strconv.Atoi(s); err == nil {
		switch {
		case n < 0:
			reason, why = "negative_value", "negative"
		case n > maxValue:
			reason, why = "out_of_range", fmt.Sprintf("more than %d, the most a job event holds", maxValue)
		default:
			return n, true
		}
		p.t.reject(line, reason, func() string { return fmt.Sprintf("%s %q: %s", heliosColumnNames[c], s, why) })
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v):
		reason, why = "bad_number", "not an integer"
	case v < 0:
		reason, why = "negative_value", "negative"
	case v > maxValue:
		reason, why = "out_of_range", fmt.Sprintf("more than %d, the most a job event holds", maxValue)
	default:
		return int(v), true
	}
	p.t.reject(line, reason, func() string { return fmt.Sprintf("%s %q: %s", heliosColumnNames[c], s, why) })
	return 0, false
}
