// Command heliostat is the single binary of heliostat: every component is a
// subcommand. Run `heliostat help` for the list.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
	// Time zones (--analytics.timezone, an SWF trace's TimeZoneString) work
	// on hosts without the tzdata package; about 450 kB.
	_ "time/tzdata"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/heliostat-dev/heliostat/internal/buildinfo"
	"github.com/heliostat-dev/heliostat/internal/health"
	"github.com/heliostat-dev/heliostat/internal/tlsfiles"
	"github.com/heliostat-dev/heliostat/internal/web"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// cli runs one command line with SIGINT and SIGTERM cancelling its context
// and returns the exit status: 0, also for -h; 128 + the signal's number
// for a command that failed after one of them stopped it (130 for Ctrl-C),
// so that scripts can tell an interruption from a failure; else 1.
func cli(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	ctx, release := interruptContext()
	defer release()
	err := run(ctx, args, getenv, stdout, stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		// -h asked for the flags, which were printed: a success, as for
		// `heliostat -h` and `heliostat <command> help`.
		return 0
	}
	fmt.Fprintln(stderr, "heliostat:", err)
	var se signalError
	if errors.As(context.Cause(ctx), &se) {
		return 128 + int(se.sig)
	}
	return 1
}

// signalError is the cause of a context cancelled by a signal.
type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string {
	if e.sig == syscall.SIGINT {
		return "interrupted (SIGINT)"
	}
	return fmt.Sprintf("stopped by %s (signal %d)", e.sig, int(e.sig))
}

// interruptContext returns a context cancelled, with a signalError as its
// cause, at the first SIGINT or SIGTERM. From then on those signals have
// their default action again, so a second Ctrl-C ends at once a process
// whose orderly stop takes too long. release stops watching the signals.
func interruptContext() (ctx context.Context, release func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			signal.Stop(sigs)
			sig, _ := s.(syscall.Signal)
			cancel(signalError{sig})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, env *env) error
}

// env is what every subcommand gets from main.
type env struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

func commands() []command {
	return []command{
		{"up", "run the whole pipeline on the embedded default: broker, local ClickHouse, collector (a simulated cluster without a GPU), ingest, predictor, analytics, and on the simulated cluster the actuator", runUp},
		{"collector", "sample GPUs (NVML, or synthetic without a GPU) and publish to Kafka", runCollector},
		{"ingest", "consume Kafka into ClickHouse, exactly once; `ingest reset-partition --topic T --partition N --from OFFSET [--yes]`: read a rewound partition (a recreated topic) again", runIngest},
		{"import", "`import [--format swf|helios] FILE [--to kafka|clickhouse] [--dry-run] [--json]`: a job trace as job events", runImport},
		{"predictor", "`predictor run` (live duration predictions from ClickHouse), `predictor backtest --trace FILE` (job durations), `predictor backtest-demand --series FILE` (node demand)", runPredictor},
		{"analytics", "characterization on a schedule; `analytics run [--since T --until T] [JOB…]`; `analytics capacity [QUERY…] [--sql]`: capacity-planning queries", runAnalytics},
		{"report", "`report [--since T --until T] --out FILE.html`, `report --trace FILE --format swf|helios --out FILE.html [--json]`: the characterization as one HTML page", runReport},
		{"sim", "`sim --trace FILE [--vcs FILE | --nodes N --gpus-per-node G] --policy fifo,sjf,qssf [--backfill] [--json]`: scheduling replay; `sim ces --series FILE`: energy saving replay", runSim},
		{"actuator", "the control loop (QSSF priorities, CES power plans) against Slurm, dry run unless --actuator.apply, every action audited; the advisory API", runActuator},
		{"schema", "ClickHouse schema: `schema apply`, `schema show`", runSchema},
		{"bench", "benchmarks: `bench ingest [--rows N] [--json]` (Kafka → ClickHouse), `bench api [--rate 5000 --duration 10s] [--json]` (advisory API latency)", runBench},
		{"version", "print the version", func(_ context.Context, _ []string, e *env) error {
			fmt.Fprintln(e.stdout, "heliostat", buildinfo.Version(), runtime.Version())
			return nil
		}},
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := &env{getenv: getenv, stdout: stdout, stderr: stderr}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], e)
		}
	}
	usage(stderr)
	return fmt.Errorf("unknown command %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: heliostat <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\n`heliostat <command> -h` lists a command's flags.")
}

// form is one way to call a command that has subcommands: its words and
// what it does.
type form struct{ words, does string }

// subcommandUsage answers a command called without one of its subcommands:
// after -h, --help or help it lists the forms on stdout and succeeds;
// otherwise it fails, naming them.
func subcommandUsage(e *env, cmd string, args []string, forms ...form) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(e.stdout, "usage:")
		for _, f := range forms {
			fmt.Fprintf(e.stdout, "  heliostat %s   (%s)\n", f.words, f.does)
		}
		fmt.Fprintf(e.stdout, "\n`heliostat %s <subcommand> -h` lists a subcommand's flags.\n", cmd)
		return nil
	}
	want := make([]string, len(forms))
	for i, f := range forms {
		want[i] = fmt.Sprintf("`%s` (%s)", f.words, f.does)
	}
	return fmt.Errorf("%s: want %s", cmd, strings.Join(want, " or "))
}

// logFlags are the logging flags every long-running subcommand takes.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log.level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&l.format, "log.format", "text", "log format: text or json")
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log.level %q: %w", l.level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(l.format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log.format %q: want text or json", l.format)
}

func newFlagSet(name string, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet("heliostat "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}

// webFlags are where a process serves /metrics and its probes:
// --web.listen-address, and --web.tls.* for HTTPS.
type webFlags struct {
	listen string
	tls    tlsfiles.Server
}

func (w *webFlags) register(fs *flag.FlagSet, defaultAddr string) {
	fs.StringVar(&w.listen, "web.listen-address", defaultAddr, "address of /metrics and the /-/healthy, /-/ready probes")
	w.tls.Prefix = "--web.tls"
	fs.StringVar(&w.tls.CertFile, "web.tls.cert", "", "PEM certificate (chain) to serve /metrics and the probes over HTTPS, read again when it changes (with --web.tls.key)")
	fs.StringVar(&w.tls.KeyFile, "web.tls.key", "", "PEM key of --web.tls.cert")
	fs.StringVar(&w.tls.ClientCAFile, "web.tls.client-ca", "", "PEM CAs whose client certificates /metrics and the probes require (mutual TLS; default: none required), read again when it changes")
}

// serveMetrics builds a process's registry (Go and process collectors
// included) and binds its /metrics and probe endpoint.
func serveMetrics(w webFlags, logger *slog.Logger) (*prometheus.Registry, *web.Server, error) {
	tc, err := w.tls.Config(time.Now, logger)
	if err != nil {
		return nil, nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := web.Listen(w.listen, tc, reg, logger)
	if err != nil {
		return nil, nil, err
	}
	reg.MustRegister(health.Gauge(srv.Ready), buildinfo.Collector())
	return reg, srv, nil
}

// serveWhile serves srv's metrics and probes from the start while run
// waits for the part's dependencies and then runs it, so that a part
// waiting for ClickHouse is scraped and says why it is not ready. It
// returns once both have stopped: the server's error or run's (none when
// run only says that it was stopped while waiting).
func serveWhile(ctx context.Context, srv *web.Server, run func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(gctx) })
	g.Go(func() error {
		defer cancel()
		return stoppedIsNil(gctx, run(gctx))
	})
	return g.Wait()
}

// stoppedIsNil returns nil for the error of a wait that ctx ended (a stop
// signal while a part waited for ClickHouse), and err otherwise.
func stoppedIsNil(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}
