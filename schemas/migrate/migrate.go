// Package migrate applies heliostat's embedded ClickHouse migrations
// (schemas.Migrations) and records them in a schema_migrations table.
package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/schemas"
)

// Migration is one numbered DDL file.
type Migration struct {
	Version    uint32
	Name       string
	Statements []string
	Checksum   string
}

var fileName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Load reads the migrations from fsys (files sql/NNNN_name.sql) for database db.
func Load(fsys fs.FS, db string) ([]Migration, error) {
	if !identifier.MatchString(db) {
		return nil, fmt.Errorf("migrate: database name %q is not a plain identifier", db)
	}
	entries, err := fs.ReadDir(fsys, "sql")
	if err != nil {
		return nil, fmt.Errorf("migrate: read migrations: %w", err)
	}
	var out []Migration
	seen := map[uint32]string{}
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migrate: %s: name is not NNNN_name.sql", e.Name())
		}
		v, _ := strconv.ParseUint(m[1], 10, 32)
		if prev, ok := seen[uint32(v)]; ok {
			return nil, fmt.Errorf("migrate: %s and %s share version %d", prev, e.Name(), v)
		}
		seen[uint32(v)] = e.Name()
		raw, err := fs.ReadFile(fsys, path.Join("sql", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("migrate: read %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(raw)
		stmts := split(strings.ReplaceAll(string(raw), "{database}", db))
		if len(stmts) == 0 {
			return nil, fmt.Errorf("migrate: %s holds no statement", e.Name())
		}
		out = append(out, Migration{Version: uint32(v), Name: m[2], Statements: stmts, Checksum: hex.EncodeToString(sum[:8])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// split cuts a file into statements at lines ending in ';', dropping comment
// lines.
func split(sql string) []string {
	var stmts []string
	var cur strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			s := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";")
			stmts = append(stmts, s)
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		stmts = append(stmts, s)
	}
	return stmts
}

// Result reports what Apply did.
type Result struct {
	Applied []string // NNNN_name of migrations applied now
	Current uint32   // highest version of this binary's present after Apply
	// Newer are the versions recorded in the database that this binary
	// does not have: a newer heliostat applied them (a rolling upgrade, or
	// a downgrade). Migrations only add tables and views, so an older part
	// runs on such a schema; Apply warns about it.
	Newer []uint32
}

// Apply creates database db if needed and applies every embedded migration not
// yet recorded in db.schema_migrations. It refuses to run when an applied
// migration's file has changed since.
func Apply(ctx context.Context, conn driver.Conn, db string, logger *slog.Logger) (Result, error) {
	migs, err := Load(schemas.Migrations, db)
	if err != nil {
		return Result{}, err
	}
	return apply(ctx, conn, db, migs, logger)
}

func apply(ctx context.Context, conn driver.Conn, db string, migs []Migration, logger *slog.Logger) (Result, error) {
	var res Result
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + db,
		"CREATE TABLE IF NOT EXISTS " + db + `.schema_migrations (
			version UInt32, name String, checksum String, applied_at DateTime
		) ENGINE = ReplacingMergeTree(applied_at) ORDER BY version`,
	} {
		if err := conn.Exec(ctx, q); err != nil {
			return res, fmt.Errorf("migrate: prepare %s: %w", db, err)
		}
	}
	applied := map[uint32]string{}
	rows, err := conn.Query(ctx, "SELECT version, any(checksum) FROM "+db+".schema_migrations GROUP BY version")
	if err != nil {
		return res, fmt.Errorf("migrate: read applied migrations: %w", err)
	}
	for rows.Next() {
		var v uint32
		var sum string
		if err := rows.Scan(&v, &sum); err != nil {
			rows.Close()
			return res, fmt.Errorf("migrate: read applied migrations: %w", err)
		}
		applied[v] = sum
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, fmt.Errorf("migrate: read applied migrations: %w", err)
	}
	known := map[uint32]bool{}
	var latest uint32
	for _, m := range migs {
		known[m.Version] = true
		latest = max(latest, m.Version)
	}
	for v := range applied {
		if !known[v] {
			res.Newer = append(res.Newer, v)
		}
	}
	slices.Sort(res.Newer)
	if len(res.Newer) > 0 {
		logger.Warn("the database's schema is newer than this binary: a newer heliostat applied migrations this one does not know; running on it, as migrations only add tables and views",
			"database", db, "unknown_versions", res.Newer, "binary_latest", latest)
	}
	for _, m := range migs {
		label := fmt.Sprintf("%04d_%s", m.Version, m.Name)
		if sum, ok := applied[m.Version]; ok {
			if sum != m.Checksum {
				return res, fmt.Errorf("migrate: %s changed after it was applied (checksum %s, recorded %s): add a new migration instead", label, m.Checksum, sum)
			}
			res.Current = m.Version
			continue
		}
		for i, stmt := range m.Statements {
			if err := conn.Exec(ctx, stmt); err != nil {
				return res, fmt.Errorf("migrate: %s statement %d: %w", label, i+1, err)
			}
		}
		if err := record(ctx, conn, db, m); err != nil {
			return res, fmt.Errorf("migrate: record %s: %w", label, err)
		}
		logger.Info("applied migration", "database", db, "migration", label)
		res.Applied = append(res.Applied, label)
		res.Current = m.Version
	}
	return res, nil
}

// record notes m as applied. It uses the batch API: an INSERT … VALUES with
// bound arguments through Exec stalls on ClickHouse 18.16.
func record(ctx context.Context, conn driver.Conn, db string, m Migration) error {
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".schema_migrations (version, name, checksum, applied_at)")
	if err != nil {
		return err
	}
	defer b.Abort()
	if err := b.Append(m.Version, m.Name, m.Checksum, time.Now()); err != nil {
		return err
	}
	return b.Send()
}
