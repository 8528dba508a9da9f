package analytics

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Window is a half-open interval of time [Since, Until). The jobs of a
// window are the jobs submitted in it.
type Window struct {
	Since, Until time.Time
}

// windowLayout is how a window's ends are written in its ID.
const windowLayout = "2006-01-02T15:04:05Z"

// ID names the window as an ISO 8601 interval of UTC times,
// "2020-09-01T00:00:00Z/2020-10-01T00:00:00Z": the window_id of the result
// tables. Times are whole seconds (ClickHouse DateTime).
func (w Window) ID() string {
	return w.Since.UTC().Format(windowLayout) + "/" + w.Until.UTC().Format(windowLayout)
}

func (w Window) String() string { return w.ID() }

// Validate reports a window that is empty, reversed, not whole seconds or
// outside what a ClickHouse DateTime holds.
func (w Window) Validate() error {
	switch {
	case w.Since.IsZero() || w.Until.IsZero():
		return errors.New("analytics: window needs both ends")
	case !w.Until.After(w.Since):
		return fmt.Errorf("analytics: window %s ends before it starts", w.ID())
	case w.Since.Nanosecond() != 0 || w.Until.Nanosecond() != 0:
		return fmt.Errorf("analytics: window %s–%s: want whole seconds", w.Since.Format(time.RFC3339Nano), w.Until.Format(time.RFC3339Nano))
	case w.Since.Unix() < 0 || w.Until.Unix() > 1<<32-1:
		return fmt.Errorf("analytics: window %s: outside 1970..2106 (ClickHouse DateTime)", w.ID())
	}
	return nil
}

// ParseWindow parses a window ID ("SINCE/UNTIL", RFC 3339 times).
func ParseWindow(id string) (Window, error) {
	a, b, ok := strings.Cut(id, "/")
	if !ok {
		return Window{}, fmt.Errorf("analytics: window %q: want SINCE/UNTIL", id)
	}
	s, err := time.Parse(time.RFC3339, a)
	if err != nil {
		return Window{}, fmt.Errorf("analytics: window %q: since: %w", id, err)
	}
	u, err := time.Parse(time.RFC3339, b)
	if err != nil {
		return Window{}, fmt.Errorf("analytics: window %q: until: %w", id, err)
	}
	w := Window{Since: s.UTC(), Until: u.UTC()}
	return w, w.Validate()
}

// Period is a kind of calendar window the scheduler keeps up to date.
type Period string

// Periods the scheduler knows. Days, weeks (Monday to Monday) and months
// start at midnight in the runner's time zone.
const (
	Day   Period = "day"
	Week  Period = "week"
	Month Period = "month"
)

// ParsePeriod checks a period name.
func ParsePeriod(s string) (Period, error) {
	switch p := Period(strings.TrimSpace(s)); p {
	case Day, Week, Month:
		return p, nil
	}
	return "", fmt.Errorf("analytics: period %q: want day, week or month", s)
}

// Containing returns the window of period p, in loc, that holds t.
func (p Period) Containing(t time.Time, loc *time.Location) Window {
	t = t.In(loc)
	y, m, d := t.Date()
	var start time.Time
	switch p {
	case Week:
		start = time.Date(y, m, d-(int(t.Weekday())+6)%7, 0, 0, 0, 0, loc)
	case Month:
		start = time.Date(y, m, 1, 0, 0, 0, 0, loc)
	default:
		start = time.Date(y, m, d, 0, 0, 0, 0, loc)
	}
	return Window{Since: start.UTC(), Until: p.next(start).UTC()}
}

// next returns the start of the period after the one starting at start
// (calendar arithmetic: a day is not always 24 hours).
func (p Period) next(start time.Time) time.Time {
	y, m, d := start.Date()
	switch p {
	case Week:
		return time.Date(y, m, d+7, 0, 0, 0, 0, start.Location())
	case Month:
		return time.Date(y, m+1, 1, 0, 0, 0, 0, start.Location())
	}
	return time.Date(y, m, d+1, 0, 0, 0, 0, start.Location())
}

// hourStart returns the start of the hour, in loc (nil: UTC), that holds
// t: the origin of the utilization job's hours, so that they are loc's
// hours even where its offset is not whole hours (Asia/Kolkata, +05:30;
// Asia/Kathmandu, +05:45). t itself where that start would fall before 1970
// (a DateTime cannot hold it).
func hourStart(t time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	_, off := t.In(loc).Zone()
	local := t.Unix() + int64(off)
	start := t.Unix() - (local%3600+3600)%3600
	if start < 0 {
		return t
	}
	return time.Unix(start, 0).UTC()
}

// ThroughToday returns the window from since to the end of the day, in loc,
// that holds now: the window of a --since given without its end. The calls
// of one day name the same window, which, like the schedule's day window
// while it is open, is computed up to now (RunResult.ComputedUntil) and
// computed again, into the same partitions, once those results are stale;
// an end at now itself would name a new window, and store a new partition,
// at every call. A since at or after that end is refused.
func ThroughToday(since, now time.Time, loc *time.Location) (Window, error) {
	w := Window{Since: since, Until: Day.Containing(now, loc).Until}
	if !w.Until.After(since) {
		return Window{}, fmt.Errorf("analytics: since %s is not before the end of today (%s in %s): give the window's end", since.UTC().Format(time.RFC3339), w.Until.In(loc).Format(time.RFC3339), loc)
	}
	return w, w.Validate()
}

// Recent returns the windows of period p, in loc, that overlap [now-settle,
// now], oldest first: the windows whose jobs may still change (a job
// submitted in a window may end long after it).
func (p Period) Recent(now time.Time, settle time.Duration, loc *time.Location) []Window {
	var out []Window
	w := p.Containing(now.Add(-settle), loc)
	for !w.Since.After(now) {
		out = append(out, w)
		w = p.Containing(w.Until, loc)
	}
	return out
}
