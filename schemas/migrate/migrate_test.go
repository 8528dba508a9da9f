package migrate_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/migrate"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestMain(m *testing.M) { os.Exit(schematest.Main(m)) }

var discard = slog.New(slog.DiscardHandler)

// sqlFS makes a migrations file system from file name → content.
func sqlFS(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, body := range files {
		fsys["sql/"+name] = &fstest.MapFile{Data: []byte(body)}
	}
	return fsys
}

func checksum(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:8])
}

func TestLoad(t *testing.T) {
	files := map[string]string{
		"0010_third.sql":  "CREATE TABLE IF NOT EXISTS {database}.c (x UInt8) ENGINE = Memory;\n",
		"0002_second.sql": "CREATE TABLE IF NOT EXISTS {database}.b (x UInt8) ENGINE = Memory;\n",
		"0001_first.sql":  "-- the first\nCREATE DATABASE IF NOT EXISTS {database};\nCREATE TABLE IF NOT EXISTS {database}.a (x UInt8) ENGINE = Memory;\n",
	}
	got, err := migrate.Load(sqlFS(files), "heliostat_test")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := []migrate.Migration{
		{Version: 1, Name: "first", Checksum: checksum(files["0001_first.sql"]), Statements: []string{
			"CREATE DATABASE IF NOT EXISTS heliostat_test",
			"CREATE TABLE IF NOT EXISTS heliostat_test.a (x UInt8) ENGINE = Memory",
		}},
		{Version: 2, Name: "second", Checksum: checksum(files["0002_second.sql"]), Statements: []string{
			"CREATE TABLE IF NOT EXISTS heliostat_test.b (x UInt8) ENGINE = Memory",
		}},
		{Version: 10, Name: "third", Checksum: checksum(files["0010_third.sql"]), Statements: []string{
			"CREATE TABLE IF NOT EXISTS heliostat_test.c (x UInt8) ENGINE = Memory",
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load = %+v; want %+v", got, want)
	}

	// The checksum is of the file, not of the statements for one database:
	// every database records the same checksums.
	other, err := migrate.Load(sqlFS(files), "other")
	if err != nil {
		t.Fatalf("Load(other): %v", err)
	}
	for i := range other {
		if other[i].Checksum != got[i].Checksum {
			t.Errorf("Load(other)[%d].Checksum = %s; want %s, as for any database", i, other[i].Checksum, got[i].Checksum)
		}
	}
}

func TestLoadSplit(t *testing.T) {
	tests := []struct {
		name string
		sql  string
		want []string
	}{
		{"one statement", "SELECT 1;\n", []string{"SELECT 1"}},
		{"two statements", "SELECT 1;\nSELECT 2;\n", []string{"SELECT 1", "SELECT 2"}},
		{"last without semicolon", "SELECT 1;\nSELECT 2\n", []string{"SELECT 1", "SELECT 2"}},
		{"no final newline", "SELECT 1;", []string{"SELECT 1"}},
		{"multi-line", "CREATE TABLE {database}.t (\n    x UInt8,\n    y String\n) ENGINE = Memory;\n",
			[]string{"CREATE TABLE db.t (\n    x UInt8,\n    y String\n) ENGINE = Memory"}},
		{"comments dropped", "-- head\n-- more\nCREATE TABLE {database}.t (\n    -- a column\n    x UInt8\n) ENGINE = Memory;\n  -- tail\n",
			[]string{"CREATE TABLE {database}.t (\n    x UInt8\n) ENGINE = Memory"}},
		{"blank lines dropped", "\n\nSELECT 1;\n\n\nSELECT 2;\n\n", []string{"SELECT 1", "SELECT 2"}},
		{"semicolon inside a line does not split", "SELECT ';' AS s, 1;\n", []string{"SELECT ';' AS s, 1"}},
		{"CRLF line ends", "SELECT 1;\r\nSELECT 2;\r\n", []string{"SELECT 1", "SELECT 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			migs, err := migrate.Load(sqlFS(map[string]string{"0001_x.sql": tt.sql}), "db")
			if err != nil {
				t.Fatalf("Load(%q): %v", tt.sql, err)
			}
			want := tt.want
			for i := range want {
				want[i] = strings.ReplaceAll(want[i], "{database}", "db")
			}
			if got := migs[0].Statements; !reflect.DeepEqual(got, want) {
				t.Errorf("Load(%q).Statements = %q; want %q", tt.sql, got, want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	const stmt = "SELECT 1;\n"
	tests := []struct {
		name  string
		fsys  fs.FS
		db    string
		wantS string // in the error text
	}{
		{"one-digit version", sqlFS(map[string]string{"1_a.sql": stmt}), "db", "1_a.sql: name is not NNNN_name.sql"},
		{"five-digit version", sqlFS(map[string]string{"00001_a.sql": stmt}), "db", "00001_a.sql: name is not NNNN_name.sql"},
		{"dash", sqlFS(map[string]string{"0001-a.sql": stmt}), "db", "0001-a.sql: name is not"},
		{"upper case name", sqlFS(map[string]string{"0001_A.sql": stmt}), "db", "0001_A.sql: name is not"},
		{"not .sql", sqlFS(map[string]string{"0001_a.sql": stmt, "0002_b.txt": stmt}), "db", "0002_b.txt: name is not"},
		{"a README", sqlFS(map[string]string{"0001_a.sql": stmt, "README.md": "docs"}), "db", "README.md: name is not"},
		{"duplicate version", sqlFS(map[string]string{"0003_a.sql": stmt, "0003_b.sql": stmt}), "db", "0003_a.sql and 0003_b.sql share version 3"},
		{"empty file", sqlFS(map[string]string{"0001_a.sql": ""}), "db", "0001_a.sql holds no statement"},
		{"only comments and blanks", sqlFS(map[string]string{"0001_a.sql": "-- nothing yet\n\n   \n"}), "db", "0001_a.sql holds no statement"},
		{"no sql directory", fstest.MapFS{"0001_a.sql": &fstest.MapFile{Data: []byte(stmt)}}, "db", "migrate: read migrations"},
		{"empty database name", sqlFS(map[string]string{"0001_a.sql": stmt}), "", "not a plain identifier"},
		{"database name with a dash", sqlFS(map[string]string{"0001_a.sql": stmt}), "db-1", `"db-1" is not a plain identifier`},
		{"database name starting with a digit", sqlFS(map[string]string{"0001_a.sql": stmt}), "1db", "not a plain identifier"},
		{"database name with SQL", sqlFS(map[string]string{"0001_a.sql": stmt}), "db; DROP DATABASE x", "not a plain identifier"},
		{"database name with a dot", sqlFS(map[string]string{"0001_a.sql": stmt}), "db.t", "not a plain identifier"},
		{"database name with a backtick", sqlFS(map[string]string{"0001_a.sql": stmt}), "db`", "not a plain identifier"},
		{"non-ASCII database name", sqlFS(map[string]string{"0001_a.sql": stmt}), "héliostat", "not a plain identifier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			migs, err := migrate.Load(tt.fsys, tt.db)
			if err == nil {
				t.Fatalf("Load(%s, %q) = %+v, nil; want an error containing %q", tt.name, tt.db, migs, tt.wantS)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "migrate: ") || !strings.Contains(msg, tt.wantS) {
				t.Errorf("Load(%s, %q) error = %q; want one starting with \"migrate: \" and containing %q", tt.name, tt.db, msg, tt.wantS)
			}
		})
	}
}

// TestLoadEmbedded checks the shipped migrations: numbered 1, 2, 3… without
// gaps, every statement names its database, and every statement is idempotent.
func TestLoadEmbedded(t *testing.T) {
	migs, err := migrate.Load(schemas.Migrations, "heliostat")
	if err != nil {
		t.Fatalf("Load(schemas.Migrations): %v", err)
	}
	if len(migs) == 0 {
		t.Fatal("Load(schemas.Migrations) found no migrations")
	}
	for i, m := range migs {
		if m.Version != uint32(i+1) {
			t.Errorf("migration %d has version %d; want %d (no gaps)", i, m.Version, i+1)
		}
		for j, s := range m.Statements {
			if strings.Contains(s, "{database}") || !strings.Contains(s, "heliostat.") {
				t.Errorf("%04d_%s statement %d does not name database heliostat:\n%s", m.Version, m.Name, j+1, s)
			}
			if strings.HasPrefix(s, "CREATE ") && !strings.Contains(s, " IF NOT EXISTS ") {
				t.Errorf("%04d_%s statement %d is not idempotent (no IF NOT EXISTS):\n%s", m.Version, m.Name, j+1, s)
			}
		}
	}
}

func TestApplyBadDatabaseName(t *testing.T) {
	// The name is checked before the connection is used.
	_, err := migrate.Apply(context.Background(), nil, "heliostat; DROP TABLE x", discard)
	if err == nil || !strings.Contains(err.Error(), "not a plain identifier") {
		t.Errorf("Apply(bad name) error = %v; want one saying the name is not a plain identifier", err)
	}
}

// Integration tests against the real ClickHouse follow. Each makes its own
// database, empty, and drops it at the end.

// emptyDatabase returns a database name that no one uses yet (the database is
// not created) and a connection; the database is dropped when the test ends.
func emptyDatabase(t *testing.T) (string, driver.Conn) {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	db := "t_migrate_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
	if len(db) > 50 {
		db = db[:50]
	}
	db += "_" + hex.EncodeToString(b[:])
	cfg := schematest.Config(t)
	cfg.Database = db
	conn, err := cfg.Open(context.Background(), func(string) string { return "" })
	if err != nil {
		t.Fatalf("connect to test ClickHouse: %v", err)
	}
	t.Cleanup(func() {
		if err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db); err != nil {
			t.Errorf("drop database %s: %v", db, err)
		}
		conn.Close()
	})
	return db, conn
}

func queryStrings(t *testing.T, conn driver.Conn, q string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

func tables(t *testing.T, conn driver.Conn, db string) []string {
	t.Helper()
	return queryStrings(t, conn, "SELECT name FROM system.tables WHERE database = '"+db+"' ORDER BY name")
}

// embeddedLabels returns NNNN_name of every embedded migration and the
// highest version.
func embeddedLabels(t *testing.T, db string) ([]string, uint32) {
	t.Helper()
	migs, err := migrate.Load(schemas.Migrations, db)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, m := range migs {
		labels = append(labels, fmt.Sprintf("%04d_%s", m.Version, m.Name))
	}
	return labels, migs[len(migs)-1].Version
}

func TestApplyEmptyDatabase(t *testing.T) {
	db, conn := emptyDatabase(t)
	ctx := context.Background()
	res, err := migrate.Apply(ctx, conn, db, discard)
	if err != nil {
		t.Fatalf("Apply(%s): %v", db, err)
	}
	labels, last := embeddedLabels(t, db)
	if !reflect.DeepEqual(res.Applied, labels) || res.Current != last {
		t.Errorf("Apply(empty database) = %+v; want Applied %v, Current %d", res, labels, last)
	}
	got := tables(t, conn, db)
	for _, want := range []string{
		"gpu_events", "gpu_inventory", "gpu_samples", "gpu_samples_1m", "ingest_ledger", "schema_migrations",
		"gpu_samples_ledger_mv", "gpu_samples_1m_mv", "gpu_events_ledger_mv",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("after Apply, %s has tables %v; want %s among them", db, got, want)
		}
	}

	// schema_migrations records every migration with its file's checksum.
	migs, err := migrate.Load(schemas.Migrations, db)
	if err != nil {
		t.Fatal(err)
	}
	var wantRows []string
	for _, m := range migs {
		wantRows = append(wantRows, fmt.Sprintf("%d %s %s", m.Version, m.Name, m.Checksum))
	}
	gotRows := queryStrings(t, conn, "SELECT concat(toString(version), ' ', name, ' ', checksum) FROM "+db+".schema_migrations ORDER BY version")
	if !reflect.DeepEqual(gotRows, wantRows) {
		t.Errorf("%s.schema_migrations = %q; want %q", db, gotRows, wantRows)
	}
}

func TestApplyTwice(t *testing.T) {
	db, conn := emptyDatabase(t)
	ctx := context.Background()
	if _, err := migrate.Apply(ctx, conn, db, discard); err != nil {
		t.Fatalf("first Apply: %v", err)
	}
	before := tables(t, conn, db)
	res, err := migrate.Apply(ctx, conn, db, discard)
	if err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	_, last := embeddedLabels(t, db)
	if len(res.Applied) != 0 || res.Current != last {
		t.Errorf("second Apply = %+v; want nothing applied, Current %d", res, last)
	}
	if after := tables(t, conn, db); !reflect.DeepEqual(after, before) {
		t.Errorf("tables after second Apply = %v; want %v", after, before)
	}
	if n := schematest.Count(t, conn, db+".schema_migrations"); n != uint64(last) {
		t.Errorf("schema_migrations has %d rows after two Applies; want %d", n, last)
	}
}

// TestApplyRefusesChangedFile edits an applied migration's file: Apply must
// refuse rather than leave the database different from what the file says.
func TestApplyRefusesChangedFile(t *testing.T) {
	db, conn := emptyDatabase(t)
	ctx := context.Background()
	if _, err := migrate.Apply(ctx, conn, db, discard); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	changed := fstest.MapFS{}
	err := fs.WalkDir(schemas.Migrations, "sql", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := fs.ReadFile(schemas.Migrations, p)
		if strings.HasPrefix(d.Name(), "0002_") {
			raw = append(raw, "-- an edit after release\n"...)
		}
		changed[p] = &fstest.MapFile{Data: raw}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	migs, err := migrate.Load(changed, db)
	if err != nil {
		t.Fatal(err)
	}
	res, err := migrate.ApplyMigrations(ctx, conn, db, migs, discard)
	if err == nil || !strings.Contains(err.Error(), "0002_gpu_samples changed after it was applied") {
		t.Fatalf("Apply(changed 0002) = %+v, %v; want an error saying 0002_gpu_samples changed after it was applied", res, err)
	}
	if len(res.Applied) != 0 {
		t.Errorf("Apply(changed 0002).Applied = %v; want none", res.Applied)
	}
}

// TestApplyRefusesRecordedChecksum records a different checksum for version 1
// before the first Apply: nothing may be applied.
func TestApplyRefusesRecordedChecksum(t *testing.T) {
	db, conn := emptyDatabase(t)
	ctx := context.Background()
	// Applying no migrations creates the database and schema_migrations only.
	if _, err := migrate.ApplyMigrations(ctx, conn, db, nil, discard); err != nil {
		t.Fatalf("apply(no migrations): %v", err)
	}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".schema_migrations (version, name, checksum, applied_at)")
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append(uint32(1), "ingest_ledger", "0123456789abcdef", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	res, err := migrate.Apply(ctx, conn, db, discard)
	if err == nil || !strings.Contains(err.Error(), "0001_ingest_ledger changed after it was applied") || !strings.Contains(err.Error(), "recorded 0123456789abcdef") {
		t.Fatalf("Apply(tampered record) = %+v, %v; want an error saying 0001_ingest_ledger changed after it was applied", res, err)
	}
	if got := tables(t, conn, db); !reflect.DeepEqual(got, []string{"schema_migrations"}) {
		t.Errorf("after a refused Apply, %s has tables %v; want only schema_migrations", db, got)
	}
}

// TestApplyNewMigration adds a migration after the embedded ones: only it runs.
func TestApplyNewMigration(t *testing.T) {
	db, conn := emptyDatabase(t)
	ctx := context.Background()
	if _, err := migrate.Apply(ctx, conn, db, discard); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	migs, err := migrate.Load(schemas.Migrations, db)
	if err != nil {
		t.Fatal(err)
	}
	next := migs[len(migs)-1].Version + 1
	migs = append(migs, migrate.Migration{
		Version:    next,
		Name:       "extra",
		Statements: []string{"CREATE TABLE IF NOT EXISTS " + db + ".extra (x UInt8) ENGINE = Memory"},
		Checksum:   checksum("extra"),
	})
	res, err := migrate.ApplyMigrations(ctx, conn, db, migs, discard)
	if err != nil {
		t.Fatalf("apply(with extra): %v", err)
	}
	label := fmt.Sprintf("%04d_extra", next)
	if !reflect.DeepEqual(res.Applied, []string{label}) || res.Current != next {
		t.Errorf("apply(with extra) = %+v; want Applied [%s], Current %d", res, label, next)
	}
	if !slices.Contains(tables(t, conn, db), "extra") {
		t.Errorf("table %s.extra missing after its migration", db)
	}
}

// TestApplyNewerDatabase: a database a newer heliostat migrated (a rolling
// upgrade, a downgrade) is used as it is: Apply applies nothing, reports the
// versions it does not know and warns.
func TestApplyNewerDatabase(t *testing.T) {
	db, conn := emptyDatabase(t)
	ctx := context.Background()
	migs, err := migrate.Load(schemas.Migrations, db)
	if err != nil {
		t.Fatal(err)
	}
	last := migs[len(migs)-1].Version
	newer := append(slices.Clone(migs), migrate.Migration{Version: last + 1, Name: "newer", Checksum: checksum("newer"),
		Statements: []string{"CREATE TABLE IF NOT EXISTS " + db + ".newer (x UInt8) ENGINE = Memory"}})
	if _, err := migrate.ApplyMigrations(ctx, conn, db, newer, discard); err != nil {
		t.Fatalf("apply the newer binary's migrations: %v", err)
	}
	var logs strings.Builder
	res, err := migrate.Apply(ctx, conn, db, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("Apply on a newer schema: %v", err)
	}
	if len(res.Applied) != 0 || res.Current != last || !slices.Equal(res.Newer, []uint32{last + 1}) {
		t.Errorf("Apply on a newer schema = %+v; want nothing applied, Current %d, Newer [%d]", res, last, last+1)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "newer than this binary") {
		t.Errorf("Apply on a newer schema logged %q; want a warning", logs.String())
	}
}

// TestApplyConcurrent: every part migrates at start-up, so on a site
// powered on at once several apply the same migrations to an empty database
// together. They all succeed, and the database ends as one Apply leaves it.
func TestApplyConcurrent(t *testing.T) {
	db, conn := emptyDatabase(t)
	ctx := context.Background()
	const parts = 4
	errs := make(chan error, parts)
	for range parts {
		go func() {
			_, err := migrate.Apply(ctx, conn, db, discard)
			errs <- err
		}()
	}
	for range parts {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Apply: %v", err)
		}
	}
	res, err := migrate.Apply(ctx, conn, db, discard)
	if err != nil {
		t.Fatalf("Apply after the concurrent ones: %v", err)
	}
	_, last := embeddedLabels(t, db)
	if len(res.Applied) != 0 || res.Current != last || len(res.Newer) != 0 {
		t.Errorf("Apply after the concurrent ones = %+v; want nothing applied, Current %d", res, last)
	}
	if got := queryStrings(t, conn, "SELECT toString(uniqExact(version)) FROM "+db+".schema_migrations"); len(got) != 1 || got[0] != strconv.Itoa(int(last)) {
		t.Errorf("schema_migrations holds versions %v; want %d distinct", got, last)
	}
}

// TestApplyFailingStatement stops at a failing statement, keeps the record of
// what succeeded, and resumes once the migration is fixed.
func TestApplyFailingStatement(t *testing.T) {
	db, conn := emptyDatabase(t)
	ctx := context.Background()
	good := migrate.Migration{Version: 1, Name: "good", Checksum: checksum("good"),
		Statements: []string{"CREATE TABLE IF NOT EXISTS " + db + ".a (x UInt8) ENGINE = Memory"}}
	bad := migrate.Migration{Version: 2, Name: "bad", Checksum: checksum("bad"), Statements: []string{
		"CREATE TABLE IF NOT EXISTS " + db + ".b (x UInt8) ENGINE = Memory",
		"CREATE TABLE IF NOT EXISTS " + db + ".c (x NoSuchType) ENGINE = Memory",
	}}
	res, err := migrate.ApplyMigrations(ctx, conn, db, []migrate.Migration{good, bad}, discard)
	if err == nil || !strings.Contains(err.Error(), "0002_bad statement 2") {
		t.Fatalf("apply(bad statement) = %+v, %v; want an error naming 0002_bad statement 2", res, err)
	}
	if !reflect.DeepEqual(res.Applied, []string{"0001_good"}) || res.Current != 1 {
		t.Errorf("apply(bad statement) = %+v; want Applied [0001_good], Current 1", res)
	}
	if got := queryStrings(t, conn, "SELECT name FROM "+db+".schema_migrations ORDER BY version"); !reflect.DeepEqual(got, []string{"good"}) {
		t.Errorf("schema_migrations = %v; want only good", got)
	}

	fixed := bad
	fixed.Checksum = checksum("fixed")
	fixed.Statements = []string{fixed.Statements[0], "CREATE TABLE IF NOT EXISTS " + db + ".c (x UInt8) ENGINE = Memory"}
	res, err = migrate.ApplyMigrations(ctx, conn, db, []migrate.Migration{good, fixed}, discard)
	if err != nil {
		t.Fatalf("apply(fixed): %v", err)
	}
	if !reflect.DeepEqual(res.Applied, []string{"0002_bad"}) || res.Current != 2 {
		t.Errorf("apply(fixed) = %+v; want Applied [0002_bad], Current 2", res)
	}
}
