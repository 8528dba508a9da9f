package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/api"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/actuator/demandlog"
	"github.com/heliostat-dev/heliostat/actuator/loop"
	"github.com/heliostat-dev/heliostat/actuator/slurmadapter"
	"github.com/heliostat-dev/heliostat/collector/publish"
	"github.com/heliostat-dev/heliostat/internal/buildinfo"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/internal/health"
	"github.com/heliostat-dev/heliostat/predictor/live"
	"github.com/heliostat-dev/heliostat/schemas"
)

// runActuator is `heliostat actuator`: the control loop against Slurm, the
// audit table in ClickHouse, the live duration predictor, and the advisory
// API with /metrics and the probes on one listener. Dry run unless
// --actuator.apply; touches no partition or node unless allowlisted.
func runActuator(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("actuator", e)
	var (
		ch   chconn.Config
		gc   adapter.GuardConfig
		lc   loop.Config
		ac   api.Config
		sc   slurmadapter.Config
		pc   live.Config
		kc   = publish.Config{SpoolDir: "data/actuator-spool"}
		lf   logFlags
		keep time.Duration
		pubA = fs.Bool("actuator.publish-actions", true, "publish every action, once its outcome is in the actions table, to the "+schemas.TopicActions+" Kafka topic (--kafka.brokers; spooled in --spool.dir while Kafka is unreachable)")
		pred = fs.String("actuator.predictor", "live", "run-time predictions: live (train the duration model from the jobs in ClickHouse in this process and write its predictions, like heliostat predictor run) or none (time limits only)")
	)
	ch.RegisterFlags(fs, e.getenv)
	gc.RegisterFlags(fs)
	lc.RegisterFlags(fs, e.getenv)
	audit.RegisterRetentionFlag(fs, &keep)
	ac.RegisterFlags(fs)
	sc.RegisterFlags(fs)
	pc.RegisterFlags(fs)
	kc.RegisterFlags(fs, e.getenv)
	lf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("actuator: unexpected argument %q", fs.Arg(0))
	}
	if err := refuseZero(fs, predictorPositiveFlags()...); err != nil {
		return fmt.Errorf("actuator: %w", err)
	}
	for _, v := range []interface{ Validate() error }{&ch, gc, lc, ac, sc, pc, kc} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	if *pred != "live" && *pred != "none" {
		return fmt.Errorf("actuator: --actuator.predictor %q: want live or none", *pred)
	}
	logger, err := lf.logger(e.stderr)
	if err != nil {
		return err
	}
	token, err := api.ReadToken(ac, e.getenv, os.ReadFile)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// What needs no ClickHouse is set up first, so that its errors (a
	// spool another process holds) come at once.
	sched, err := slurmadapter.New(sc, nil, reg, time.Now)
	if err != nil {
		return err
	}
	var (
		pub  *publish.Publisher
		apub audit.Publisher
	)
	if *pubA {
		if pub, err = publish.New(kc, logger, reg); err != nil {
			return err
		}
		defer pub.Close()
		apub = pub
	}
	// The API's port answers from the start: /metrics, and /readyz saying
	// what the actuator waits for until ClickHouse is reachable.
	ln, scheme, err := listenAPI(ac, token != "", time.Now, logger)
	if err != nil {
		return err
	}
	defer ln.Close()
	gate := api.NewGate(reg)
	reg.MustRegister(health.Gauge(gate.Ready), buildinfo.Collector())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveAPI(gctx, ln, gate, logger) })
	if pub != nil {
		g.Go(func() error { return pub.Run(gctx) })
	}
	g.Go(func() error {
		defer cancel()
		conn, err := waitMigrated(gctx, ch, e, logger, reg, gate.Waiting)
		if err != nil {
			return stoppedIsNil(gctx, err)
		}
		defer conn.Close()
		var (
			runner    *live.Runner
			predictor loop.Predictor
		)
		if *pred == "live" {
			pc.Database = ch.Database
			if runner, err = live.New(pc, conn, logger, reg, time.Now); err != nil {
				return err
			}
			predictor = runner
		}
		act, err := startActuator(ac, gc, lc, sched, predictor, apub, true, keep, time.Now, conn, ch.Database, token, reg, logger)
		if err != nil {
			return err
		}
		gate.Open(act.api, act.ready)
		mode := "dry run (--actuator.apply not set)"
		if gc.Apply {
			mode = "APPLYING actions"
		}
		logger.Info("actuator running", "mode", mode, "scheduler", "slurm", "partitions", gc.Partitions, "nodes", gc.Nodes,
			"api", scheme+"://"+httpAddr(ln.Addr().String())+"/v1/queue", "token_set", token != "", "predictor", *pred)
		parts, pctx := errgroup.WithContext(gctx)
		if runner != nil {
			parts.Go(func() error { return runner.Run(pctx) })
		}
		parts.Go(func() error { return act.loop.Run(pctx) })
		parts.Go(func() error { return act.expiry.Run(pctx) })
		return parts.Wait()
	})
	return g.Wait()
}

// startedActuator is a started actuator: its control loop and its advisory
// API.
type startedActuator struct {
	loop   *loop.Loop
	expiry *audit.Expiry // of the actions table
	api    http.Handler
	ready  func() error // what /readyz answers
}

// loopback reports whether a listener's address is a loopback one.
func loopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// startActuator builds the control loop and advisory API on sched, with p's
// estimates (nil: time limits), publishing settled actions through pub (nil:
// the actions table only), keeping the demand history in ClickHouse across
// restarts when keepDemand, expiring actions older than auditRetention (0:
// none) on the scheduler's clock schedNow, the API's mutating endpoints
// behind token (empty: none); heliostat actuator runs it on Slurm, heliostat
// up on the simulated cluster. listenAPI opens the port it is served on.
func startActuator(ac api.Config, gc adapter.GuardConfig, lc loop.Config, sched adapter.Scheduler, p loop.Predictor, pub audit.Publisher, keepDemand bool, auditRetention time.Duration, schedNow func() time.Time, conn driver.Conn, db string, token string, reg *prometheus.Registry, logger *slog.Logger) (*startedActuator, error) {
	al, err := audit.New(conn, db, time.Now)
	if err != nil {
		return nil, err
	}
	var auditor loop.Auditor = al
	if pub != nil {
		if auditor, err = audit.NewPublished(al, pub, logger, reg); err != nil {
			return nil, err
		}
	}
	expiry, err := audit.NewExpiry(al, auditRetention, schedNow, logger, reg)
	if err != nil {
		return nil, err
	}
	guard, err := adapter.NewGuard(gc, sched, time.Now)
	if err != nil {
		return nil, err
	}
	var demand loop.DemandStore
	if keepDemand {
		if demand, err = demandlog.New(conn, db, time.Now); err != nil {
			return nil, err
		}
	}
	lp, err := loop.New(lc, guard, auditor, p, demand, logger, reg, time.Now)
	if err != nil {
		return nil, err
	}
	// /readyz also reports the predictor and the publisher the actuator
	// depends on (live.Runner, publish.Publisher).
	checks := []func() error{lp.Ready}
	for _, d := range []any{p, pub} {
		if r, ok := d.(interface{ Ready() error }); ok {
			checks = append(checks, r.Ready)
		}
	}
	ready := func() error {
		var errs []error
		for _, c := range checks {
			errs = append(errs, c())
		}
		return errors.Join(errs...)
	}
	h, err := newActuatorAPI(ac, lp, p, ready, al, token, reg, logger)
	if err != nil {
		return nil, err
	}
	return &startedActuator{loop: lp, expiry: expiry, api: h, ready: h.Ready}, nil
}

// listenAPI opens the advisory API's port, with TLS when configured, and
// warns when a bearer token (tokenSet) would cross a non-loopback network in
// plain HTTP. It returns the listener and its scheme, http or https.
func listenAPI(ac api.Config, tokenSet bool, now func() time.Time, logger *slog.Logger) (net.Listener, string, error) {
	tc, err := ac.TLSConfig(now, logger)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", ac.Listen)
	if err != nil {
		return nil, "", fmt.Errorf("actuator: listen on %s: %w", ac.Listen, err)
	}
	scheme := "http"
	if tc != nil {
		ln, scheme = tls.NewListener(ln, tc), "https"
	} else if tokenSet && !loopback(ln.Addr()) {
		logger.Warn("the API takes its bearer token over plain HTTP on a non-loopback address; anyone on the path can read it: serve HTTPS with --actuator.tls.cert and --actuator.tls.key, or listen on 127.0.0.1 behind a TLS proxy",
			"listen", ln.Addr().String())
	}
	return ln, scheme, nil
}

// newActuatorAPI returns the advisory API served from a loop, a predictor
// (nil: time limits) and the audit log, ready (/readyz) when ready says so.
func newActuatorAPI(ac api.Config, lp *loop.Loop, p loop.Predictor, ready func() error, al *audit.Log, token string, reg *prometheus.Registry, logger *slog.Logger) (*api.Server, error) {
	c := lp.Config()
	return api.New(ac, api.Deps{
		View: lp.View, Ready: ready, Predictor: p, Actions: al.List, Pass: lp.Once, Cluster: c.Cluster,
		UnknownDuration: c.UnknownDuration, QSSF: c.QSSF, Token: token, Gatherer: reg,
	}, logger, reg)
}

// serveAPI serves h on ln until ctx ends, then shuts down within 5s. What
// the HTTP server itself reports (a failed TLS handshake, a client speaking
// plain HTTP to the HTTPS port) goes to logger at Info.
func serveAPI(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(logger.With("component", "api_server").Handler(), slog.LevelInfo)}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("actuator: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("actuator: shutdown: %w", err)
	}
	return nil
}
