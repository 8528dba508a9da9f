package main

import (
	"context"
	"fmt"
	"time"

	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/predictor/live"
)

// predictorPositiveFlags are the --predictor.* flags (live.Config) whose 0
// the predictor reads as the default: predictor run, actuator and up refuse
// them given as 0, as predictor backtest refuses its own.
func predictorPositiveFlags() []string {
	return []string{"predictor.interval", "predictor.retrain-interval", "predictor.history", "predictor.outcome-wait", "predictor.holdout",
		"predictor.batch", "predictor.accuracy-window", "predictor.adapt-rate"}
}

// runPredictorRun is `heliostat predictor run`: the live predictor against
// ClickHouse, serving /metrics and the probes.
func runPredictorRun(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("predictor run", e)
	var ch chconn.Config
	ch.RegisterFlags(fs, e.getenv)
	var cfg live.Config
	cfg.RegisterFlags(fs)
	var lf logFlags
	lf.register(fs)
	var wf webFlags
	wf.register(fs, ":9404")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("predictor run: unexpected argument %q", fs.Arg(0))
	}
	if err := refuseZero(fs, predictorPositiveFlags()...); err != nil {
		return fmt.Errorf("predictor run: %w", err)
	}
	if err := ch.Validate(); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger, err := lf.logger(e.stderr)
	if err != nil {
		return err
	}
	reg, srv, err := serveMetrics(wf, logger)
	if err != nil {
		return err
	}
	return serveWhile(ctx, srv, func(ctx context.Context) error {
		conn, err := waitMigrated(ctx, ch, e, logger, reg, srv.Starting)
		if err != nil {
			return err
		}
		defer conn.Close()
		cfg.Database = ch.Database
		r, err := live.New(cfg, conn, logger, reg, time.Now)
		if err != nil {
			return err
		}
		logger.Info("predictor running", "clickhouse", ch.Addr, "database", ch.Database, "interval", cfg.Interval,
			"retrain_interval", cfg.RetrainInterval, "history", cfg.History, "metrics", srv.URL("/metrics"))
		srv.AddCheck(r.Ready)
		srv.SetReady(true)
		return r.Run(ctx)
	})
}
