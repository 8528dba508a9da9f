package attrib

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/internal/envdefault"
	"github.com/heliostat-dev/heliostat/internal/health"
	"github.com/heliostat-dev/heliostat/internal/logthrottle"
	"github.com/heliostat-dev/heliostat/schemas"
)

// Defaults for the zero values of Config fields.
const (
	DefaultInterval  = 10 * time.Second
	DefaultProcRoot  = "/proc"
	DefaultStateFile = "data/attribution.json"
	// MinInterval is the shortest poll interval Validate accepts.
	MinInterval = time.Second
)

const (
	// logInterval is how often a recurring failure is logged at most; each
	// log says how many failures it stands for.
	logInterval = time.Minute
	// maxPending bounds the records kept while the publisher fails; beyond
	// it the oldest are dropped (and counted).
	maxPending = 10_000
	// maxPerMessage bounds the records in one message: about 100 bytes
	// each, far below the brokers' 1 MB.
	maxPerMessage = 1000
	// vanishedPolls is how many polls in a row must find every listed
	// process gone from the proc root before readiness fails. One such poll
	// is a normal race (the only job's processes ended between the listing
	// and the reading of /proc); it repeating at the next poll, 10s later
	// by default, would take a second job ending just as it is listed, and
	// a third is not plausible. A proc root that shows other PIDs than the
	// driver's (a container without the host's PID namespace or /proc, a
	// wrong --attribution.proc-root) does it at every poll: 3 polls (30s at
	// the default interval) name it long before the alerts would.
	vanishedPolls = 3
	// logEnviron is the throttle key of malformed environs' logs; the
	// others are keyed by stage.
	logEnviron = "environ"
)

// ProcessLister lists the compute processes of every GPU and MIG instance of
// the host; the nvml source is one. A GPU whose list failed is left out and
// the failure returned with the others' lists; no list (nil or empty) with
// an error means the whole poll failed.
type ProcessLister interface {
	GPUProcesses() ([]collector.GPUProcesses, error)
}

// Publisher publishes allocation records; *collector.JobPublisher is one. An
// error means the records were not taken: they are kept and tried again.
type Publisher interface {
	PublishAllocs(ctx context.Context, key string, allocs []schemas.Alloc) error
}

// Config configures an Attributor. The zero value of each field means its
// default.
type Config struct {
	// Enabled says whether the caller should run an Attributor at all; New
	// does not look at it.
	// Default (flag): true.
	Enabled bool
	// Interval is the time between two polls. At least 1s.
	// Default: 10s.
	Interval time.Duration
	// ProcRoot is where the host's /proc is mounted: the driver lists host
	// PIDs, so a collector in a container needs the host's /proc.
	// Default: "/proc", or $HELIOSTAT_PROC_ROOT when set (flag default).
	ProcRoot string
	// StateFile holds the open intervals and unpublished records across
	// restarts; it is replaced atomically after every poll.
	// Default: "data/attribution.json", relative to the working directory.
	StateFile string
	// Grace is how many polls in a row a job must be absent from a GPU
	// before its interval closes; at least 1.
	// Default: 2.
	Grace int
	// Host names the host on every record and keys the messages. It has no
	// flag of its own: the caller sets it from --collector.host.
	// Default: os.Hostname().
	Host string
	// LookupUser maps a uid to a user name when the job's environment does
	// not name its user. It has no flag.
	// Default: LookupSystemUser.
	LookupUser LookupUser
}

// RegisterFlags registers the attribution flags on fs, with the defaults
// filled in. getenv supplies defaults from the environment
// (HELIOSTAT_PROC_ROOT); nil means none.
func (c *Config) RegisterFlags(fs *flag.FlagSet, getenv func(string) string) {
	procRoot := envdefault.String(getenv, "HELIOSTAT_PROC_ROOT", DefaultProcRoot)
	fs.BoolVar(&c.Enabled, "attribution", true,
		"attribute GPUs to Slurm jobs from their processes and publish allocation intervals (needs the nvml source)")
	fs.DurationVar(&c.Interval, "attribution.interval", DefaultInterval,
		"time between two polls of the GPUs' processes; at least 1s")
	fs.StringVar(&c.ProcRoot, "attribution.proc-root", procRoot,
		"where the host's /proc is mounted (env HELIOSTAT_PROC_ROOT)")
	fs.StringVar(&c.StateFile, "attribution.state-file", DefaultStateFile,
		"file keeping open allocation intervals across restarts")
	fs.IntVar(&c.Grace, "attribution.grace", DefaultGrace,
		"polls in a row a job must be absent from a GPU before its interval closes")
}

// Validate reports the first invalid field, named by its flag. Zero fields
// are valid: they mean their defaults.
func (c Config) Validate() error {
	if c.Interval < 0 {
		return fmt.Errorf("attrib: --attribution.interval: %v is negative", c.Interval)
	}
	if c.Interval != 0 && c.Interval < MinInterval {
		return fmt.Errorf("attrib: --attribution.interval: %v is below the minimum %v", c.Interval, MinInterval)
	}
	if c.Grace < 0 {
		return fmt.Errorf("attrib: --attribution.grace: %d is negative", c.Grace)
	}
	if len(c.Host) > schemas.MaxStringLen || !utf8.ValidString(c.Host) {
		return fmt.Errorf("attrib: --collector.host: not UTF-8 of at most %d bytes", schemas.MaxStringLen)
	}
	return nil
}

func (c Config) withDefaults() (Config, error) {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.ProcRoot == "" {
		c.ProcRoot = DefaultProcRoot
	}
	if c.StateFile == "" {
		c.StateFile = DefaultStateFile
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.LookupUser == nil {
		c.LookupUser = LookupSystemUser
	}
	if c.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("attrib: --collector.host not set and hostname unknown: %w", err)
		}
		c.Host = h
	}
	return c, nil
}

// Attributor polls the GPUs' processes, attributes them to Slurm jobs and
// publishes the allocation intervals that open and close.
type Attributor struct {
	cfg      Config
	lister   ProcessLister
	pub      Publisher
	logger   *slog.Logger
	now      func() time.Time
	m        *metrics
	resolver *Resolver
	tracker  *Tracker
	pending  []schemas.Alloc
	logs     logthrottle.Throttle // keyed by stage
	health   *health.Status
	polls    *health.Cond // the last poll: its first failure
	pollErr  error        // the current poll's first failure
	// allVanished counts the polls in a row, of those that listed a
	// process, in which every listed process was missing from the proc
	// root. A poll that listed none leaves it as it is.
	allVanished int
}

// New returns an Attributor, having loaded the state file. A state file that
// cannot be read or decoded is logged and counted, and the Attributor starts
// afresh (the file is replaced at the first poll): refusing to start would
// stop the GPU collector next to it. logger nil discards logs; now nil means
// time.Now. The metrics are registered on reg.
func New(cfg Config, lister ProcessLister, pub Publisher, logger *slog.Logger, reg prometheus.Registerer, now func() time.Time) (*Attributor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if lister == nil || pub == nil {
		return nil, errors.New("attrib: new: a process lister and a publisher are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	m := newMetrics()
	if err := m.register(reg); err != nil {
		return nil, fmt.Errorf("attrib: register metrics: %w", err)
	}
	a := &Attributor{
		cfg:      cfg,
		lister:   lister,
		pub:      pub,
		logger:   logger,
		now:      now,
		m:        m,
		resolver: NewResolver(cfg.ProcRoot, cfg.LookupUser),
		tracker:  NewTracker(cfg.Host, cfg.Grace),
		logs:     logthrottle.Throttle{Every: logInterval},
		health:   health.New(time.Now),
	}
	a.polls = a.health.Add("gpu attribution", "waiting for the first poll")
	st, err := LoadState(cfg.StateFile)
	if err != nil {
		m.errors.WithLabelValues(stageState).Inc()
		logger.Warn("attribution state unreadable, starting afresh", "path", cfg.StateFile, "err", err)
	}
	a.tracker.Restore(st.Open)
	a.pending = st.Pending
	m.open.Set(float64(len(st.Open)))
	m.pending.Set(float64(len(a.pending)))
	return a, nil
}

// Ready returns nil once a poll has run and while the last one did not
// fail (listing the GPUs' processes, resolving every process to its job,
// publishing, saving the state file), and otherwise the first failure of
// the last poll, since when the polls fail. A poll that resolved some
// processes and failed on others holds: those are counted and logged. So
// does a poll whose listed processes had all ended, unless that happened
// vanishedPolls polls in a row: the proc root does not show the driver's
// PIDs.
func (a *Attributor) Ready() error { return a.health.Err() }

// Run polls at once and then every Interval until ctx is done. Failures are
// counted and logged, never returned: attribution must not stop the
// collector. Open intervals stay open across the shutdown (they are in the
// state file) so that the next run continues them.
func (a *Attributor) Run(ctx context.Context) error {
	a.logger.Info("attribution started", "host", a.cfg.Host, "interval", a.cfg.Interval,
		"proc_root", a.cfg.ProcRoot, "state_file", a.cfg.StateFile, "grace", a.cfg.Grace,
		"open_intervals", len(a.tracker.open), "pending", len(a.pending))
	ticker := time.NewTicker(a.cfg.Interval)
	defer ticker.Stop()
	a.poll(ctx)
	for {
		select {
		case <-ctx.Done():
			a.logSuppressed()
			return nil
		case <-ticker.C:
			if ctx.Err() != nil {
				continue // shutdown raced the tick
			}
			a.poll(ctx)
		}
	}
}

// poll runs one round: list, resolve, track, publish, save.
func (a *Attributor) poll(ctx context.Context) {
	start := a.now()
	a.m.polls.Inc()
	ok := true
	a.pollErr = nil
	defer func() {
		a.polls.Report(a.pollErr)
		a.m.pollDuration.Observe(a.now().Sub(start).Seconds())
		if ok {
			a.m.pollSuccess.Set(1)
		} else {
			a.m.pollSuccess.Set(0)
		}
	}()

	lists, err := a.lister.GPUProcesses()
	if err != nil {
		ok = false
		a.fail(stageList, err, "gpus_listed", len(lists))
	}
	// A failed listing observes nothing: observing an empty poll would
	// count every job absent. A partial one is observed: the jobs of a GPU
	// left out (lost) count as absent and close after the grace. An empty
	// list with an error is a failed listing too, whatever the lister
	// meant by it.
	if err == nil || len(lists) > 0 {
		seen, resolveOK := a.resolve(lists)
		ok = ok && resolveOK
		a.track(start, seen)
	}
	ok = a.publish(ctx) && ok
	a.m.pending.Set(float64(len(a.pending)))

	if err := SaveState(a.cfg.StateFile, State{Open: a.tracker.Open(), Pending: a.pending}); err != nil {
		ok = false
		a.fail(stageState, err)
	}
}

// track feeds one poll's pairs to the tracker and queues its records.
func (a *Attributor) track(now time.Time, seen []Seen) {
	ch := a.tracker.Observe(now, seen)
	a.m.opened.Add(float64(len(ch.Opened)))
	a.m.closed.Add(float64(len(ch.Closed)))
	a.m.open.Set(float64(len(a.tracker.open)))
	for _, r := range ch.Opened {
		a.logger.Debug("allocation opened", "gpu_uuid", r.GPUUUID, "mig_uuid", r.MIGUUID, "job_id", r.JobID, "source", r.Source.String())
	}
	for _, r := range ch.Closed {
		a.logger.Debug("allocation closed", "gpu_uuid", r.GPUUUID, "mig_uuid", r.MIGUUID, "job_id", r.JobID,
			"duration", time.Duration(r.EndMillis-r.StartMillis)*time.Millisecond)
	}
	a.pending = append(a.pending, ch.Allocs()...)
	if n := len(a.pending) - maxPending; n > 0 {
		a.m.dropped.Add(float64(n))
		a.pending = append(a.pending[:0], a.pending[n:]...)
	}
}

// resolve finds the job of every listed process and returns the (GPU, job)
// pairs, setting the unattributed gauge. It reports whether every process
// was resolved (vanished ones count as resolved).
func (a *Attributor) resolve(lists []collector.GPUProcesses) ([]Seen, bool) {
	type result struct {
		p   Process
		err error
	}
	ok, resolved, vanished := true, 0, 0
	var firstErr error
	cache := make(map[uint32]result)
	var seen []Seen
	a.m.unattributed.Reset()
	for _, g := range lists {
		gpu := GPU{Index: g.Index, UUID: g.UUID, MIGUUID: g.MIGUUID}
		unattributed := 0
		for _, pid := range g.PIDs {
			r, cached := cache[pid]
			if !cached {
				r.p, r.err = a.resolver.Resolve(pid)
				cache[pid] = r
				a.noteEnviron(pid, r.p, r.err)
				switch {
				case errors.Is(r.err, ErrVanished):
					a.m.vanished.Inc()
					vanished++
				case r.err != nil:
					ok = false
					firstErr = cmp.Or(firstErr, r.err)
					a.fail(stageResolve, r.err, "pid", pid)
				default:
					resolved++
				}
			}
			switch {
			case r.err != nil:
			case r.p.JobID == "":
				unattributed++
			default:
				seen = append(seen, Seen{GPU: gpu, JobID: r.p.JobID, User: r.p.User, Source: r.p.Source})
			}
		}
		a.m.unattributed.WithLabelValues(g.UUID, g.MIGUUID).Set(float64(unattributed))
	}
	// One process the collector cannot read is counted and logged; none
	// readable (no permission to read /proc) also fails the readiness.
	if firstErr != nil && resolved == 0 && a.pollErr == nil {
		a.pollErr = fmt.Errorf("%s: no process on the GPUs could be resolved to a job: %w", stageResolve, firstErr)
	}
	return seen, a.checkVanished(len(cache), vanished) && ok
}

// checkVanished follows the polls in which every one of the listed processes
// (listed of them, vanished from the proc root) was gone, and fails the poll
// once vanishedPolls in a row did: the proc root is not the host's /proc. A
// poll that listed no process says nothing either way. It reports whether
// the poll holds.
func (a *Attributor) checkVanished(listed, vanished int) bool {
	switch {
	case listed == 0:
		return true
	case vanished < listed:
		a.allVanished = 0
		return true
	}
	a.allVanished++
	if a.allVanished < vanishedPolls {
		return true
	}
	err := fmt.Errorf("none of the %d processes the driver lists on the GPUs is in %s, for %d polls in a row: "+
		"--attribution.proc-root must be the host's /proc (in a container: the host's PID namespace, or its /proc mounted there)",
		listed, a.cfg.ProcRoot, a.allVanished)
	a.fail(stageResolve, err, "proc_root", a.cfg.ProcRoot)
	if a.pollErr == nil {
		a.pollErr = fmt.Errorf("%s: %w", stageResolve, err)
	}
	return false
}

// noteEnviron counts a process whose environ was malformed and logs it, at
// most once per logInterval. Where the cgroup named the job (p.EnvironErr)
// the process was resolved all the same; otherwise err is also counted as a
// resolve failure by the caller.
func (a *Attributor) noteEnviron(pid uint32, p Process, err error) {
	ignored := p.EnvironErr != nil
	if ignored {
		err = p.EnvironErr
	}
	reason := environReason(err)
	if reason == "" {
		return
	}
	a.m.environ.WithLabelValues(reason).Inc()
	n, ok := a.logs.Note(logEnviron, a.now(), 1)
	if !ok {
		return
	}
	if ignored {
		a.logger.Warn("process environ malformed, job taken from its cgroup", "pid", pid, "job_id", p.JobID,
			"reason", reason, "count", n, "err", err)
	} else {
		a.logger.Warn("process environ malformed and no job in its cgroup, process not resolved", "pid", pid,
			"reason", reason, "count", n, "err", err)
	}
}

// publish hands the pending records to the publisher, keyed by host, in
// messages of at most maxPerMessage; what it does not take stays pending.
// A publish is not cut short by shutdown: the publisher's own timeout bounds
// it, and a cancelled write would be spooled and sent again.
func (a *Attributor) publish(ctx context.Context) bool {
	pctx := context.WithoutCancel(ctx)
	for len(a.pending) > 0 {
		n := min(len(a.pending), maxPerMessage)
		if err := a.pub.PublishAllocs(pctx, a.cfg.Host, a.pending[:n]); err != nil {
			a.fail(stagePublish, err, "pending", len(a.pending))
			return false
		}
		a.pending = a.pending[n:]
	}
	a.pending = nil
	return true
}

// fail counts a failure of stage and logs it, at most once per logInterval
// per stage; the log says how many failures it stands for.
func (a *Attributor) fail(stage string, err error, attrs ...any) {
	a.m.errors.WithLabelValues(stage).Inc()
	if a.pollErr == nil && stage != stageResolve {
		a.pollErr = fmt.Errorf("%s: %w", stage, err)
	}
	n, ok := a.logs.Note(stage, a.now(), 1)
	if !ok {
		return
	}
	a.logger.Warn("attribution failed", append([]any{"stage", stage, "failures", n, "err", err}, attrs...)...)
}

// logSuppressed logs the failures that throttling held back.
func (a *Attributor) logSuppressed() {
	for _, s := range stages {
		if n := a.logs.Held(s); n > 0 {
			a.logger.Warn("attribution failed", "stage", s, "failures", n)
		}
	}
	if n := a.logs.Held(logEnviron); n > 0 {
		a.logger.Warn("process environ malformed", "count", n)
	}
}
