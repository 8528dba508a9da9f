// Package slurmadapter is the actuator's Slurm scheduler (adapter.Scheduler):
// it reads pending jobs with `squeue --json` and nodes with `sinfo -N --json`
// (Slurm 22.05: OpenAPI v0.0.38; later versions' shapes are read too, among
// them 23.11's sinfo records), sets a
// job's priority with `scontrol update jobid=J priority=P` (reading
// scontrol's answer per task of a job array: update.go), and powers nodes
// with `scontrol update nodename=N state=POWER_DOWN|POWER_UP`.
//
// Slurm's power saving must be configured for the power actions: slurm.conf
// needs SuspendProgram and ResumeProgram and a finite SuspendTime (-1 or
// INFINITE turn manual power-down off as well; a very large SuspendTime
// keeps Slurm itself from powering anything down). Slurm then runs the
// SuspendProgram for a node powered down, and the ResumeProgram for one
// powered up — or by itself when it allocates a powered-down node to a job.
//
// Slurm accepts POWER_DOWN on a busy node and powers it down once its jobs
// end; POWER_UP does not cancel that. This adapter therefore never sends
// POWER_DOWN to a node that runs, has allocated, is completing or is bound
// for a job, or that a job holds by squeue (a suspended job frees its CPUs,
// so the node's counters read idle): it reads the queue and the node again
// right before the command. It never uses POWER_DOWN_FORCE (which cancels
// jobs) or POWER_DOWN_ASAP (which drains).
//
// Slurm 22.05 also accepts POWER_DOWN for nodes its own power saving
// excludes (SuspendExcNodes, SuspendExcParts, SuspendExcStates) and runs the
// SuspendProgram for them. The adapter reads these settings with `scontrol
// show config` at each Snapshot and before each POWER_DOWN, marks the nodes
// they exclude (adapter.Node.PowerSaveExcluded) and refuses to power them
// down (powersave.go).
package slurmadapter

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
)

// Config says how to run Slurm's commands.
type Config struct {
	// Conf is the slurm.conf the commands use (SLURM_CONF); "" leaves the
	// environment's or the default.
	Conf string
	// BinDir holds squeue, sinfo and scontrol; "" finds them on PATH.
	BinDir string
	// Timeout bounds one command. Default 30s.
	Timeout time.Duration
}

// RegisterFlags adds the --slurm.* flags of the actuator to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Conf, "slurm.conf", "", "slurm.conf for squeue, sinfo and scontrol (SLURM_CONF); empty: Slurm's default")
	fs.StringVar(&c.BinDir, "slurm.bin-dir", "", "directory of squeue, sinfo and scontrol; empty: PATH")
	fs.DurationVar(&c.Timeout, "slurm.command-timeout", 30*time.Second, "timeout of one Slurm command")
}

// Validate checks the settings.
func (c Config) Validate() error {
	if c.Timeout < 0 {
		return fmt.Errorf("slurmadapter: --slurm.command-timeout %v is negative", c.Timeout)
	}
	return nil
}

// Scheduler runs Slurm's commands. It is safe for concurrent use.
type Scheduler struct {
	cfg Config
	env []string
	m   *metrics
	now func() time.Time

	mu sync.Mutex
	// hetLeaders are the pending heterogeneous jobs' leaders in the last
	// queue read (see hetTarget).
	hetLeaders map[string]bool
}

// New returns a Scheduler. env is the environment of the commands (nil: the
// process's), in which Conf, when set, replaces SLURM_CONF, and
// SLURM_BITSTR_LEN is set to 0 (squeue writes a job array's whole task list). Metrics are registered
// on reg unless it is nil.
func New(cfg Config, env []string, reg prometheus.Registerer, now func() time.Time) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if now == nil {
		now = time.Now
	}
	if env == nil {
		env = os.Environ()
	}
	if cfg.Conf != "" {
		env = setEnv(env, "SLURM_CONF", cfg.Conf)
	}
	// squeue cuts a pending array's task list at 64 bytes unless told
	// otherwise; the adapter counts the tasks in it.
	env = setEnv(env, "SLURM_BITSTR_LEN", "0")
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Scheduler{cfg: cfg, env: env, m: m, now: now}, nil
}

// setEnv returns env with key set to value, replacing any setting of it.
func setEnv(env []string, key, value string) []string {
	return append(slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, key+"=") }), key+"="+value)
}

// Name returns "slurm".
func (*Scheduler) Name() string { return "slurm" }

// Snapshot reads Slurm's power-saving exclusions (`scontrol show config`),
// the queue, then the nodes: a job that starts in between is then counted
// twice (pending, and on its node) rather than not at all, which errs
// towards keeping nodes up. Each node's Jobs are the jobs that hold it in
// the queue read (running, suspended, completing, configuring), and nodes
// that SuspendExcNodes, SuspendExcParts or SuspendExcStates exclude from
// power saving are marked PowerSaveExcluded. Pending jobs waiting for a node
// they are bound for that is down or drained are marked Ineligible
// (markUnreachable).
func (s *Scheduler) Snapshot(ctx context.Context) (adapter.Snapshot, error) {
	at := s.now()
	ex, err := s.exclusions(ctx)
	if err != nil {
		return adapter.Snapshot{}, err
	}
	jobs, holding, err := s.queue(ctx)
	if err != nil {
		return adapter.Snapshot{}, err
	}
	nodes, err := s.nodes(ctx)
	if err != nil {
		return adapter.Snapshot{}, err
	}
	withJobs(nodes, holding)
	ex.mark(nodes)
	markUnreachable(jobs, nodes)
	return adapter.Snapshot{At: at, Jobs: jobs, Nodes: nodes}, nil
}

// queue reads the queue: the pending jobs, and the ids of the jobs that hold
// each node (see holdsNodes).
func (s *Scheduler) queue(ctx context.Context) ([]adapter.Job, map[string][]string, error) {
	out, err := s.run(ctx, "squeue", "--json")
	if err != nil {
		return nil, nil, err
	}
	jobs, leaders, holding, err := decodeSqueue(out, s.now())
	if err != nil {
		s.m.decodeErrors.WithLabelValues("squeue", errKind(err)).Inc()
		return nil, nil, err
	}
	for _, j := range jobs {
		if j.Unreadable != "" {
			// Counted at each read that finds it: the job is named,
			// with what is wrong, in the loop's log and in the audit
			// record of each power-down the Guard refuses for it.
			s.m.decodeErrors.WithLabelValues("squeue", "record").Inc()
		}
	}
	s.mu.Lock()
	s.hetLeaders = leaders
	s.mu.Unlock()
	return jobs, holding, nil
}

// withJobs sets each node's Jobs from holding, the jobs that hold it.
func withJobs(nodes []adapter.Node, holding map[string][]string) {
	for i := range nodes {
		if ids := holding[nodes[i].Name]; len(ids) > 0 {
			nodes[i].Jobs = slices.Clone(ids)
		}
	}
}

// exclusions reads the power-saving exclusions from `scontrol show config`,
// afresh each time: from Slurm 23.02 `scontrol update SuspendExcNodes=…`
// changes them without a restart.
func (s *Scheduler) exclusions(ctx context.Context) (exclusions, error) {
	out, err := s.run(ctx, "scontrol", "show", "config")
	if err != nil {
		return exclusions{}, err
	}
	ex, err := decodeConfig(out)
	if err != nil {
		s.m.decodeErrors.WithLabelValues("scontrol", errKind(err)).Inc()
		return exclusions{}, err
	}
	return ex, nil
}

// hetTarget returns the name scontrol must be given to update job id alone.
// Each component of a heterogeneous job is a pending job of its own, named
// by its own job id, but the leader's id (the first component's) names the
// whole job to scontrol: `scontrol update jobid=<leader> priority=P` sets
// every component's priority, overwriting what the actuator set on the
// others. The leader alone is "<leader>+0". The adapter knows the leaders
// from its last read of the queue, which the guard makes before every
// priority change.
func (s *Scheduler) hetTarget(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hetLeaders[id] {
		return id + "+0"
	}
	return id
}

func (s *Scheduler) nodes(ctx context.Context, names ...string) ([]adapter.Node, error) {
	// -N: one record per node (and partition) from Slurm 23.11 on; 22.05
	// prints the same per-node document with or without it.
	args := []string{"-N", "--json"}
	if len(names) > 0 {
		args = append(args, "--nodes="+strings.Join(names, ","))
	}
	out, err := s.run(ctx, "sinfo", args...)
	if err != nil {
		return nil, err
	}
	nodes, err := decodeSinfo(out)
	if err != nil {
		s.m.decodeErrors.WithLabelValues("sinfo", errKind(err)).Inc()
		return nil, err
	}
	return nodes, nil
}

// jobIDPattern is what a job id handed to scontrol may look like: J, J_T
// (array task) or J+O (heterogeneous component).
var jobIDPattern = regexp.MustCompile(`^[0-9]{1,12}([_+][0-9]{1,9})?$`)

// nodeNamePattern keeps node names to what cannot be read as more than one
// scontrol argument or a host list.
var nodeNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// SetPriority runs `scontrol update jobid=J priority=P` (P between 1 and
// 4294967293: 0 holds a job and the two largest values are Slurm's NO_VAL
// and INFINITE). For a job array Slurm sets the priority task by task: when
// it set it on some tasks and left others out (held since the queue was
// read, ended), the error wraps adapter.ErrPartial and names those left out
// (see priorityResult).
func (s *Scheduler) SetPriority(ctx context.Context, jobID string, priority int64) error {
	if !jobIDPattern.MatchString(jobID) {
		return fmt.Errorf("slurmadapter: set priority: job id %q is not a Slurm job id", jobID)
	}
	if priority < 1 || priority > 4294967293 {
		return fmt.Errorf("slurmadapter: set priority of job %s: %d is outside 1..4294967293", jobID, priority)
	}
	_, stderr, err := s.command(ctx, "scontrol", "update", "jobid="+s.hetTarget(jobID), "priority="+strconv.FormatInt(priority, 10))
	if err == nil {
		return nil
	}
	// scontrol exited 1: it prints Slurm's answer per job or group of
	// tasks, which may say the priority was set on some of them.
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		replies, perr := parseUpdateReply(stderr)
		if perr == nil {
			return priorityResult(jobID, priority, replies)
		}
		s.m.decodeErrors.WithLabelValues("scontrol", errKind(perr)).Inc()
	}
	switch {
	case jobGone(err.Error()):
		return fmt.Errorf("%w: %s: %v", adapter.ErrUnknownJob, jobID, err)
	case strings.Contains(err.Error(), "Job is in held state"):
		// Held since the queue was read; Slurm keeps the hold
		// (ESLURM_JOB_HELD).
		return fmt.Errorf("%w: %s: %v", adapter.ErrHeld, jobID, err)
	}
	return err
}

// jobGone reports whether scontrol's error says the job is not pending any
// more: purged (ESLURM_INVALID_JOB_ID), started (ESLURM_JOB_NOT_PENDING) or
// ended (ESLURM_ALREADY_DONE, ESLURM_JOB_FINISHED: what Slurm 22.05 answers
// for an array's task that has ended), in the words of Slurm's error table.
func jobGone(msg string) bool {
	for _, s := range []string{"Invalid job id", "Job is no longer pending execution", "already completing or completed", "Job has already finished"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// PowerDown reads Slurm's power-saving exclusions, the queue and the node
// again and, when the node is idle, holds no job, is powered, usable, not
// excluded from power saving and no pending job is bound for it, runs
// `scontrol update nodename=N state=POWER_DOWN`. Otherwise it returns an
// error wrapping adapter.ErrNodeBusy, adapter.ErrUnusable or
// adapter.ErrPowerSaveExcluded and sends nothing.
func (s *Scheduler) PowerDown(ctx context.Context, name string) error {
	if err := s.check(ctx, name, true); err != nil {
		return err
	}
	_, err := s.run(ctx, "scontrol", "update", "nodename="+name, "state=POWER_DOWN")
	return err
}

// PowerUp runs `scontrol update nodename=N state=POWER_UP` for a node that
// is powered down or going down; for one that is on or waking (it woke since
// the plan read it: by hand, or Slurm resumed it for a job) it sends nothing
// and returns an error wrapping adapter.ErrAlreadyPowered.
func (s *Scheduler) PowerUp(ctx context.Context, name string) error {
	if !nodeNamePattern.MatchString(name) {
		return fmt.Errorf("slurmadapter: power up: %w: %q is not a node name", adapter.ErrUnknownNode, name)
	}
	nodes, err := s.nodes(ctx, name)
	if err != nil {
		return err
	}
	n, ok := find(nodes, name)
	if !ok {
		return fmt.Errorf("slurmadapter: power up %s: %w", name, adapter.ErrUnknownNode)
	}
	if n.Power.Powered() {
		return fmt.Errorf("slurmadapter: power up %s: %w (state %s)", name, adapter.ErrAlreadyPowered, n.State)
	}
	_, err = s.run(ctx, "scontrol", "update", "nodename="+name, "state=POWER_UP")
	return err
}

// check refuses a power-down of a node that Slurm's power saving excludes,
// that is not idle and on, that a job holds (a suspended one leaves the
// node's counters idle) or that a pending job is bound for. It reads the
// exclusions, then the queue, and the node last, just before the command: a
// job that leaves the queue for the node in between shows on the node.
func (s *Scheduler) check(ctx context.Context, name string, down bool) error {
	if !nodeNamePattern.MatchString(name) {
		return fmt.Errorf("slurmadapter: power down: %w: %q is not a node name", adapter.ErrUnknownNode, name)
	}
	ex, err := s.exclusions(ctx)
	if err != nil {
		return err
	}
	jobs, holding, err := s.queue(ctx)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if slices.Contains(j.Nodes, name) {
			return fmt.Errorf("slurmadapter: power down %s: %w (pending job %s is bound for it)", name, adapter.ErrNodeBusy, j.ID)
		}
	}
	// A node of a SuspendExcNodes group with a count may go down only if
	// enough of the group's others stay up: read them all.
	only := []string{name}
	if ex.counted(name) {
		only = nil
	}
	nodes, err := s.nodes(ctx, only...)
	if err != nil {
		return err
	}
	withJobs(nodes, holding)
	ex.mark(nodes)
	n, ok := find(nodes, name)
	if !ok {
		return fmt.Errorf("slurmadapter: power down %s: %w", name, adapter.ErrUnknownNode)
	}
	switch {
	case down && n.PowerSaveExcluded:
		return fmt.Errorf("slurmadapter: power down %s: %w (SuspendExcNodes, SuspendExcParts or SuspendExcStates; state %s)", name, adapter.ErrPowerSaveExcluded, n.State)
	case len(n.Jobs) > 0:
		return fmt.Errorf("slurmadapter: power down %s: %w (jobs %s hold it; state %s)", name, adapter.ErrNodeBusy, strings.Join(n.Jobs, ","), n.State)
	case n.Busy:
		return fmt.Errorf("slurmadapter: power down %s: %w (state %s)", name, adapter.ErrNodeBusy, n.State)
	case n.Unusable:
		return fmt.Errorf("slurmadapter: power down %s: %w (state %s)", name, adapter.ErrUnusable, n.State)
	case down && n.Power != adapter.PowerOn:
		return fmt.Errorf("slurmadapter: power down %s: %w: not on (state %s)", name, adapter.ErrUnusable, n.State)
	}
	return nil
}

func find(nodes []adapter.Node, name string) (adapter.Node, bool) {
	for _, n := range nodes {
		if n.Name == name {
			return n, true
		}
	}
	return adapter.Node{}, false
}

// run runs a Slurm command and returns its standard output; a failure
// carries its standard error.
func (s *Scheduler) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	stdout, _, err := s.command(ctx, name, args...)
	return stdout, err
}

// commandWaitDelay bounds how long a Slurm command's output is waited for
// once the command has been killed at its timeout or has exited.
const commandWaitDelay = 2 * time.Second

// command runs a Slurm command and returns its standard output and its
// whole standard error; a failure carries the standard error, cut at 500
// bytes, and wraps the *exec.ExitError of a command that exited non-zero
// by itself.
func (s *Scheduler) command(ctx context.Context, name string, args ...string) (stdout []byte, stderr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	bin := name
	if s.cfg.BinDir != "" {
		bin = s.cfg.BinDir + "/" + name
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	// A child of the command (a site's wrapper, ssh, sudo) may keep its
	// output open after the command is killed at the timeout: stop
	// waiting for it soon after.
	cmd.WaitDelay = commandWaitDelay
	cmd.Env = s.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	begin := time.Now()
	err = cmd.Run()
	s.m.cmdDuration.WithLabelValues(name).Observe(time.Since(begin).Seconds())
	stderr = errOut.String()
	if err != nil {
		s.m.commands.WithLabelValues(name, "error").Inc()
		msg := strings.TrimSpace(stderr)
		if len(msg) > 500 {
			msg = msg[:500] + "…"
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, stderr, fmt.Errorf("slurmadapter: %s %s: timed out after %v", name, strings.Join(args, " "), s.cfg.Timeout)
		}
		if msg != "" {
			return nil, stderr, fmt.Errorf("slurmadapter: %s %s: %w: %s", name, strings.Join(args, " "), err, msg)
		}
		return nil, stderr, fmt.Errorf("slurmadapter: %s %s: %w", name, strings.Join(args, " "), err)
	}
	s.m.commands.WithLabelValues(name, "ok").Inc()
	return out.Bytes(), stderr, nil
}

var _ adapter.Scheduler = (*Scheduler)(nil)
