package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/schemas"
)

func runIngest(ctx context.Context, args []string, e *env) error {
	if len(args) > 0 && args[0] == "reset-partition" {
		return runIngestReset(ctx, args[1:], e)
	}
	fs := newFlagSet("ingest", e)
	var cfg ingest.Config
	cfg.RegisterFlags(fs, e.getenv)
	var sc ingest.SummaryConfig
	sc.RegisterFlags(fs)
	var lf logFlags
	lf.register(fs)
	var wf webFlags
	wf.register(fs, ":9401")
	partitions := fs.Int("kafka.partitions", 12, "partitions of the topics ingest creates when they are missing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		// Flags after it would be ignored too: the parse stops there.
		return fmt.Errorf("ingest: unexpected argument %q (flags after it were not read)", fs.Arg(0))
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := sc.Validate(); err != nil {
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
		conn, err := waitMigrated(ctx, cfg.ClickHouse, e, logger, reg, srv.Starting)
		if err != nil {
			return err
		}
		defer conn.Close()
		in, err := ingest.New(cfg, conn, logger, reg)
		if err != nil {
			return err
		}
		sc.Database = cfg.ClickHouse.Database
		sum, err := ingest.NewSummarizer(sc, conn, logger, reg, time.Now)
		if err != nil {
			return err
		}
		if err := ingest.EnsureTopicsVia(ctx, in.Security(), cfg.Brokers, *partitions, append(in.Topics(), schemas.TopicDeadletter, schemas.TopicActions)...); err != nil {
			if errors.Is(err, ingest.ErrCompactedTopic) {
				// Kafka deletes what ingest has not read yet: refuse
				// rather than lose messages unseen.
				return err
			}
			logger.Warn("could not create topics; expecting them to exist", "err", err)
		}
		if err := in.CheckRetention(ctx); err != nil {
			logger.Warn("could not read the topics' retention; running without it", "err", err)
		}
		logger.Info("ingest running", "brokers", cfg.Brokers, "kafka_security", in.Security().String(), "group", cfg.Group, "clickhouse", cfg.ClickHouse.Addr,
			"database", cfg.ClickHouse.Database, "metrics", srv.URL("/metrics"))
		srv.AddCheck(func() error { return errors.Join(in.Ready(), sum.Ready()) })
		srv.SetReady(true)
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error { return in.Run(gctx) })
		g.Go(func() error { return sum.Run(gctx) })
		return g.Wait()
	})
}

// runIngestReset is `heliostat ingest reset-partition`: after ingest
// reported a partition rewound (a topic deleted and created again, or
// messages the broker lost), it forgets the ledger, intents and sequence
// marks of the partition from --from on, and its heads, and commits --from
// for the group,
// with every replica stopped (see ingest.Ingester.ResetPartition).
func runIngestReset(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("ingest reset-partition", e)
	var cfg ingest.Config
	cfg.RegisterFlags(fs, e.getenv)
	var lf logFlags
	lf.register(fs)
	topic := fs.String("topic", "", "the topic of the rewound partition (required), e.g. "+schemas.TopicGPUSamples)
	partition := fs.Int("partition", -1, "the rewound partition (required)")
	from := fs.Int64("from", -1, "read the partition again from this offset (required): 0 for a topic deleted and created again, the log end ingest logged for messages the broker lost")
	yes := fs.Bool("yes", false, "apply; without it, only check and log what would be done")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("ingest reset-partition: unexpected argument %q (flags after it were not read)", fs.Arg(0))
	}
	switch {
	case *topic == "":
		return errors.New("ingest reset-partition: --topic is required")
	case *partition < 0:
		return errors.New("ingest reset-partition: --partition is required (0 or more)")
	case *from < 0:
		return errors.New("ingest reset-partition: --from is required (0 or more)")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger, err := lf.logger(e.stderr)
	if err != nil {
		return err
	}
	conn, err := cfg.ClickHouse.Open(ctx, e.getenv)
	if err != nil {
		return err
	}
	defer conn.Close()
	in, err := ingest.New(cfg, conn, logger, prometheus.NewRegistry())
	if err != nil {
		return err
	}
	return in.ResetPartition(ctx, *topic, *partition, *from, *yes)
}
