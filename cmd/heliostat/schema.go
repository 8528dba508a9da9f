package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/internal/health"
	"github.com/heliostat-dev/heliostat/internal/metricsreg"
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
	if fs.NArg() > 0 {
		return fmt.Errorf("schema %s: unexpected argument %q", sub, fs.Arg(0))
	}
	hintUpClickHouse(&ch, fs, e.getenv)
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
// failing at once when it cannot (one-shot commands; long-running parts
// wait, with waitMigrated).
func openMigrated(ctx context.Context, ch chconn.Config, e *env, logger *slog.Logger) (driver.Conn, error) {
	ch.Logger = logger
	conn, err := ch.Open(ctx, e.getenv)
	if err != nil {
		return nil, err
	}
	if err := migrateAtStart(ch.Database, logger)(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// migrateAtStart returns the start-up migration of database on a
// connection.
func migrateAtStart(database string, logger *slog.Logger) func(context.Context, driver.Conn) error {
	return func(ctx context.Context, conn driver.Conn) error {
		if _, err := migrate.Apply(ctx, conn, database, logger); err != nil {
			return fmt.Errorf("apply schema at start-up: %w", err)
		}
		return nil
	}
}

// waitMigrated is openMigrated for a long-running part: while ClickHouse
// cannot be reached or the migration fails, it logs each attempt, tells
// starting what it waits for (the part's not-ready probe), sets
// heliostat_start_waiting{dependency="clickhouse"} on reg to 1
// (HeliostatWaitingForClickHouse), and tries again with backoff
// (chconn.OpenWait) until ctx ends.
func waitMigrated(ctx context.Context, ch chconn.Config, e *env, logger *slog.Logger, reg prometheus.Registerer, starting func(error)) (driver.Conn, error) {
	ch.Logger = logger
	waiting := health.StartWaiting()
	if err := metricsreg.Register(reg, waiting); err != nil {
		return nil, fmt.Errorf("register start-up metrics: %w", err)
	}
	chWaiting := waiting.WithLabelValues("clickhouse")
	var since time.Time
	conn, err := ch.OpenWait(ctx, e.getenv, migrateAtStart(ch.Database, logger), func(err error, attempt int, retryIn time.Duration) {
		if attempt == 1 {
			since = time.Now()
			chWaiting.Set(1)
		}
		logger.Warn("ClickHouse not usable at start-up; waiting for it", "addr", ch.Addr, "database", ch.Database,
			"attempt", attempt, "retry_in", retryIn, "err", err)
		starting(fmt.Errorf("waiting for ClickHouse at %s since %s (attempt %d): %w", ch.Addr, since.UTC().Format(time.RFC3339), attempt, err))
	})
	if err != nil {
		return nil, err
	}
	starting(nil)
	chWaiting.Set(0)
	if !since.IsZero() {
		logger.Info("ClickHouse reached", "addr", ch.Addr, "waited", time.Since(since).Round(time.Second))
	}
	return conn, nil
}
