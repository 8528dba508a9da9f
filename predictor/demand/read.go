package demand

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
	"github.com/heliostat-dev/heliostat/internal/gzfile"
)

// Column names ReadSeries looks for in the header, in any order; other
// columns are ignored.
const (
	ColumnTime   = "time"   // required: "2006-01-02 15:04:05" (or with a T), no zone
	ColumnActive = "active" // required: nodes with at least one busy GPU
	ColumnTotal  = "total"  // optional: nodes in the cluster
)

// timeLayout is the time format of the Philly node sequence. Times carry no
// zone (the cluster's local clock) and are read as UTC so that hour-of-day
// and day-of-week are the file's own.
const timeLayout = "2006-01-02 15:04:05"

// ErrMissingColumn is returned when the header lacks a required column.
var ErrMissingColumn = errors.New("demand: missing required column")

// OpenSeries reads the node-demand CSV file at path (see ReadSeries),
// decompressing it when it is gzip. Errors name the file.
func OpenSeries(path string) (Series, error) {
	r, err := gzfile.Open(path)
	if err != nil {
		return Series{}, fmt.Errorf("demand: %w", err)
	}
	defer r.Close()
	s, err := ReadSeries(r)
	if err != nil {
		return Series{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ReadSeries reads a node-demand CSV (HeliosArtifact's
// philly_node_sequence.csv: time,active,total) into a Series of `active`
// values, with Totals from `total` when the column is there. Columns are
// found by their header names (after a UTF-8 byte-order mark, which is
// dropped); a column named twice is an error that names both cells. The step is the smallest gap between consecutive times; every
// gap must be a whole number of steps, and the steps no row covers are
// missing (NaN). Times must increase strictly. Errors name the line (a gap
// off the step: its two lines and the two lines whose gap set the step).
func ReadSeries(r io.Reader) (Series, error) {
	cr := csv.NewReader(bom.Skip(r)) // a quoted first cell after the mark would be a bare quote
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err == io.EOF {
		return Series{}, fmt.Errorf("%w: empty input, want a header with %q and %q", ErrMissingColumn, ColumnTime, ColumnActive)
	}
	if err != nil {
		return Series{}, fmt.Errorf("demand: read header: %w (want a CSV file whose header has %q and %q)", err, ColumnTime, ColumnActive)
	}
	iTime, iActive, iTotal := -1, -1, -1
	for i, h := range header {
		name := strings.ToLower(strings.TrimSpace(h))
		var dst *int
		switch name {
		case ColumnTime:
			dst = &iTime
		case ColumnActive:
			dst = &iActive
		case ColumnTotal:
			dst = &iTotal
		default:
			continue
		}
		if *dst >= 0 {
			// Which one holds the series? Taking either would be a guess.
			return Series{}, fmt.Errorf("demand: line 1: column %q twice (cells %d and %d)", name, *dst+1, i+1)
		}
		*dst = i
	}
	if iTime < 0 {
		return Series{}, fmt.Errorf("%w %q (line 1)", ErrMissingColumn, ColumnTime)
	}
	if iActive < 0 {
		return Series{}, fmt.Errorf("%w %q (line 1)", ErrMissingColumn, ColumnActive)
	}

	var (
		times    []time.Time
		lines    []int
		values   []float64
		totals   []float64
		capacity float64
	)
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Series{}, fmt.Errorf("demand: read series: %w", err)
		}
		line, _ := cr.FieldPos(0)
		t, err := parseTime(rec[iTime])
		if err != nil {
			return Series{}, fmt.Errorf("demand: line %d: %s: %w", line, ColumnTime, err)
		}
		if n := len(times); n > 0 && !t.After(times[n-1]) {
			return Series{}, fmt.Errorf("demand: line %d: %s %s is not after line %d's %s",
				line, ColumnTime, t.Format(timeLayout), lines[n-1], times[n-1].Format(timeLayout))
		}
		v, err := parseCount(rec[iActive])
		if err != nil {
			return Series{}, fmt.Errorf("demand: line %d: %s: %w", line, ColumnActive, err)
		}
		if iTotal >= 0 {
			tot, err := parseCount(rec[iTotal])
			if err != nil {
				return Series{}, fmt.Errorf("demand: line %d: %s: %w", line, ColumnTotal, err)
			}
			if v > tot {
				return Series{}, fmt.Errorf("demand: line %d: %s %v is above %s %v (busy nodes cannot outnumber the cluster)",
					line, ColumnActive, v, ColumnTotal, tot)
			}
			capacity = max(capacity, tot)
			totals = append(totals, tot)
		}
		times = append(times, t)
		lines = append(lines, line)
		values = append(values, v)
	}
	if len(times) < 2 {
		return Series{}, fmt.Errorf("demand: read series: %d rows, need at least 2 to know the step", len(times))
	}

	step, stepAt := time.Duration(math.MaxInt64), 0 // stepAt: the row that ends the first smallest gap
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d < step {
			step, stepAt = d, i
		}
	}
	span := times[len(times)-1].Sub(times[0])
	if span > math.MaxInt64-step || span/step >= MaxSeriesLen {
		return Series{}, fmt.Errorf("demand: line %d: series spans %v at a %v step, more than %d steps",
			lines[len(lines)-1], span, step, MaxSeriesLen)
	}
	s := Series{Start: times[0], Step: step, Capacity: capacity}
	s.Values = make([]float64, int(span/step)+1)
	for i := range s.Values {
		s.Values[i] = math.NaN()
	}
	for i, t := range times {
		d := t.Sub(times[0])
		if d%step != 0 {
			// Every gap before this one was a whole number of steps, so
			// this gap is not: name both its rows, and the two rows whose
			// gap set the step, since either pair may hold the wrong time.
			return Series{}, fmt.Errorf("demand: line %d: %s %s is %v after line %d's, not a whole number of the %v step (the smallest gap, from line %d to line %d)",
				lines[i], ColumnTime, t.Format(timeLayout), t.Sub(times[i-1]), lines[i-1], step, lines[stepAt-1], lines[stepAt])
		}
		s.Values[d/step] = values[i]
	}
	if totals != nil {
		s.Totals = make([]float64, len(s.Values))
		for i := range s.Totals {
			s.Totals[i] = math.NaN()
		}
		for i, t := range times {
			s.Totals[t.Sub(times[0])/step] = totals[i]
		}
	}
	return s, nil
}

// parseTime reads a zone-less time as UTC.
func parseTime(f string) (time.Time, error) {
	f = strings.TrimSpace(f)
	t, err := time.Parse(timeLayout, f)
	if err != nil {
		var err2 error
		if t, err2 = time.Parse("2006-01-02T15:04:05", f); err2 != nil {
			return time.Time{}, fmt.Errorf("%q is not a time like %q", f, timeLayout)
		}
	}
	return t, nil
}

// parseCount reads a non-negative, finite number of nodes.
func parseCount(f string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", f)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("%q is not a non-negative finite number", f)
	}
	return v, nil
}
