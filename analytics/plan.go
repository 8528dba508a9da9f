package analytics

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// CapacityResult is the output of one capacity-planning query.
type CapacityResult struct {
	Query   string   `json:"query"`
	Window  string   `json:"window"`
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`
}

// CapacitySQL returns q's SQL with its placeholders filled in for database,
// window w (computed up to now when w is still open), time zone loc and
// lookback (the runs submitted up to lookback before w are read whole, the
// earlier ones that ran or waited in w through a scan of their end times:
// the figures do not depend on it): what RunCapacityQuery runs, and what
// `heliostat analytics capacity --sql` prints for clickhouse-client.
func CapacitySQL(q CapacityQuery, database string, w Window, now time.Time, loc *time.Location, lookback time.Duration) (string, error) {
	if !identifier.MatchString(database) {
		return "", fmt.Errorf("analytics: database %q is not a plain identifier", database)
	}
	if err := w.Validate(); err != nil {
		return "", err
	}
	if lookback < 0 {
		return "", fmt.Errorf("analytics: lookback %v is negative", lookback)
	}
	if loc == nil {
		loc = time.UTC
	}
	if loc.String() == "Local" {
		return "", fmt.Errorf("analytics: %w", errLocalZone)
	}
	until := w.Until
	if now = now.UTC().Truncate(time.Second); now.Before(until) {
		until = now
	}
	if until.Before(w.Since) {
		until = w.Since
	}
	lb := max(w.Since.Add(-lookback).Unix(), 0)
	s, err := expand(q.SQL, map[string]string{
		"database":       database,
		"since":          unix(w.Since.Unix()),
		"until":          unix(w.Until.Unix()),
		"computed_until": unix(until.Unix()),
		"lookback_since": unix(lb),
		"tz":             loc.String(),
	})
	if err != nil {
		return "", fmt.Errorf("analytics: capacity query %s: %w", q.Name, err)
	}
	return s, nil
}

// RunCapacityQuery runs capacity-planning query q for window w, as
// CapacitySQL(q, database, w, now, loc, lookback) writes it, and returns its
// rows.
func RunCapacityQuery(ctx context.Context, conn driver.Conn, database string, q CapacityQuery, w Window, now time.Time, loc *time.Location, lookback time.Duration) (*CapacityResult, error) {
	s, err := CapacitySQL(q, database, w, now, loc, lookback)
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("analytics: capacity query %s: %w", q.Name, err)
	}
	defer rows.Close()
	res := &CapacityResult{Query: q.Name, Window: w.ID(), Columns: rows.Columns(), Rows: [][]any{}}
	types := rows.ColumnTypes()
	for rows.Next() {
		ptrs := make([]any, len(types))
		for i, ct := range types {
			ptrs[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("analytics: capacity query %s: %w", q.Name, err)
		}
		row := make([]any, len(ptrs))
		for i, p := range ptrs {
			row[i] = plain(reflect.ValueOf(p).Elem().Interface())
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("analytics: capacity query %s: %w", q.Name, err)
	}
	return res, nil
}

// plain makes a scanned value printable and JSON-safe: dates as
// YYYY-MM-DD, times as RFC 3339, NaN and infinities as nil.
func plain(v any) any {
	switch x := v.(type) {
	case time.Time:
		if x.Hour() == 0 && x.Minute() == 0 && x.Second() == 0 {
			return x.Format("2006-01-02")
		}
		return x.UTC().Format(time.RFC3339)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil
		}
	}
	return v
}

// FormatTable writes res as an aligned text table.
func (res *CapacityResult) FormatTable() string {
	cells := [][]string{res.Columns}
	for _, r := range res.Rows {
		row := make([]string, len(r))
		for i, v := range r {
			switch x := v.(type) {
			case nil:
				row[i] = "-"
			case float64:
				row[i] = strconv.FormatFloat(x, 'f', -1, 64)
			default:
				row[i] = fmt.Sprint(x)
			}
		}
		cells = append(cells, row)
	}
	width := make([]int, len(res.Columns))
	for _, r := range cells {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range cells {
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-len(c)))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}
