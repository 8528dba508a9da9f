package dashboards

import (
	"context"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// insertJobRows writes rows straight into db's jobs and job_runs (not
// through job_events and their views), the same rows to both, each row the
// values of columns: a test that seeds one row per job gives each job one
// run. The panels over GPUs held and wanted read job_runs, the others jobs.
func insertJobRows(tb testing.TB, conn driver.Conn, db, columns string, rows ...[]any) {
	tb.Helper()
	ctx := context.Background()
	for _, table := range []string{"jobs", "job_runs"} {
		b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+"."+table+" ("+columns+")")
		if err != nil {
			tb.Fatalf("insert into %s.%s: %v", db, table, err)
		}
		for _, r := range rows {
			if err := b.Append(r...); err != nil {
				tb.Fatalf("insert into %s.%s: %v", db, table, err)
			}
		}
		if err := b.Send(); err != nil {
			tb.Fatalf("insert into %s.%s: %v", db, table, err)
		}
	}
}
