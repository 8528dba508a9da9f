package schemas

import "embed"

// Migrations holds the ClickHouse DDL as numbered files, NNNN_name.sql, applied
// in order by schemas/migrate. Statements are separated by ';' at the end of a
// line and name their database as {database}. Every statement is idempotent
// (IF NOT EXISTS) and runs on ClickHouse 18.16 and on current releases.
//
//go:embed sql/*.sql
var Migrations embed.FS
