package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/api"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/actuator/loop"
	"github.com/heliostat-dev/heliostat/actuator/simadapter"
	"github.com/heliostat-dev/heliostat/analytics"
	"github.com/heliostat-dev/heliostat/analytics/report"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/collector/nvml"
	"github.com/heliostat-dev/heliostat/collector/publish"
	"github.com/heliostat-dev/heliostat/collector/sim"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/internal/chserver"
	"github.com/heliostat-dev/heliostat/internal/devstack"
	"github.com/heliostat-dev/heliostat/internal/web"
	"github.com/heliostat-dev/heliostat/predictor/live"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/migrate"
)

// upKafkaRetention is up's --kafka.retention default: a week of messages,
// about 16 GB of data/kafka at the simulated cluster's default rate.
const upKafkaRetention = 7 * 24 * time.Hour

// upClickHousePort is up's --clickhouse.port default: its ClickHouse's
// native port on 127.0.0.1, not the 9000 that --clickhouse.addr defaults
// to elsewhere.
const upClickHousePort = 19000

// hintUpClickHouse ends the error of a connection refused at ch's address
// with where up's ClickHouse listens, for a command that a user points at
// up's data (report, analytics run, ...) when --clickhouse.addr was not
// given on fs's command line: its address is the default, or
// $HELIOSTAT_CLICKHOUSE_ADDR's, and the error says which.
func hintUpClickHouse(ch *chconn.Config, fs *flag.FlagSet, getenv func(string) string) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "clickhouse.addr" })
	if given {
		return
	}
	from := "is --clickhouse.addr's default"
	if getenv("HELIOSTAT_CLICKHOUSE_ADDR") != "" {
		from = "is from $HELIOSTAT_CLICKHOUSE_ADDR"
	}
	ch.RefusedHint = fmt.Sprintf("%s %s; `heliostat up`'s ClickHouse listens on 127.0.0.1:%d unless given another --clickhouse.port: for its data, pass --clickhouse.addr 127.0.0.1:%[3]d",
		ch.Addr, from, upClickHousePort)
}

func runUp(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("up", e)
	dataDir := fs.String("data-dir", "data", "directory for the broker's log, ClickHouse's data and the collector's spool; a second run resumes from it")
	kafkaPort := fs.Int("kafka.port", 9092, "port of the embedded Kafka-protocol broker on 127.0.0.1")
	chPort := fs.Int("clickhouse.port", upClickHousePort, "native port of the local ClickHouse server on 127.0.0.1")
	kafkaRetention := fs.Duration("kafka.retention", upKafkaRetention, "the embedded broker drops messages written longer ago than this (wall clock, checked hourly; ingest reads them within seconds); 0 keeps all")
	var wf webFlags
	// The report and the advisory API show user names and jobs, without a
	// token by default: up serves them on this host only, as its broker and
	// ClickHouse (a deployed part listens on every interface).
	wf.register(fs, "127.0.0.1:9400")
	source := fs.String("source", "auto", "what runs the cluster: sim (a simulated GPU cluster with jobs), nvml (this host's GPUs), synthetic (fake GPUs, no jobs), or auto (nvml when a driver is present, else sim)")
	gpus := fs.Int("synthetic.gpus", 8, "GPUs the synthetic source reports")
	interval := fs.Duration("collector.interval", 5*time.Second, "sampling interval of the nvml and synthetic sources (>= 100ms)")
	retention := fs.Duration("retention", 30*24*time.Hour, "drop raw sample and GPU event partitions older than this on the cluster's clock (the simulated cluster's runs ahead of the wall clock); 0 keeps all")
	statusEvery := fs.Duration("status-interval", 30*time.Second, "print the jobs and samples status line this often (0 disables)")
	simf := registerSimFlags(fs, e.getenv)
	var sumc ingest.SummaryConfig
	sumc.RegisterFlags(fs)
	var (
		predc live.Config
		gc    adapter.GuardConfig
		lc    loop.Config
		ac    api.Config
		anc   analytics.Config
	)
	anc.RegisterFlags(fs)
	predc.RegisterFlags(fs)
	gc.RegisterFlags(fs)
	lc.RegisterFlags(fs, e.getenv)
	var auditKeep time.Duration
	audit.RegisterRetentionFlag(fs, &auditKeep)
	ac.RegisterFlags(fs)
	var lf logFlags
	lf.register(fs)
	// up runs the pipeline at a demo's pace and closes the loop on the
	// simulated cluster: its defaults differ from a deployed part's, and
	// -h shows them.
	for _, d := range []struct{ name, value string }{
		{"analytics.interval", "1m"}, // 1 m of wall time is an hour of the simulated cluster's
		{"actuator.interval", "5s"},  // 5 s is five simulated minutes
		{"actuator.apply", "true"},
		{"actuator.partitions", "*"},
		{"actuator.nodes", "*"},
		{"sim.backfill", "true"}, // Helios' long-tailed run times clog a FIFO without it
		{"sim.cluster", "local"},
		{"actuator.cluster", "local"},
		// This host only, as --web.listen-address.
		{"actuator.listen-address", "127.0.0.1:9403"},
	} {
		if err := setDefault(fs, d.name, d.value); err != nil {
			return fmt.Errorf("up: %w", err)
		}
	}
	if f := fs.Lookup("actuator.cluster"); f != nil {
		f.Usage = "not for up, whose actuator acts on the simulated cluster: name it with --sim.cluster"
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("up: unexpected argument %q", fs.Arg(0))
	}
	if err := refuseZero(fs, append(append([]string{"collector.interval", "synthetic.gpus"}, simPositiveFlags()...), predictorPositiveFlags()...)...); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"kafka.port", *kafkaPort}, {"clickhouse.port", *chPort}} {
		if p.v < 0 || p.v > 65535 {
			return fmt.Errorf("up: --%s %d: not a port (0 picks a free one)", p.name, p.v)
		}
	}
	if *gpus < 0 {
		return fmt.Errorf("up: --synthetic.gpus %d: negative (leave the flag out for the default, %s)", *gpus, fs.Lookup("synthetic.gpus").DefValue)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		zero string
	}{
		{"status-interval", *statusEvery, "0 turns the status line off"},
		{"kafka.retention", *kafkaRetention, "0 keeps all"},
		{"retention", *retention, "0 keeps all"},
		{"actuator.audit-retention", auditKeep, "0 keeps all"},
	} {
		if d.v < 0 {
			return fmt.Errorf("up: --%s %v: negative (%s)", d.name, d.v, d.zero)
		}
	}
	// The simulated cluster is not a real scheduler: up closes the loop on
	// it (the actuator applies its actions to every partition and node)
	// unless told otherwise. With nvml there is no scheduler to act on, so
	// the actuator does not run.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["actuator.cluster"] {
		return errors.New("up: --actuator.cluster: up's actuator acts on the simulated cluster; name it with --sim.cluster")
	}
	// The analytics flags too, before anything starts (NewRunner checks
	// them again once ClickHouse runs); the database is up's.
	anc.Database = "heliostat"
	for _, v := range []interface{ Validate() error }{sumc, predc, gc, lc, ac, &anc} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	switch *source {
	case "auto", "sim", "nvml", "synthetic":
	default:
		return fmt.Errorf("--source %q: want auto, sim, nvml or synthetic", *source)
	}
	logger, err := lf.logger(e.stderr)
	if err != nil {
		return err
	}
	if err := simf.cfg.Validate(); err != nil {
		return err
	}
	host, _ := os.Hostname()
	cc := collector.Config{Cluster: "local", Host: host, Interval: *interval}
	if err := cc.Validate(); err != nil {
		return err
	}

	// Pick the source before starting servers, so that a bad choice fails
	// fast.
	var (
		src      collector.Source
		closeSrc = func() {}
	)
	if *source != "sim" {
		kind := *source
		if kind == "auto" {
			kind = "nvml"
		}
		s, closeFn, err := openSource(kind, cc.Host, *gpus, logger)
		switch {
		case err == nil:
			src, closeSrc = s, closeFn
		case *source == "auto" && errors.Is(err, nvml.ErrNoDriver):
			logger.Info("no NVIDIA driver on this host; running the simulated cluster")
			*source = "sim"
		default:
			return err
		}
	}
	defer closeSrc()
	work, err := simf.workload(logger)
	if err != nil {
		return err
	}

	dir, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	// One up per data directory, taken before anything in it is touched: a
	// second would run on the first's ClickHouse data, broker log, spool
	// and saved simulation.
	lock, err := lockDataDir(dir)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	defer lock.Close()
	// A stop signal during start-up stops up as one after it does:
	// cleanly, saying what it was doing.
	interrupted := func(doing string, err error) error {
		if ctx.Err() == nil {
			return err
		}
		logger.Info("interrupted while "+doing, "cause", context.Cause(ctx))
		return nil
	}
	logger.Info("starting embedded broker and local clickhouse", "data_dir", dir)
	stack, err := devstack.Start(ctx, devstack.Config{Dir: dir, KafkaPort: *kafkaPort, ClickHousePort: *chPort, Install: true}, logger)
	if err != nil {
		return interrupted("starting ClickHouse", err)
	}
	defer func() {
		if err := stack.Stop(); err != nil {
			logger.Warn("stopping the stack", "err", err)
		}
		logger.Info("stopped")
	}()
	logger.Info("local clickhouse started", "pid", stack.ClickHouse.PID(), "addr", stack.ClickHouse.Addr(), "log", stack.ClickHouse.ErrorLog())
	broker := stack.KafkaAddr()
	ch := chconn.Config{Addr: stack.ClickHouse.Addr(), Database: "heliostat"}
	conn, err := ch.Open(ctx, e.getenv)
	if err != nil {
		return interrupted("connecting to ClickHouse", err)
	}
	defer conn.Close()
	if _, err := migrate.Apply(ctx, conn, ch.Database, logger); err != nil {
		return interrupted("applying the ClickHouse migrations", err)
	}
	// kfake, like Kafka, trims only topics with a retention. Set on the
	// topics an earlier release created without one, too.
	topics := ingest.TopicSpec{Partitions: 4, Configs: map[string]string{"retention.ms": "-1"}, SetOnExisting: true}
	if *kafkaRetention > 0 {
		topics.Configs["retention.ms"] = strconv.FormatInt(max(kafkaRetention.Milliseconds(), 1), 10)
	}
	if err := ingest.EnsureTopicsWith(ctx, nil, []string{broker}, topics, append(schemas.DataTopics(), schemas.TopicActions)...); err != nil {
		return interrupted("creating the Kafka topics", err)
	}

	reg, srv, err := serveMetrics(wf, logger)
	if err != nil {
		return err
	}
	// The samples' retention runs on their clock (RetainSamples below),
	// not in ingest's wall-clock loop.
	in, err := ingest.New(ingest.Config{Brokers: []string{broker}, Group: upIngestGroup, ClickHouse: ch, DedupeWindow: ingest.DefaultDedupeWindow}, conn, logger, reg)
	if err != nil {
		return err
	}
	// As the ingest command does: the retention just set (--kafka.retention;
	// forever when 0), for the pipeline dashboard's lag-age panel and
	// HeliostatIngestNearRetention.
	if err := in.CheckRetention(ctx); err != nil {
		logger.Warn("could not read the topics' retention; running without it", "err", err)
	}
	sumc.Database = ch.Database
	summarizer, err := ingest.NewSummarizer(sumc, conn, logger, reg, time.Now)
	if err != nil {
		return err
	}
	predc.Database = ch.Database
	runner, err := live.New(predc, conn, logger, reg, time.Now)
	if err != nil {
		return err
	}
	pub, err := publish.New(publish.Config{Brokers: []string{broker}, SpoolDir: filepath.Join(dir, "spool")}, logger, reg)
	if err != nil {
		return err
	}
	var (
		s            *sim.Sim
		restored     []string
		describe     string
		act          *startedActuator
		actLn        net.Listener
		actScheme    string
		actuatorLine string
	)
	if *source == "sim" {
		// The simulated clock runs ahead of the wall clock. Unless told
		// where to start, a second run continues the first one's timeline,
		// so that its jobs, samples and demand follow the earlier ones
		// instead of overlapping them.
		if !set["sim.start"] {
			if simf.cfg.Start, err = resumeSimStartFrom(ctx, conn, ch.Database, []string{broker}, dir, simf.cfg.Cluster, time.Now(), logger); err != nil {
				_ = pub.Close()
				return interrupted("reading where the last run stopped", err)
			}
		}
		// A restart continues the simulated cluster: its jobs are saved at
		// the stop, not ended.
		simf.cfg.KeepJobs = true
		if s, err = sim.New(simf.cfg, work, nil, pub, logger, reg, time.Now); err != nil {
			_ = pub.Close()
			return err
		}
		if restored, err = restoreSim(dir, s, logger); err != nil {
			_ = pub.Close()
			return err
		}
		c := s.Config()
		// Its GPUs are known, the whole cluster's and each VC's: without
		// them the analytics would take a VC's capacity to be the most GPUs
		// its jobs held at once (and the cluster's, from the VCs, to be
		// those of the VCs that had jobs in the window).
		if !set["analytics.capacity"] && !set["analytics.capacity-file"] {
			anc.Capacity = append(anc.Capacity, analytics.Capacity{Cluster: c.Cluster, GPUs: uint32(c.Nodes * c.GPUsPerNode)})
			for _, vc := range sim.MergeVCs(c.VCList()) {
				anc.Capacity = append(anc.Capacity, analytics.Capacity{Cluster: c.Cluster, VC: vc.Name, GPUs: uint32(vc.Nodes * c.GPUsPerNode)})
			}
		}
		describe = fmt.Sprintf("simulated cluster %q: %d nodes × %d GPUs, %g× real time, FIFO with backfill=%v", c.Cluster, c.Nodes, c.GPUsPerNode, c.Speedup, c.Backfill)
		lc.Cluster = c.Cluster
		// With the timeline continued, the demand the loop saved in an
		// earlier run lies in this run's past: the loop keeps its demand
		// history in ClickHouse and forecasts from it after a restart.
		// One registry, served once: at --web.listen-address.
		ac.MetricsAt = srv.URL("/metrics")
		token, err := api.ReadToken(ac, e.getenv, os.ReadFile)
		if err == nil {
			act, err = startActuator(ac, gc, lc, simadapter.New(s), runner, pub, true, auditKeep, s.Now, conn, ch.Database, token, reg, logger)
		}
		if err == nil {
			actLn, actScheme, err = listenAPI(ac, token != "", time.Now, logger)
		}
		if err != nil {
			_ = pub.Close()
			return err
		}
		defer actLn.Close()
		mode := "dry run"
		if gc.Apply {
			mode = "applying QSSF priorities and power plans to the simulated cluster"
		}
		actuatorLine = fmt.Sprintf("  actuator        %s://%s/v1/queue   (%s; /v1/power-plan, /v1/actions)\n", actScheme, httpAddr(actLn.Addr().String()), mode)
	} else {
		describe = fmt.Sprintf("%s source, %s interval, host %s", src.Name(), cc.Interval, cc.Host)
	}
	// The simulated cluster's jobs run ahead of the wall clock: analytics
	// and the report take their windows from the simulated time.
	clock := time.Now
	if s != nil {
		clock = func() time.Time { return s.Stats().Now }
	}
	anc.Database = ch.Database
	characterize, err := analytics.NewRunner(anc, conn, logger, reg, clock)
	if err != nil {
		_ = pub.Close()
		return err
	}
	page, err := report.NewHandler(report.HandlerConfig{Database: ch.Database, Registry: reg}, conn, logger, clock)
	if err != nil {
		_ = pub.Close()
		return err
	}
	srv.Handle("/report", page)
	chExits := prometheus.NewCounter(prometheus.CounterOpts{Name: "heliostat_up_clickhouse_exits_total",
		Help: "Times up's ClickHouse server exited on its own (killed, crashed, out of memory); up starts it again, and stops after 5 failed starts in a row."})
	if err := reg.Register(chExits); err != nil {
		_ = pub.Close()
		return fmt.Errorf("up: %w", err)
	}
	// Nothing fails from here until the simulated cluster runs, and its
	// jobs are saved again once it has stopped: the saved ones can leave
	// the file. Up to here, a failed start leaves them to the next.
	if s != nil {
		if err := takeSimState(dir, s.Config().Cluster); err != nil {
			_ = pub.Close()
			return err
		}
	}

	fmt.Fprintf(e.stdout, `heliostat is up (Ctrl-C stops it; running it again resumes on the same data)
  data directory  %s
  kafka broker    %s   (topics %s, %s, %s, %s)
  clickhouse      %s   (native protocol; database %s)
                  clickhouse-client --port %d --query "SELECT state, count() FROM %s.jobs FINAL GROUP BY state"
  metrics         %s
  report          %s   (characterization, recomputed every %s)
  collector       %s
  predictor       live duration model, retrained every %s (tables predictions, prediction_outcomes)
%s`, dir, broker, schemas.TopicGPUSamples, schemas.TopicGPUEvents, schemas.TopicJobEvents, schemas.TopicAllocations,
		ch.Addr, ch.Database, *chPort, ch.Database, srv.URL("/metrics"), srv.URL("/report"), anc.Interval, describe, predc.RetrainInterval, actuatorLine)

	// Ingest, the summarizer and the status line run under their own context
	// so that they stop only after the collector has published its last
	// messages.
	ingestCtx, stopIngest := context.WithCancel(context.WithoutCancel(ctx))
	defer stopIngest()
	var ig errgroup.Group
	ig.Go(func() error { return in.Run(ingestCtx) })
	ig.Go(func() error { return summarizer.Run(ingestCtx) })
	ig.Go(func() error { return runner.Run(ingestCtx) })
	ig.Go(func() error { return characterize.Run(ingestCtx) })
	// The samples carry the simulated cluster's time, which runs ahead of
	// the wall clock: their retention compares them with it, every
	// simulated hour (a minute at 60×), at most hourly.
	retainEvery := time.Hour
	if s != nil {
		retainEvery = min(max(time.Duration(float64(time.Hour)/s.Config().Speedup), time.Second), time.Hour)
	}
	ig.Go(func() error {
		return in.RetainSamples(ingestCtx, ingest.SampleRetention{Keep: *retention, Now: clock, Every: retainEvery})
	})
	// The actuator runs beside the collector or simulator, so that it
	// stops before their publisher, which also publishes its actions,
	// is closed.
	var parts []func(context.Context) error
	if act != nil {
		parts = append(parts, act.loop.Run, act.expiry.Run, func(ctx context.Context) error { return serveAPI(ctx, actLn, act.api, logger) })
	}
	if s != nil {
		parts = append(parts, func(ctx context.Context) error {
			return keepSimClock(ctx, dir, s.Config().Cluster, s.Now, logger)
		}, func(ctx context.Context) error {
			return closeLostSimJobs(ctx, s, restored, []string{broker}, upIngestGroup, conn, ch.Database, logger)
		})
	}
	ig.Go(func() error {
		return reportStatus(ingestCtx, conn, ch.Database, *statusEvery, e.stdout, simClock(s), logger)
	})
	srv.AddCheck(func() error {
		return errors.Join(pub.Ready(), in.Ready(), summarizer.Ready(), runner.Ready(), characterize.Ready())
	})
	if act != nil {
		srv.AddCheck(act.loop.Ready)
	}
	srv.SetReady(true)
	// up's ClickHouse is its child: should it exit (killed, out of
	// memory), up starts it again on the same data while the parts retry,
	// and stops if it cannot (chExits counts its exits). The supervisor
	// stops last, so that ingest's last flush has a ClickHouse.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	superviseCtx, stopSupervising := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSupervising()
	supervised := make(chan error, 1)
	go func() {
		err := stack.ClickHouse.Supervise(superviseCtx, chserver.SuperviseConfig{Exited: chExits.Inc})
		if err != nil {
			stopRun(err)
		}
		supervised <- err
	}()
	if s != nil {
		err = runSimParts(runCtx, s, pub, srv, parts...)
		// Where the simulation stopped, now that it has.
		if serr := saveSimState(dir, s); serr != nil {
			logger.Warn("could not save the simulated clock; a restart may overlap this run's timeline", "err", serr)
		}
	} else {
		err = runCollectorParts(runCtx, cc, src, pub, srv, logger, reg, parts...)
	}
	// What ingest has not read yet stays in the broker's log on disk and is
	// ingested on the next start.
	stopIngest()
	if ierr := ig.Wait(); ierr != nil && err == nil {
		err = ierr
	}
	stopSupervising()
	if serr := <-supervised; serr != nil {
		// What the parts reported followed from it.
		return fmt.Errorf("up: stopped: its ClickHouse is down: %w", serr)
	}
	return err
}

// simClock returns the simulated time for the status line, or nil.
func simClock(s *sim.Sim) func() string {
	if s == nil {
		return nil
	}
	return func() string {
		st := s.Stats()
		return fmt.Sprintf("sim %s (%d pending, %d running, %d/%d GPUs busy)", st.Now.UTC().Format("2006-01-02 15:04"), st.Pending, st.Running, st.GPUsBusy, st.GPUs)
	}
}

// dataDirLock is the file in up's data directory that the running up
// holds an exclusive flock on.
const dataDirLock = "LOCK"

// lockDataDir creates dir and takes an exclusive, non-blocking flock on
// its LOCK file, which the kernel drops when the file is closed or the
// process dies; the caller closes the file when it is done with dir.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the data directory: %w", err)
	}
	path := filepath.Join(dir, dataDirLock)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another heliostat up (it holds %s): stop it, or pass another --data-dir", dir, path)
		}
		return nil, fmt.Errorf("lock the data directory %s: %w", dir, err)
	}
	return f, nil
}

// httpAddr turns a listener address into one a browser can open.
func httpAddr(addr string) string { return web.DisplayAddr(addr) }
