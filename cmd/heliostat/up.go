package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/collector/publish"
	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/internal/devstack"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/migrate"
)

func runUp(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("up", e)
	dataDir := fs.String("data-dir", "data", "directory for the broker's log, ClickHouse's data and the collector's spool; a second run resumes from it")
	kafkaPort := fs.Int("kafka.port", 9092, "port of the embedded Kafka-protocol broker on 127.0.0.1")
	chPort := fs.Int("clickhouse.port", 19000, "native port of the local ClickHouse server on 127.0.0.1")
	listen := fs.String("web.listen-address", ":9400", "address of /metrics and the /-/healthy, /-/ready probes")
	source := fs.String("source", "auto", "GPU source: nvml, synthetic, or auto (nvml when a driver is present, else synthetic)")
	gpus := fs.Int("synthetic.gpus", 8, "GPUs the synthetic source reports")
	interval := fs.Duration("collector.interval", 5*time.Second, "sampling interval (>= 100ms)")
	retention := fs.Duration("retention", 30*24*time.Hour, "drop raw sample partitions older than this (0 keeps all)")
	var lf logFlags
	lf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger, err := lf.logger(e.stderr)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	logger.Info("starting embedded broker and local clickhouse", "data_dir", dir)
	stack, err := devstack.Start(ctx, devstack.Config{Dir: dir, KafkaPort: *kafkaPort, ClickHousePort: *chPort, Install: true}, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := stack.Stop(); err != nil {
			logger.Warn("stopping the stack", "err", err)
		}
		logger.Info("stopped")
	}()
	broker := stack.KafkaAddr()
	ch := chconn.Config{Addr: stack.ClickHouse.Addr(), Database: "heliostat"}
	conn, err := ch.Open(ctx, e.getenv)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := migrate.Apply(ctx, conn, ch.Database, logger); err != nil {
		return err
	}
	if err := ingest.EnsureTopics(ctx, []string{broker}, 4, schemas.DataTopics()...); err != nil {
		return err
	}

	reg, srv, err := serveMetrics(*listen, logger)
	if err != nil {
		return err
	}
	in, err := ingest.New(ingest.Config{Brokers: []string{broker}, ClickHouse: ch, Retention: *retention}, conn, logger, reg)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	cc := collector.Config{Cluster: "local", Host: host, Interval: *interval}
	if err := cc.Validate(); err != nil {
		return err
	}
	src, closeSrc, err := openSource(*source, cc.Host, *gpus, logger)
	if err != nil {
		return err
	}
	defer closeSrc()
	pub, err := publish.New(publish.Config{Brokers: []string{broker}, SpoolDir: filepath.Join(dir, "spool")}, logger, reg)
	if err != nil {
		return err
	}

	fmt.Fprintf(e.stdout, `heliostat is up (Ctrl-C stops it; running it again resumes on the same data)
  data directory  %s
  kafka broker    %s   (topics %s, %s)
  clickhouse      %s   (native protocol; database %s)
                  clickhouse-client --port %d --query "SELECT count() FROM %s.gpu_samples"
  metrics         http://%s/metrics
  collector       %s source, %s interval, host %s
`, dir, broker, schemas.TopicGPUSamples, schemas.TopicGPUEvents, ch.Addr, ch.Database, *chPort, ch.Database,
		httpAddr(srv.Addr()), src.Name(), cc.Interval, cc.Host)

	// Ingest runs under its own context so that it stops only after the
	// collector has published its last samples.
	ingestCtx, stopIngest := context.WithCancel(context.WithoutCancel(ctx))
	defer stopIngest()
	var ig errgroup.Group
	ig.Go(func() error { return in.Run(ingestCtx) })
	srv.SetReady(true)
	err = runCollectorParts(ctx, cc, src, pub, srv, logger, reg)
	// What ingest has not read yet stays in the broker's log on disk and is
	// ingested on the next start.
	stopIngest()
	if ierr := ig.Wait(); ierr != nil && err == nil {
		err = ierr
	}
	return err
}

// httpAddr turns a listener address into one a browser can open.
func httpAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
