package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/heliostat-dev/heliostat/ingest/trace"
)

// shownRejects is how many rejected rows a command that reads a trace
// (import, report --trace, sim, predictor backtest, collector --source sim)
// prints on stderr, or logs, and keeps in its JSON; all of them are counted.
const shownRejects = 5

// rejectedRow is one rejected row of a trace, as a command's JSON shows it.
type rejectedRow struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// printRejects writes the first shownRejects rejected rows of tr to w, one a
// line as "FILE:LINE: rejected: REASON: DETAIL", then, when there are more,
// how many there are in all by reason. It returns those rows for the
// command's JSON, empty (not nil) when there are none.
func printRejects(w io.Writer, path string, tr *trace.Trace) []rejectedRow {
	rows := firstRejects(tr)
	for _, r := range rows {
		fmt.Fprintf(w, "%s:%d: rejected: %s: %s\n", path, r.Line, r.Reason, r.Detail)
	}
	if tr.Rejected > len(rows) {
		fmt.Fprintf(w, "%s: %d rejected rows in all, by reason: %s\n", path, tr.Rejected, countsString(tr.Reasons))
	}
	return rows
}

// logRejects is printRejects for a command that logs: each of the first
// shownRejects rejected rows, then the counts by reason, at warn level.
func logRejects(logger *slog.Logger, path string, tr *trace.Trace) {
	rows := firstRejects(tr)
	for _, r := range rows {
		logger.Warn("trace row rejected", "file", path, "line", r.Line, "reason", r.Reason, "detail", r.Detail)
	}
	if tr.Rejected > len(rows) {
		logger.Warn("trace rows rejected", "file", path, "rows", tr.Rejected, "reasons", countsString(tr.Reasons))
	}
}

// firstRejects returns the first shownRejects rejected rows of tr.
func firstRejects(tr *trace.Trace) []rejectedRow {
	rows := []rejectedRow{}
	for _, le := range tr.Errors[:min(len(tr.Errors), shownRejects)] {
		rows = append(rows, rejectedRow{Line: le.Line, Reason: le.Reason, Detail: le.Detail})
	}
	return rows
}
