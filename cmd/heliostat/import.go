package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/ingest"
	"github.com/heliostat-dev/heliostat/ingest/trace"
	"github.com/heliostat-dev/heliostat/internal/chconn"
	"github.com/heliostat-dev/heliostat/internal/envdefault"
	"github.com/heliostat-dev/heliostat/internal/kafkaconn"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/migrate"
)

// importFlags are the settings of `heliostat import`.
type importFlags struct {
	format      string
	cluster     string
	to          string
	dryRun      bool
	asJSON      bool
	brokers     []string
	kafka       kafkaconn.Config
	partitions  int
	kafkaBatch  int
	chBatch     int
	progress    time.Duration
	clickhouse  chconn.Config
	log         logFlags
	kafkaWriteT time.Duration
}

func (f *importFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&f.format, "format", "", "trace format: swf or helios (default: from the file name: .swf, .swf.gz, .csv, .csv.gz)")
	fs.StringVar(&f.cluster, "cluster", "", "cluster name the jobs are filed under (UTF-8, at most "+strconv.Itoa(schemas.MaxStringLen)+" bytes). "+
		"Jobs are kept per cluster and job id: two files imported under one cluster replace each other's jobs of the same id. "+
		"Default: the file name without .swf/.csv/.gz; for cluster_log.csv or cluster_log.csv.gz (any case), which Helios calls every cluster's file, "+
		"the name of the directory in the path (Venus/cluster_log.csv: Venus), and --cluster is required when the path names none (./cluster_log.csv)")
	fs.StringVar(&f.to, "to", "kafka", "where the job events go: kafka (topic "+schemas.TopicJobEvents+") or clickhouse (straight into job_events, for sites without Kafka)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "read and convert the file, send nothing")
	fs.BoolVar(&f.asJSON, "json", false, "print the summary as one JSON object on stdout")
	brokers := envdefault.String(getenv, "HELIOSTAT_KAFKA_BROKERS", "127.0.0.1:9092")
	f.brokers = splitComma(brokers)
	fs.Func("kafka.brokers", "comma-separated Kafka bootstrap addresses ($HELIOSTAT_KAFKA_BROKERS, default "+brokers+")", func(s string) error {
		f.brokers = splitComma(s)
		return nil
	})
	fs.IntVar(&f.partitions, "kafka.partitions", 12, "partitions of the job-events topic when import has to create it")
	fs.IntVar(&f.kafkaBatch, "kafka.batch-messages", 1000, "messages (jobs) per Kafka write")
	fs.DurationVar(&f.kafkaWriteT, "kafka.write-timeout", 30*time.Second, "timeout of one Kafka write")
	f.kafka.RegisterFlags(fs, getenv)
	fs.IntVar(&f.chBatch, "clickhouse.batch-events", 50_000, "job events per ClickHouse insert")
	fs.DurationVar(&f.progress, "progress-interval", 5*time.Second, "log progress on stderr this often during a long import (0: never)")
	f.clickhouse.RegisterFlags(fs, getenv)
	f.log.register(fs)
}

func (f *importFlags) validate() error {
	switch {
	case f.to != "kafka" && f.to != "clickhouse":
		return fmt.Errorf("import: --to %q: want kafka or clickhouse", f.to)
	case f.format != "" && f.format != "swf" && f.format != "helios":
		return fmt.Errorf("import: --format %q: want swf or helios", f.format)
	case f.kafkaBatch < 1:
		return fmt.Errorf("import: --kafka.batch-messages %d: want at least 1", f.kafkaBatch)
	case f.partitions < 1:
		return fmt.Errorf("import: --kafka.partitions %d: want at least 1", f.partitions)
	case f.chBatch < 1:
		return fmt.Errorf("import: --clickhouse.batch-events %d: want at least 1", f.chBatch)
	case f.progress < 0:
		return fmt.Errorf("import: --progress-interval %v is negative", f.progress)
	case f.kafkaWriteT <= 0:
		return fmt.Errorf("import: --kafka.write-timeout %v: want a positive duration", f.kafkaWriteT)
	case !f.dryRun && f.to == "kafka" && len(f.brokers) == 0:
		return errors.New("import: --kafka.brokers is empty")
	}
	if !f.dryRun && f.to == "clickhouse" {
		return f.clickhouse.Validate()
	}
	if err := f.kafka.Validate(); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	return nil
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// heliosLogStem is the name, less .csv or .csv.gz, of every Helios cluster's
// trace file: <Cluster>/cluster_log.csv.
const heliosLogStem = "cluster_log"

// Where the name of the cluster of an import comes from.
const (
	clusterFromFlag = "--cluster"
	clusterFromFile = "the file name"
	clusterFromDir  = "the directory name (Helios names every cluster's file cluster_log.csv)"
)

// defaultCluster names the cluster of a trace file imported without
// --cluster and says from what: the file name without .swf/.csv/.gz, except
// for Helios' cluster_log.csv(.gz), which every cluster's file is called:
// then its directory's name ("…/Venus/cluster_log.csv" → "Venus"), and an
// error asking for --cluster when the path names no directory.
func defaultCluster(path string) (name, from string, err error) {
	base := filepath.Base(path)
	if !strings.EqualFold(base, heliosLogStem+".csv") && !strings.EqualFold(base, heliosLogStem+".csv.gz") {
		return clusterFromPath(path), clusterFromFile, nil
	}
	dir := filepath.Base(filepath.Dir(path))
	if dir == "" || dir == "." || dir == ".." || dir == string(filepath.Separator) {
		return "", "", fmt.Errorf("import: %s: Helios names every cluster's file %s.csv, and the path names no directory to take the cluster from: give --cluster", path, heliosLogStem)
	}
	return dir, clusterFromDir, nil
}

// checkCluster says why name cannot be the cluster of job events, naming
// --cluster and where the name came from.
func checkCluster(name, from string) error {
	why := ""
	switch {
	case name == "":
		why = "empty"
	case !utf8.ValidString(name):
		why = "not valid UTF-8"
	case len(name) > schemas.MaxStringLen:
		why = fmt.Sprintf("%d bytes, more than the %d a job event holds", len(name), schemas.MaxStringLen)
	default:
		return nil
	}
	if from == clusterFromFlag {
		return fmt.Errorf("import: --cluster %.40q: %s", name, why)
	}
	return fmt.Errorf("import: cluster %.40q, taken from %s: %s: give --cluster", name, from, why)
}

// clusterFromPath names a cluster after its trace file:
// "…/HPC2N-2002-2.2-cln.swf.gz" → "HPC2N-2002-2.2-cln".
func clusterFromPath(path string) string {
	name := filepath.Base(path)
	for _, ext := range []string{".gz", ".swf", ".csv"} {
		if len(name) > len(ext) && strings.EqualFold(name[len(name)-len(ext):], ext) {
			name = name[:len(name)-len(ext)]
		}
	}
	return name
}

// importOutput is the summary of an import; --json prints it as one object,
// jobs, rejected and reasons first.
type importOutput struct {
	Jobs     int              `json:"jobs"`
	Rejected int              `json:"rejected"`
	Reasons  map[string]int   `json:"reasons"`
	File     string           `json:"file"`
	Format   string           `json:"format"`
	Cluster  string           `json:"cluster"`
	To       string           `json:"to"`     // "" for a dry run
	Errors   []rejectedRow    `json:"errors"` // the first shownRejects
	Convert  trace.EventStats `json:"conversion"`
	SentJobs int              `json:"sent_jobs"`
	SentEvts int              `json:"sent_events"`
	ReadS    float64          `json:"read_s"`
	SendS    float64          `json:"send_s"`
	JobsPerS float64          `json:"jobs_per_s"`
}

func runImport(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet("import", e)
	var f importFlags
	f.register(fs, e.getenv)
	// Flags may come after the file too: `import FILE --dry-run --json`.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	hintUpClickHouse(&f.clickhouse, fs, e.getenv)
	if len(files) != 1 {
		return fmt.Errorf("import: want one trace file, got %d: heliostat import [--format swf|helios] FILE [--to kafka|clickhouse] [--dry-run] [--json]", len(files))
	}
	if err := f.validate(); err != nil {
		return err
	}
	logger, err := f.log.logger(e.stderr)
	if err != nil {
		return err
	}
	imp := &importer{flags: f, path: files[0], logger: logger, stderr: e.stderr, now: time.Now}
	from := clusterFromFlag
	if imp.flags.cluster == "" {
		if imp.flags.cluster, from, err = defaultCluster(imp.path); err != nil {
			return err
		}
	}
	// Before the file is read: a name the job events cannot carry would
	// stop the import at its first job, blaming the trace.
	if err := checkCluster(imp.flags.cluster, from); err != nil {
		return err
	}
	if from != clusterFromFlag {
		logger.Info("import cluster chosen", "cluster", imp.flags.cluster, "from", from, "file", imp.path)
	}
	out, err := imp.run(ctx, e.getenv)
	if err != nil {
		return err
	}
	if f.asJSON {
		err = json.NewEncoder(e.stdout).Encode(out)
	} else {
		printImportSummary(e.stdout, out)
	}
	if err == nil && out.Jobs == 0 {
		// Nothing imported is a failure a script must see.
		err = fmt.Errorf("import: no job read from %s (%d rows rejected; is --format %s right?)", out.File, out.Rejected, out.Format)
	}
	return err
}

func printImportSummary(w io.Writer, out *importOutput) {
	fmt.Fprintf(w, "%s (%s): %d jobs, %d rejected", out.File, out.Format, out.Jobs, out.Rejected)
	if out.Rejected > 0 {
		fmt.Fprintf(w, " (%s)", countsString(out.Reasons))
	}
	fmt.Fprintf(w, "; cluster %q\n", out.Cluster)
	c := &out.Convert
	fmt.Fprintf(w, "  %d events; %d jobs without a start time, %d without a final state", c.Events, c.NoStart, c.NoEnd)
	if len(c.UnmappedStates) > 0 {
		fmt.Fprintf(w, " (trace states: %s)", countsString(c.UnmappedStates))
	}
	fmt.Fprintf(w, ", %d ended at an unknown time, %d duplicate ids renamed\n", c.EndTimeUnknown, c.DuplicateIDs)
	if out.To == "" {
		fmt.Fprintln(w, "  dry run: nothing sent")
		return
	}
	fmt.Fprintf(w, "  sent %d jobs (%d events) to %s in %.1fs (%.0f jobs/s)\n", out.SentJobs, out.SentEvts, out.To, out.SendS, out.JobsPerS)
}

// rejectUnstorableTimes rejects, with their lines, the jobs of a trace bound
// for ClickHouse that have a time its DateTime cannot hold (before 1970, after
// 2106-02-07): they would be stored as another time, and the encoder and the
// ingest decoder refuse them.
func rejectUnstorableTimes(tr *trace.Trace) {
	tr.RejectTimesOutside(time.UnixMilli(0), time.UnixMilli(schemas.MaxTimeMillis))
}

// importer runs one import of one file.
type importer struct {
	flags  importFlags
	path   string
	logger *slog.Logger
	stderr io.Writer
	now    func() time.Time
}

// sink takes the events of one job at a time and writes them in batches.
type sink interface {
	add(ctx context.Context, events []schemas.JobEvent) error
	flush(ctx context.Context) error
	// written is how many jobs added so far have all their events written.
	written() int
	close() error
}

func (imp *importer) run(ctx context.Context, getenv func(string) string) (*importOutput, error) {
	t0 := imp.now()
	tr, err := trace.Open(imp.path, imp.flags.format)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	// Dry run or not, so that a dry run says what the import would take.
	// Then the check at the border: a job whose events the encoder (or
	// job_events) would refuse is rejected, named and counted, and the
	// import goes on without it instead of stopping there. The loop below
	// converts the jobs kept again and gets the same events.
	rejectUnstorableTimes(tr)
	tr.RejectUnencodable()
	out := &importOutput{
		Jobs: len(tr.Jobs), Rejected: tr.Rejected, Reasons: tr.Reasons,
		File: imp.path, Format: tr.Format, Cluster: imp.flags.cluster,
		Errors: printRejects(imp.stderr, imp.path, tr),
		ReadS:  imp.now().Sub(t0).Seconds(),
	}

	var s sink
	if !imp.flags.dryRun {
		out.To = imp.flags.to
		switch imp.flags.to {
		case "kafka":
			s, err = imp.kafkaSink(ctx)
		case "clickhouse":
			s, err = imp.clickHouseSink(ctx, getenv)
		}
		if err != nil {
			return nil, fmt.Errorf("import %s to %s: stopped before the first job, 0 of %d jobs written: %w", imp.path, imp.flags.to, out.Jobs, err)
		}
	}

	t1 := imp.now()
	lastReport := t1
	conv := trace.NewConverter()
	var events []schemas.JobEvent
	for i := range tr.Jobs {
		j := &tr.Jobs[i]
		events = conv.Append(events[:0], j)
		if s == nil {
			continue
		}
		if err := s.add(ctx, events); err != nil {
			s.close()
			return nil, imp.sendError(j, s.written(), out, err)
		}
		out.SentJobs = conv.Stats.Jobs
		out.SentEvts = conv.Stats.Events
		if p := imp.flags.progress; p > 0 {
			if now := imp.now(); now.Sub(lastReport) >= p {
				lastReport = now
				w := s.written()
				imp.logger.Info("import progress", "file", imp.path, "jobs_written", w, "jobs", len(tr.Jobs),
					"jobs_per_s", int(float64(w)/now.Sub(t1).Seconds()))
			}
		}
	}
	out.Convert = conv.Stats
	if s != nil {
		if err := s.flush(ctx); err != nil {
			s.close()
			return nil, imp.sendError(nil, s.written(), out, err)
		}
		if err := s.close(); err != nil {
			return nil, fmt.Errorf("import %s: %w", imp.path, err)
		}
		out.SendS = imp.now().Sub(t1).Seconds()
		if out.SendS > 0 {
			out.JobsPerS = float64(out.SentJobs) / out.SendS
		}
		imp.logger.Info("import done", "file", imp.path, "cluster", imp.flags.cluster, "to", imp.flags.to,
			"jobs", out.SentJobs, "events", out.SentEvts, "seconds", out.SendS)
	}
	return out, nil
}

// sendError says how far an import got before err: how many jobs were
// written, and that importing the file again is safe (re-sent events are
// byte-identical and collapse downstream).
func (imp *importer) sendError(at *trace.Job, written int, out *importOutput, err error) error {
	where := "at the final flush"
	if at != nil {
		where = fmt.Sprintf("at the job on line %d", at.Line)
	}
	return fmt.Errorf("import %s to %s: stopped %s, %d of %d jobs written; importing the file again is safe: %w",
		imp.path, imp.flags.to, where, written, out.Jobs, err)
}

// kafkaSink publishes one message per job to TopicJobEvents, keyed with
// schemas.JobKey, in writes of --kafka.batch-messages messages.
type kafkaSink struct {
	w       *kafka.Writer
	cluster string
	max     int
	buf     []byte // encoded messages of the open batch, back to back
	ends    []int  // end of each message in buf
	keys    [][]byte
	msgs    []kafka.Message
	done    int // jobs written
}

func (imp *importer) kafkaSink(ctx context.Context) (*kafkaSink, error) {
	sec, err := imp.flags.kafka.Load()
	if err != nil {
		return nil, err
	}
	if err := ingest.EnsureTopicsVia(ctx, sec, imp.flags.brokers, imp.flags.partitions, schemas.TopicJobEvents); err != nil {
		if errors.Is(err, ingest.ErrCompactedTopic) {
			return nil, err // it would keep only each job's last event
		}
		// A broker that refuses the login or the certificate refuses the
		// writes too, and the writer would only say "EOF": stop here with
		// the reason.
		if perr := kafkaconn.Probe(ctx, sec, imp.flags.brokers, 10*time.Second); perr != nil {
			return nil, perr
		}
		// The writer may still create it (auto-creation) or it may exist on a
		// cluster that refuses topic creation to this client.
		imp.logger.Warn("could not create topic; expecting it to exist", "topic", schemas.TopicJobEvents, "err", err)
	}
	return &kafkaSink{
		w: &kafka.Writer{
			Addr:                   kafka.TCP(imp.flags.brokers...),
			Topic:                  schemas.TopicJobEvents,
			Balancer:               &kafka.Hash{}, // the collector's JobPublisher partitions job keys the same way
			RequiredAcks:           kafka.RequireAll,
			AllowAutoTopicCreation: true,
			BatchSize:              imp.flags.kafkaBatch,
			BatchBytes:             16 << 20,
			// WriteMessages is synchronous and hands over a whole chunk: a
			// partition's share is all there is, so waiting for more only
			// adds the timeout to every write.
			BatchTimeout: time.Millisecond,
			WriteTimeout: imp.flags.kafkaWriteT,
			Transport:    sec.Transport("heliostat-import"),
		},
		cluster: imp.flags.cluster,
		max:     imp.flags.kafkaBatch,
	}, nil
}

func (k *kafkaSink) add(ctx context.Context, events []schemas.JobEvent) error {
	var err error
	k.buf, err = schemas.AppendJobEventBatch(k.buf, &schemas.JobEventBatch{Cluster: k.cluster, Source: schemas.SourceTrace, Events: events})
	if err != nil {
		return fmt.Errorf("encode job %s: %w", events[0].JobID, err)
	}
	k.ends = append(k.ends, len(k.buf))
	k.keys = append(k.keys, schemas.JobKey(k.cluster, events[0].JobID))
	if len(k.ends) >= k.max {
		return k.flush(ctx)
	}
	return nil
}

func (k *kafkaSink) flush(ctx context.Context) error {
	if len(k.ends) == 0 {
		return nil
	}
	k.msgs = k.msgs[:0]
	start := 0
	for i, end := range k.ends {
		k.msgs = append(k.msgs, kafka.Message{Key: k.keys[i], Value: k.buf[start:end]})
		start = end
	}
	if err := k.w.WriteMessages(ctx, k.msgs...); err != nil {
		var we kafka.WriteErrors
		if errors.As(err, &we) {
			for _, e := range we {
				if e != nil {
					return fmt.Errorf("write to kafka topic %s: %d of %d messages failed, first: %w", schemas.TopicJobEvents, we.Count(), len(we), e)
				}
			}
		}
		return fmt.Errorf("write to kafka topic %s: %w", schemas.TopicJobEvents, err)
	}
	// WriteMessages has returned, so the writer holds no reference to buf.
	k.done += len(k.ends)
	k.buf, k.ends, k.keys = k.buf[:0], k.ends[:0], k.keys[:0]
	return nil
}

func (k *kafkaSink) written() int { return k.done }

func (k *kafkaSink) close() error {
	if err := k.w.Close(); err != nil {
		return fmt.Errorf("close kafka writer: %w", err)
	}
	return nil
}

// clickHouseSink inserts job events straight into job_events (and through its
// view into jobs), --clickhouse.batch-events at a time.
type clickHouseSink struct {
	conn    driver.Conn
	db      string
	cluster string
	max     int
	events  []schemas.JobEvent
	jobs    int // jobs whose events are in events
	done    int // jobs written
}

func (imp *importer) clickHouseSink(ctx context.Context, getenv func(string) string) (*clickHouseSink, error) {
	ch := imp.flags.clickhouse
	conn, err := ch.Open(ctx, getenv)
	if err != nil {
		return nil, err
	}
	// With no ingest running there may be no schema yet; applying it is
	// idempotent.
	if _, err := migrate.Apply(ctx, conn, ch.Database, imp.logger); err != nil {
		conn.Close()
		return nil, fmt.Errorf("apply schema: %w", err)
	}
	return &clickHouseSink{conn: conn, db: ch.Database, cluster: imp.flags.cluster, max: imp.flags.chBatch}, nil
}

func (c *clickHouseSink) add(ctx context.Context, events []schemas.JobEvent) error {
	c.events = append(c.events, events...)
	c.jobs++
	if len(c.events) >= c.max {
		return c.flush(ctx)
	}
	return nil
}

func (c *clickHouseSink) flush(ctx context.Context) error {
	if len(c.events) == 0 {
		return nil
	}
	if err := ingest.InsertJobEvents(ctx, c.conn, c.db, c.cluster, schemas.SourceTrace, c.events); err != nil {
		return err
	}
	c.done += c.jobs
	c.events, c.jobs = c.events[:0], 0
	return nil
}

func (c *clickHouseSink) written() int { return c.done }

func (c *clickHouseSink) close() error { return c.conn.Close() }
