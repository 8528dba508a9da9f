package main

import (
	"os"
	"testing"

	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// chFlags gives the flags that reach the tests' ClickHouse cfg: its address
// and database, and where it is the chDB pass's (schematest.EnvClickHouse)
// its protocol (HTTP) and compression (none), which the commands' defaults
// (native, lz4) would not reach.
func chFlags(cfg chconn.Config) []string {
	f := []string{"--clickhouse.addr", cfg.Addr}
	if cfg.Database != "" {
		f = append(f, "--clickhouse.database", cfg.Database)
	}
	if cfg.Protocol != "" {
		f = append(f, "--clickhouse.protocol", cfg.Protocol)
	}
	if cfg.Compression != "" {
		f = append(f, "--clickhouse.compression", cfg.Compression)
	}
	return f
}

// skipInCHDBPass skips a slow test that queries no ClickHouse in the chDB
// pass (schematest.EnvClickHouse), which runs this package again for the
// commands' queries: the test already ran in the pass on Debian's
// ClickHouse, and nothing it checks differs on chDB.
func skipInCHDBPass(t *testing.T) {
	t.Helper()
	if os.Getenv(schematest.EnvClickHouse) == "chdb" {
		t.Skipf("%s=chdb: this test queries no ClickHouse; it ran in the pass on Debian's ClickHouse", schematest.EnvClickHouse)
	}
}
