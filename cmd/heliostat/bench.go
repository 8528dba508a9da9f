package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/internal/chserver"
)

func runBench(ctx context.Context, args []string, e *env) error {
	if len(args) > 0 && args[0] == "api" {
		return runBenchAPI(ctx, args[1:], e)
	}
	if len(args) == 0 || args[0] != "ingest" {
		return subcommandUsage(e, "bench", args, form{"bench ingest [--rows N] [--json]", "Kafka → ClickHouse throughput"},
			form{"bench api [--rate 5000 --duration 10s] [--json]", "advisory API latency"})
	}
	fs := newFlagSet("bench ingest", e)
	rows := fs.Int("rows", 2_000_000, "GPU samples to push through")
	asJSON := fs.Bool("json", false, "print one JSON object on stdout")
	batchRows := fs.Int("ingest.batch-rows", 200_000, "ingest batch size (also used for the direct inserts)")
	ticks := fs.Int("ticks-per-message", 10, "ticks per Kafka message (8 GPUs a tick)")
	chAddr := fs.String("clickhouse.addr", "", "use this ClickHouse (host:port) instead of starting a local one")
	compression := fs.String("clickhouse.compression", "lz4", "block compression on the wire: lz4 or none")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of heliostat's side of the run to this file")
	var lf logFlags
	lf.register(fs)
	// The bench's own progress goes to stderr; its logs only when they
	// matter. Set as the default, so that the help says so and
	// --log.level still works.
	fs.Lookup("log.level").DefValue = "warn"
	lf.level = "warn"
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench ingest: unexpected argument %q", fs.Arg(0))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"rows", *rows}, {"ingest.batch-rows", *batchRows}, {"ticks-per-message", *ticks}} {
		if f.v < 1 {
			return fmt.Errorf("bench ingest: --%s %d: must be at least 1", f.name, f.v)
		}
	}
	logger, err := lf.logger(e.stderr)
	if err != nil {
		return err
	}
	ch := chconn.Config{Addr: *chAddr, Database: "heliostat", Compression: *compression}
	serverPID := 0
	if *chAddr == "" {
		dir, err := scratchDir(e.stderr, os.TempDir(), "heliostat-bench-ingest")
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
		fmt.Fprintln(e.stderr, "starting a local ClickHouse in", dir)
		srv, err := chserver.Start(ctx, chserver.Config{Dir: dir, Install: true, NotInstalledHint: "or point --clickhouse.addr at an existing server"}, logger)
		if err != nil {
			return err
		}
		defer srv.Stop()
		ch.Addr = srv.Addr()
		serverPID = srv.PID()
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	broker, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	if err != nil {
		return fmt.Errorf("bench: start broker: %w", err)
	}
	defer broker.Close()
	res, err := ingest.Bench(ctx, ingest.BenchConfig{
		Brokers: broker.ListenAddrs(), ClickHouse: ch, Rows: *rows, BatchRows: *batchRows, TicksPerMessage: *ticks, Progress: e.stderr, ServerPID: serverPID,
	}, logger)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		return enc.Encode(res)
	}
	fmt.Fprintf(e.stdout, "ingest: %d rows in %.2fs = %.0f rows/s end to end (broker → ingest → ClickHouse %s, %d cores)\n",
		res.Rows, res.IngestSeconds, res.RowsPerS, res.ClickHouse, res.Cores)
	fmt.Fprintf(e.stdout, "direct native batch insert of the same rows: %.0f rows/s; ratio %.2f\n", res.RawRowsPerS, res.Ratio)
	fmt.Fprintf(e.stdout, "CPU during ingest: heliostat %.1fs, clickhouse-server %.1fs; during the direct insert: %.1fs and %.1fs\n",
		res.IngestCPUHeliostat, res.IngestCPUClickHouse, res.RawCPUHeliostat, res.RawCPUClickHouse)
	fmt.Fprintf(e.stdout, "(%d messages of %d rows, batches of %d rows; group join took %.2fs, not counted)\n",
		res.Messages, res.RowsPerMessage, res.BatchRows, res.StartupSeconds)
	return nil
}
