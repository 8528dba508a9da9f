package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/migrate"
)

func runSchema(ctx context.Context, args []string, e *env) error {
	if len(args) == 0 || (args[0] != "apply" && args[0] != "show") {
		return subcommandUsage(e, "schema", args, form{"schema apply", "create or upgrade the tables"}, form{"schema show", "print the DDL"})
	}
	sub := args[0]
	fs := newFlagSet("schema "+sub, e)
	var ch chconn.Config
	ch.RegisterFlags(fs, e.getenv)
	var lf logFlags
	lf.register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if sub == "show" {
		migs, err := migrate.Load(schemas.Migrations, ch.Database)
		if err != nil {
			return err
		}
		for _, m := range migs {
			fmt.Fprintf(e.stdout, "-- %04d_%s\n%s;\n\n", m.Version, m.Name, strings.Join(m.Statements, ";\n\n"))
		}
		return nil
	}
	logger, err := lf.logger(e.stderr)
	if err != nil {
		return err
	}
	conn, err := ch.Open(ctx, e.getenv)
	if err != nil {
		return err
	}
	defer conn.Close()
	res, err := migrate.Apply(ctx, conn, ch.Database, logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "schema of %s at %s: version %d (%d applied now)\n", ch.Database, ch.Addr, res.Current, len(res.Applied))
	return nil
}

func applySchema(ctx context.Context, ch chconn.Config, e *env, logger *slog.Logger) error {
	conn, err := openMigrated(ctx, ch, e, logger)
	if err != nil {
		return err
	}
	return conn.Close()
}

// openMigrated opens ClickHouse and brings the database's schema up to date,
// as every long-running component does at start-up.
func openMigrated(ctx context.Context, ch chconn.Config, e *env, logger *slog.Logger) (driver.Conn, error) {
	ch.Logger = logger
	conn, err := ch.Open(ctx, e.getenv)
	if err != nil {
		return nil, err
	}
	if _, err := migrate.Apply(ctx, conn, ch.Database, logger); err != nil {
		conn.Close()
		return nil, fmt.Errorf("apply schema at start-up: %w", err)
	}
	return conn, nil
}
