package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/heliostat-dev/heliostat/collector/publish"
	"github.com/heliostat-dev/heliostat/collector/slurm"
)

// registerSlurmFlags registers the --slurm.* flags of `collector --source
// slurm` on fs.
func registerSlurmFlags(fs *flag.FlagSet, getenv func(string) string) *slurm.Config {
	var sc slurm.Config
	sc.RegisterFlags(fs, getenv)
	return &sc
}

// runSlurmSource runs `collector --source slurm`: the Slurm job-event source
// (on a host that can run squeue, typically the slurmctld host) and its
// publisher, until ctx ends. It stops in order: the source finishes its poll,
// then the publisher delivers or spools what it holds, then closes.
func runSlurmSource(ctx context.Context, sc slurm.Config, cluster string, pc publish.Config, wf webFlags, logger *slog.Logger) error {
	sc.Cluster = cluster
	if err := sc.Validate(); err != nil {
		return err
	}
	reg, srv, err := serveMetrics(wf, logger)
	if err != nil {
		return err
	}
	pub, err := publish.New(pc, logger, reg)
	if err != nil {
		return err
	}
	src, err := slurm.New(sc, pub, logger, reg, time.Now)
	if err != nil {
		_ = pub.Close()
		return err
	}
	logger.Info("collector running", "source", "slurm", "cluster", cluster, "brokers", pc.Brokers,
		"spool", pc.SpoolDir, "metrics", srv.URL("/metrics"))
	watchPub, stopPub := startPublisher(ctx, pub)
	srv.AddCheck(func() error { return errors.Join(src.Ready(), pub.Ready()) })
	srv.SetReady(true)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(gctx) })
	g.Go(func() error { return src.Run(gctx) })
	g.Go(func() error { return watchPub(gctx) })
	err = g.Wait()
	if perr := stopPub(); perr != nil && err == nil {
		err = perr
	}
	if cerr := pub.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}
