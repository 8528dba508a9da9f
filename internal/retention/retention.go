// Package retention drops the ClickHouse partitions of a table that only hold
// rows older than a retention period: what ClickHouse 18.16 offers in place
// of TTL, for tables partitioned by toYYYYMMDD or toYYYYMM of their time.
package retention

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Rule keeps a table's partitions that may hold data younger than Keep.
// Daily tables are partitioned by toYYYYMMDD, the others by toYYYYMM. Keep 0
// keeps everything.
type Rule struct {
	Table string
	Keep  time.Duration
	Daily bool
}

// DropExpired drops the partitions of rule.Table whose newest possible row is
// older than now - rule.Keep, and returns their ids. Dropping whole partitions
// is what ClickHouse 18.16 offers in place of TTL.
func DropExpired(ctx context.Context, conn driver.Conn, db string, rule Rule, now time.Time) ([]string, error) {
	if rule.Keep <= 0 {
		return nil, nil
	}
	cutoff := now.Add(-rule.Keep).UTC()
	parts, err := Partitions(ctx, conn, db, rule.Table)
	if err != nil {
		return nil, err
	}
	var expired []string
	for _, p := range parts {
		end, ok := partitionEnd(p, rule.Daily)
		if ok && !end.After(cutoff) {
			expired = append(expired, p)
		}
	}
	for i, p := range expired {
		if err := Drop(ctx, conn, db, rule.Table, p); err != nil {
			return expired[:i], err
		}
	}
	return expired, nil
}

// Partitions returns the ids of the partitions of db.table that hold active
// parts, as system.parts writes them.
func Partitions(ctx context.Context, conn driver.Conn, db, table string) ([]string, error) {
	rows, err := conn.Query(ctx, "SELECT DISTINCT partition FROM system.parts WHERE database = ? AND table = ? AND active ORDER BY partition", db, table)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("list partitions of %s: %w", table, err)
		}
		parts = append(parts, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	return parts, nil
}

// Drop drops partition p of db.table. p must be a partition id of a numeric
// partition key, as Partitions returns it.
func Drop(ctx context.Context, conn driver.Conn, db, table, p string) error {
	if _, err := strconv.ParseUint(p, 10, 64); err != nil {
		return fmt.Errorf("drop partition %q of %s: not a numeric partition id", p, table)
	}
	if err := conn.Exec(ctx, "ALTER TABLE "+db+"."+table+" DROP PARTITION "+p); err != nil {
		return fmt.Errorf("drop partition %s of %s: %w", p, table, err)
	}
	return nil
}

// partitionEnd returns the first instant after partition id p (YYYYMMDD or
// YYYYMM), or false when p is not such an id.
func partitionEnd(p string, daily bool) (time.Time, bool) {
	n, err := strconv.Atoi(p)
	if err != nil {
		return time.Time{}, false
	}
	if daily {
		if len(p) != 8 {
			return time.Time{}, false
		}
		return time.Date(n/10000, time.Month(n/100%100), n%100, 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1), true
	}
	if len(p) != 6 {
		return time.Time{}, false
	}
	return time.Date(n/100, time.Month(n%100), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 1, 0), true
}
