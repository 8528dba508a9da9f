package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/collector/attrib"
	"github.com/heliostat-dev/heliostat/collector/nvml"
	"github.com/heliostat-dev/heliostat/collector/publish"
	"github.com/heliostat-dev/heliostat/collector/synthetic"
	"github.com/heliostat-dev/heliostat/internal/web"
	"github.com/heliostat-dev/heliostat/schemas"
)

func runCollector(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("collector", e)
	var cc collector.Config
	cc.RegisterFlags(fs, e.getenv)
	var pc publish.Config
	pc.RegisterFlags(fs, e.getenv)
	var lf logFlags
	lf.register(fs)
	var ac attrib.Config
	ac.RegisterFlags(fs, e.getenv)
	sc := registerSlurmFlags(fs, e.getenv)
	simf := registerSimFlags(fs, e.getenv)
	source := fs.String("source", "auto", "GPU source: nvml, synthetic, or auto (nvml when a driver is present, else synthetic); or slurm: job events from Slurm (--slurm.*) instead of GPU samples; or sim: a simulated cluster's samples and job events (--sim.*)")
	gpus := fs.Int("synthetic.gpus", 8, "GPUs the synthetic source reports")
	var wf webFlags
	wf.register(fs, ":9400")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("collector: unexpected argument %q", fs.Arg(0))
	}
	if err := refuseZero(fs, append([]string{"collector.interval", "collector.max-ticks-per-message", "synthetic.gpus"}, simPositiveFlags()...)...); err != nil {
		return fmt.Errorf("collector: %w", err)
	}
	if *gpus < 0 {
		return fmt.Errorf("collector: --synthetic.gpus %d: negative (leave the flag out for the default, %s)", *gpus, fs.Lookup("synthetic.gpus").DefValue)
	}
	if err := cc.Validate(); err != nil {
		return err
	}
	if err := pc.Validate(); err != nil {
		return err
	}
	if err := ac.Validate(); err != nil {
		return err
	}
	logger, err := lf.logger(e.stderr)
	if err != nil {
		return err
	}
	if *source == "slurm" {
		return runSlurmSource(ctx, *sc, cc.Cluster, pc, wf, logger)
	}
	if *source == "sim" {
		return runSimSource(ctx, simf, cc.Cluster, pc, wf, logger)
	}
	reg, srv, err := serveMetrics(wf, logger)
	if err != nil {
		return err
	}
	src, closeSrc, err := openSource(*source, cc.Host, *gpus, logger)
	if err != nil {
		return err
	}
	defer closeSrc()
	pub, err := publish.New(pc, logger, reg)
	if err != nil {
		return err
	}
	logger.Info("collector running", "source", src.Name(), "host", cc.Host, "interval", cc.Interval,
		"brokers", pc.Brokers, "spool", pc.SpoolDir, "metrics", srv.URL("/metrics"))
	// Attribution needs the driver's process lists: it runs with the nvml
	// source only (--source nvml, or auto on a host with a driver).
	var extra []func(context.Context) error
	if ns, ok := src.(*nvml.Source); ok && ac.Enabled {
		ac.Host = cc.Host
		jp := &collector.JobPublisher{Pub: pub, Cluster: cc.Cluster, Source: schemas.SourceSlurm, Retries: true}
		a, err := attrib.New(ac, ns, jp, logger, reg, time.Now)
		if err != nil {
			return err
		}
		extra = append(extra, a.Run)
		srv.AddCheck(a.Ready)
	}
	srv.AddCheck(pub.Ready)
	srv.SetReady(true)
	return runCollectorParts(ctx, cc, src, pub, srv, logger, reg, extra...)
}

// runCollectorParts runs the collector and its publisher until ctx ends, then
// stops them in order: the collector publishes what it holds, the publisher
// delivers or spools it, and only then does the publisher stop. extra are
// further parts publishing through pub (the GPU attributor), run and stopped
// alongside the collector.
func runCollectorParts(ctx context.Context, cc collector.Config, src collector.Source, pub *publish.Publisher, srv *web.Server, logger *slog.Logger, reg prometheus.Registerer, extra ...func(context.Context) error) error {
	c, err := collector.New(cc, src, pub, logger, reg, time.Now)
	if err != nil {
		return err
	}
	if srv != nil {
		srv.AddCheck(c.Ready)
	}
	if ns, ok := src.(*nvml.Source); ok {
		if err := reg.Register(ns.Collector()); err != nil {
			return fmt.Errorf("collector: register NVML metrics: %w", err)
		}
	}
	watchPub, stopPub := startPublisher(ctx, pub)
	g, gctx := errgroup.WithContext(ctx)
	if srv != nil {
		g.Go(func() error { return srv.Run(gctx) })
	}
	g.Go(func() error { return c.Run(gctx) })
	for _, run := range extra {
		g.Go(func() error { return run(gctx) })
	}
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

// startPublisher runs pub.Run, which replays the spool, in a goroutine of its
// own: it must outlive the parts that publish through pub, so that what they
// publish while stopping is still delivered or spooled. stop ends Run and
// returns its error. watch, run among the parts, returns an error if Run ends
// before stop is called, so that the parts stop and the process exits with
// that error (and systemd restarts it) rather than go on spooling what would
// never be replayed; it returns nil once its context is done.
func startPublisher(ctx context.Context, pub *publish.Publisher) (watch func(context.Context) error, stop func() error) {
	pubCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var runErr error
	go func() {
		runErr = pub.Run(pubCtx)
		close(done)
	}()
	watch = func(ctx context.Context) error {
		select {
		case <-done:
			if runErr == nil {
				return errors.New("collector: publisher stopped replaying its spool")
			}
			return fmt.Errorf("collector: publisher stopped replaying its spool: %w", runErr)
		case <-ctx.Done():
			return nil
		}
	}
	stop = func() error {
		cancel()
		<-done
		return runErr
	}
	return watch, stop
}

// openSource returns the GPU source and a function that releases it.
func openSource(kind, host string, gpus int, logger *slog.Logger) (collector.Source, func(), error) {
	switch kind {
	case "nvml", "auto":
		s, err := nvml.Open(logger, time.Now)
		if err == nil {
			return s, func() { _ = s.Close() }, nil
		}
		if kind == "nvml" || !errors.Is(err, nvml.ErrNoDriver) {
			return nil, nil, err
		}
		logger.Info("no NVIDIA driver on this host; using synthetic GPUs", "gpus", gpus)
		fallthrough
	case "synthetic":
		if host == "" {
			host, _ = os.Hostname()
		}
		return synthetic.New(host, gpus, uint64(time.Now().UnixNano())), func() {}, nil
	}
	return nil, nil, fmt.Errorf("collector: --source %q: want nvml, synthetic, sim, slurm or auto", kind)
}
