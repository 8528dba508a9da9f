package adapter

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"iter"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kind is what an action does.
type Kind string

// Action kinds.
const (
	SetPriority Kind = "set_priority"
	PowerDown   Kind = "power_down"
	PowerUp     Kind = "power_up"
)

// Action is one change to make to the scheduler.
type Action struct {
	Kind Kind
	// Target is the job id (SetPriority) or the node name.
	Target string
	// Partition is the job's partition, or its comma-separated partitions
	// (SetPriority); power actions look up the node's partitions
	// themselves.
	Partition string
	// Priority is the new priority (SetPriority).
	Priority int64
	// At is when the action was decided, on the scheduler's clock
	// (Snapshot.At): the rate limits count on it, so that on a simulated
	// cluster running faster than real time a cap per hour is one per
	// simulated hour. Zero: the Guard's own clock.
	At time.Time
}

// Outcome is how an action ended.
type Outcome string

// Outcomes.
const (
	Applied Outcome = "applied" // the scheduler accepted it, or part of it (ErrPartial)
	Skipped Outcome = "skipped" // not sent: dry run, not allowlisted, rate limit, node busy; or sent and moot: the job left the queue
	Failed  Outcome = "failed"  // sent, and the scheduler refused or the command failed; or the node could not be read again before a power action
)

// Result is an action's outcome; Err says why it was skipped or failed,
// or, for an action applied in part, what was left out (ErrPartial).
type Result struct {
	Outcome Outcome
	Err     error
}

// GuardConfig is the actuator's safety settings.
type GuardConfig struct {
	// Apply sends actions to the scheduler; false (the default) is a dry
	// run: every check runs and the action is recorded, nothing is sent.
	Apply bool
	// Partitions are the partitions whose pending jobs' priorities may be
	// set and whose nodes may be powered; "*" is every partition. Empty
	// (the default) allows none: the actuator only advises.
	Partitions []string
	// Nodes are shell patterns (path.Match, e.g. "gpu*", "node[0-9]") of the
	// nodes that may be powered down or up; "*" is every node. A node is
	// touched only when it matches and every partition it belongs to is
	// allowed. Empty (the default) allows none.
	Nodes []string
	// MaxPriorityPerMinute caps priority changes per minute. Default 600.
	MaxPriorityPerMinute int
	// MaxPowerPerHour caps node power transitions per hour. Power-ups and
	// power-downs both count, one per node, but only power-downs are
	// refused once the cap is reached: a power-up answers a shortfall (CES
	// plans them without hysteresis or cap), and on a scheduler that does
	// not wake nodes by itself a refused one would leave jobs waiting for
	// nodes that are off. Each power-up but those of nodes that were
	// already off follows a power-down the cap let through. Default 20.
	MaxPowerPerHour int
}

// Defaults of GuardConfig.
const (
	DefaultMaxPriorityPerMinute = 600
	DefaultMaxPowerPerHour      = 20
)

// RegisterFlags adds the --actuator.* safety flags to fs.
func (c *GuardConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Apply, "actuator.apply", false, "send actions to the scheduler; without it the actuator is a dry run that records what it would do")
	fs.Func("actuator.partitions", "comma-separated partitions (VCs) whose jobs' priorities and nodes the actuator may touch; * for all; none when empty", func(s string) error {
		c.Partitions = splitList(s)
		return nil
	})
	fs.Func("actuator.nodes", "comma-separated shell patterns of the nodes the actuator may power down and up (e.g. gpu*, or gpu1[0-9],gpu20 for the Slurm host list gpu[10-20], which is refused); * for all; none when empty", func(s string) error {
		c.Nodes = splitList(s)
		return nil
	})
	// A cap of 0 would read as "the default" (GuardConfig's zero value), not
	// as "none": the flags refuse it and say how to forbid the actions.
	capFlag(fs, &c.MaxPriorityPerMinute, "actuator.max-priority-updates-per-minute", DefaultMaxPriorityPerMinute,
		"cap on job priority changes per minute", "to change no priority, leave --actuator.partitions empty")
	capFlag(fs, &c.MaxPowerPerHour, "actuator.max-power-actions-per-hour", DefaultMaxPowerPerHour,
		"cap on node power transitions per hour; power-ups and power-downs both count, but once it is reached only power-downs are refused",
		"to power no node down or up, leave --actuator.nodes empty")
}

// capFlag registers an int flag of at least 1 with default def.
func capFlag(fs *flag.FlagSet, p *int, name string, def int, usage, forbid string) {
	*p = def
	fs.Func(name, fmt.Sprintf("%s, at least 1 (default %d)", usage, def), func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		if n < 1 {
			return fmt.Errorf("%d: must be at least 1 (%s)", n, forbid)
		}
		*p = n
		return nil
	})
}

// splitList splits a comma-separated list, trimming spaces and leaving out
// empty names; nil when none is left.
func splitList(s string) []string { return slices.Collect(listSeq(s)) }

// listSeq yields what splitList returns, one name at a time.
func listSeq(s string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for f := range strings.SplitSeq(s, ",") {
			if f = strings.TrimSpace(f); f != "" && !yield(f) {
				return
			}
		}
	}
}

// Validate checks the settings; zero limits mean the defaults.
func (c GuardConfig) Validate() error {
	for _, p := range c.Nodes {
		if hostListLike(p) {
			return fmt.Errorf("adapter: --actuator.nodes: %q looks like a Slurm host list, but these are shell patterns, "+
				"where a bracket matches one character ([10-20] is 1, 0 to 2, or 0): write the nodes as shell patterns, "+
				"e.g. gpu1[0-9],gpu20 for gpu[10-20]", p)
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("adapter: --actuator.nodes: bad pattern %q: %w", p, err)
		}
	}
	if c.MaxPriorityPerMinute < 0 || c.MaxPowerPerHour < 0 {
		return errors.New("adapter: --actuator.max-priority-updates-per-minute and --actuator.max-power-actions-per-hour must not be negative")
	}
	return nil
}

// hostListLike reports whether the pattern p has a bracket (closed or not,
// since the flag splits gpu[1-4,7] at its comma) holding two digits in a
// row: in Slurm's host lists gpu[10-20] names gpu10 to gpu20, but as a shell
// pattern it matches gpu0, gpu1 and gpu2.
func hostListLike(p string) bool {
	for {
		i := strings.IndexByte(p, '[')
		if i < 0 {
			return false
		}
		p = p[i+1:]
		class := p
		if j := strings.IndexByte(p, ']'); j >= 0 {
			class = p[:j]
		}
		for k := 1; k < len(class); k++ {
			if isDigit(class[k-1]) && isDigit(class[k]) {
				return true
			}
		}
	}
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func (c GuardConfig) withDefaults() GuardConfig {
	if c.MaxPriorityPerMinute == 0 {
		c.MaxPriorityPerMinute = DefaultMaxPriorityPerMinute
	}
	if c.MaxPowerPerHour == 0 {
		c.MaxPowerPerHour = DefaultMaxPowerPerHour
	}
	return c
}

// Guard applies actions to a Scheduler under the safety rules of its
// GuardConfig. It is safe for concurrent use.
type Guard struct {
	cfg GuardConfig
	s   Scheduler
	now func() time.Time

	mu       sync.Mutex
	priority window
	power    window

	// look is the last Snapshot read through the Guard and lookAt when
	// (g.now): a priority is set on a look at most PriorityRecheck old.
	lookMu sync.Mutex
	look   Snapshot
	lookAt time.Time
}

// PriorityRecheck is how old the Guard's last look at the queue may be when
// it sets a job's priority; an older one is read again first, and a job
// held or no longer pending there is left alone. A pass's first actions use
// the pass's own look; a long pass (hundreds of priorities, power actions)
// reads again every PriorityRecheck. A hold that lands after the look is
// the scheduler's to refuse: Slurm 22.05 answers "Job is in held state"
// and keeps the hold (the slurmadapter reads that as ErrHeld, or, for a
// job array some of whose tasks took the priority, as ErrPartial); a
// scheduler that took the priority would release the job, and this bounds
// that window.
const PriorityRecheck = 10 * time.Second

// NewGuard returns a Guard in front of s.
func NewGuard(cfg GuardConfig, s Scheduler, now func() time.Time) (*Guard, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	cfg = cfg.withDefaults()
	return &Guard{cfg: cfg, s: s, now: now,
		priority: window{span: time.Minute, max: cfg.MaxPriorityPerMinute},
		power:    window{span: time.Hour, max: cfg.MaxPowerPerHour}}, nil
}

// Config returns the settings in force (defaults filled in).
func (g *Guard) Config() GuardConfig { return g.cfg }

// Scheduler returns the scheduler behind the guard.
func (g *Guard) Scheduler() Scheduler { return g.s }

// Snapshot reads the scheduler's state, which the Guard keeps as its look
// at the queue for setting priorities.
func (g *Guard) Snapshot(ctx context.Context) (Snapshot, error) {
	snap, err := g.s.Snapshot(ctx)
	if err == nil {
		g.lookMu.Lock()
		g.look, g.lookAt = snap, g.now()
		g.lookMu.Unlock()
	}
	return snap, err
}

// checkJob refuses to set the priority of a job that is held (in Slurm a
// priority would release it) or no longer pending, as a look at the queue
// at most PriorityRecheck old shows it. failedRead tells an error of the
// read from a refusal.
func (g *Guard) checkJob(ctx context.Context, a Action) (failedRead bool, err error) {
	g.lookMu.Lock()
	snap, at := g.look, g.lookAt
	g.lookMu.Unlock()
	if at.IsZero() || g.now().Sub(at) > PriorityRecheck {
		if snap, err = g.Snapshot(ctx); err != nil {
			return true, fmt.Errorf("adapter: read the queue before setting the priority of job %s: %w", a.Target, err)
		}
	}
	i := slices.IndexFunc(snap.Jobs, func(j Job) bool { return j.ID == a.Target })
	switch {
	case i < 0:
		return false, fmt.Errorf("%w: %s (not pending in the queue read at %s)", ErrUnknownJob, a.Target, snap.At.UTC().Format(time.RFC3339))
	case snap.Jobs[i].Held:
		return false, fmt.Errorf("%w: %s", ErrHeld, a.Target)
	}
	return false, nil
}

// PartitionAllowed reports whether jobs and nodes of partition p may be
// touched. p may be a comma-separated list, as Slurm reports a job
// submitted to several partitions: then every one must be allowed.
func (g *Guard) PartitionAllowed(p string) bool {
	if slices.Contains(g.cfg.Partitions, "*") {
		return true
	}
	parts := SplitPartitions(p)
	if len(parts) == 0 {
		return false
	}
	for _, q := range parts {
		if !slices.Contains(g.cfg.Partitions, q) {
			return false
		}
	}
	return true
}

// NodeAllowed reports whether n may be powered down or up: its name matches
// a pattern and all its partitions are allowed (a node in no partition is
// allowed only with --actuator.partitions=*).
func (g *Guard) NodeAllowed(n Node) bool {
	match := false
	for _, p := range g.cfg.Nodes {
		if ok, _ := path.Match(p, n.Name); ok {
			match = true
			break
		}
	}
	if !match {
		return false
	}
	if len(n.Partitions) == 0 {
		return slices.Contains(g.cfg.Partitions, "*")
	}
	for _, p := range n.Partitions {
		if !g.PartitionAllowed(p) {
			return false
		}
	}
	return true
}

// Do checks and, unless this is a dry run, applies a. In order: the target
// must be allowlisted; a priority is set only on a job pending and not
// held in a look at the queue at most PriorityRecheck old (a failed read
// fails the action); for power actions the node is read again (a fresh
// Snapshot; a failed read fails the action, dry run or not) and a
// power-down is refused on a node that is excluded from power saving by
// the scheduler's configuration, busy, unusable, not on, bound for a
// pending job, or in a partition of a pending job that could not be read in
// full (Job.Unreadable) and is neither held nor Ineligible, and a power-up
// on a node already on or waking (ErrAlreadyPowered: it woke since the plan
// read it); the rate limit must
// have room (a power-up is counted but always has room); then a dry run
// stops (Skipped, "dry run", the unit of the rate limit spent as apply would
// spend it, once for an action asked for again within the window) and
// otherwise the scheduler is called. When the scheduler then fails or refuses the
// action, no transition happened and the unit is given back. An error
// wrapping ErrPartial is not a refusal: the scheduler applied the action in
// part (a job array's priority on some of its tasks), so it is Applied,
// with that error naming what was left out, and keeps its unit.
func (g *Guard) Do(ctx context.Context, a Action) Result {
	switch a.Kind {
	case SetPriority:
		if !g.PartitionAllowed(a.Partition) {
			return Result{Skipped, fmt.Errorf("%w: partition %q of job %s", ErrNotAllowed, a.Partition, a.Target)}
		}
		if failedRead, err := g.checkJob(ctx, a); err != nil {
			if failedRead {
				return Result{Failed, err}
			}
			return Result{Skipped, err}
		}
	case PowerDown, PowerUp:
		snap, err := g.Snapshot(ctx)
		if err != nil {
			// Not a refusal: the Guard could not look, and the action
			// (maybe a needed power-up) was not made. Failed, so that
			// the loop tries again next pass and readiness says so.
			return Result{Failed, fmt.Errorf("adapter: read node %s before %s: %w", a.Target, a.Kind, err)}
		}
		if err := g.checkNode(snap, a); err != nil {
			return Result{Skipped, err}
		}
	default:
		return Result{Skipped, fmt.Errorf("adapter: unknown action kind %q", a.Kind)}
	}
	at, err := g.take(a)
	if err != nil {
		return Result{Skipped, err}
	}
	if !g.cfg.Apply {
		return Result{Skipped, ErrDryRun}
	}
	switch a.Kind {
	case SetPriority:
		err = g.s.SetPriority(ctx, a.Target, a.Priority)
	case PowerDown:
		err = g.s.PowerDown(ctx, a.Target)
	case PowerUp:
		err = g.s.PowerUp(ctx, a.Target)
	}
	if err == nil || errors.Is(err, ErrPartial) {
		return Result{Applied, err}
	}
	g.giveBack(a, at)
	if errors.Is(err, ErrNodeBusy) || errors.Is(err, ErrUnusable) || errors.Is(err, ErrUnknownJob) || errors.Is(err, ErrHeld) || errors.Is(err, ErrPowerSaveExcluded) || errors.Is(err, ErrAlreadyPowered) {
		// The scheduler moved on since the pass read it: the node took a
		// job or woke, or the job started, ended or was held; or its
		// configuration now excludes the node from power saving. Not a
		// failure of either side.
		return Result{Skipped, err}
	}
	return Result{Failed, err}
}

// ErrDryRun is the reason of every action a dry run skips.
var ErrDryRun = errors.New("adapter: dry run (--actuator.apply is not set)")

// ErrPartial is wrapped by a Scheduler's error for an action it applied to
// part of its target only: a job array's priority set on some of its tasks
// while others were left out (held or ended since the queue was read). The
// Guard records such an action as Applied, the error naming what was left
// out.
var ErrPartial = errors.New("adapter: applied in part")

// checkNode refuses what must not be done to a's node as snap, read
// afresh, shows it.
func (g *Guard) checkNode(snap Snapshot, a Action) error {
	i := slices.IndexFunc(snap.Nodes, func(n Node) bool { return n.Name == a.Target })
	if i < 0 {
		return fmt.Errorf("%w: %s", ErrUnknownNode, a.Target)
	}
	n := snap.Nodes[i]
	if !g.NodeAllowed(n) {
		return fmt.Errorf("%w: node %s (partitions %v)", ErrNotAllowed, n.Name, n.Partitions)
	}
	if n.Unusable {
		return fmt.Errorf("%w: %s (state %s)", ErrUnusable, n.Name, n.State)
	}
	if a.Kind == PowerUp {
		if n.Power.Powered() {
			// It woke since the plan read it: nothing to send, and not a
			// transition to count.
			return fmt.Errorf("%w: %s (state %s)", ErrAlreadyPowered, n.Name, n.State)
		}
		return nil
	}
	if n.PowerSaveExcluded {
		return fmt.Errorf("%w: %s (state %s)", ErrPowerSaveExcluded, n.Name, n.State)
	}
	if n.Busy || len(n.Jobs) > 0 {
		return fmt.Errorf("%w: %s (state %s, jobs %v)", ErrNodeBusy, n.Name, n.State, n.Jobs)
	}
	if n.Power != PowerOn {
		return fmt.Errorf("%w: %s is not on (power %s)", ErrUnusable, n.Name, n.Power)
	}
	for _, j := range snap.Jobs {
		if slices.Contains(j.Nodes, n.Name) {
			return fmt.Errorf("%w: %s (pending job %s is bound for it)", ErrNodeBusy, n.Name, j.ID)
		}
	}
	for _, j := range snap.Jobs {
		if j.HoldsPowerDowns(n.Partitions) {
			return fmt.Errorf("%w: %s: pending job %s (partition %q): %s", ErrUnreadableJob, n.Name, j.ID, j.Partition, j.Unreadable)
		}
	}
	return nil
}

// HoldsPowerDowns reports whether pending job j keeps the nodes of
// partitions from being powered down because it could not be read in full:
// it is Unreadable, neither Held nor Ineligible, and was submitted to one
// of partitions or names none (so may start anywhere). The Guard refuses
// such power-downs (ErrUnreadableJob); the control loop names the jobs in
// each partition's plan.
func (j *Job) HoldsPowerDowns(partitions []string) bool {
	if j.Unreadable == "" || j.Held || j.Ineligible {
		return false
	}
	named := false
	for p := range j.PartitionSeq() {
		named = true
		if slices.Contains(partitions, p) {
			return true
		}
	}
	return !named
}

// take spends one unit of a's kind's rate limit at a.At (zero: now), and
// returns the time it was spent at, for giveBack. A power-up is counted but
// never refused (see GuardConfig.MaxPowerPerHour). A dry run spends nothing
// on an action the window already holds (same kind, target and priority):
// its nodes and jobs do not change, so the loop asks for the same action
// again, which an applied run would have made once.
func (g *Guard) take(a Action) (time.Time, error) {
	at := a.At
	if at.IsZero() {
		at = g.now()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w, what := g.window(a.Kind)
	var key string // only a dry run looks events up by action
	if !g.cfg.Apply {
		key = string(a.Kind) + "|" + a.Target + "|" + strconv.FormatInt(a.Priority, 10)
	}
	if !w.take(at, a.Kind == PowerUp, key, !g.cfg.Apply) {
		return at, &RateLimitError{Max: w.max, What: what, RoomAt: w.roomAt(at)}
	}
	return at, nil
}

// Seed records past actions, each at its At, as units spent of its kind's
// rate limit, as take would have spent them: what an earlier run of the
// actuator did, read back from the audit table at start, so that a restart
// does not hand the caps a fresh window. Actions of other kinds are
// ignored; those older than the window leave it at the next take.
func (g *Guard) Seed(past []Action) {
	g.mu.Lock()
	defer g.mu.Unlock()
	touched := map[*window]bool{}
	for _, a := range past {
		if a.Kind != SetPriority && a.Kind != PowerDown && a.Kind != PowerUp {
			continue
		}
		w, _ := g.window(a.Kind)
		var key string // as take keys a dry run's events
		if !g.cfg.Apply {
			key = string(a.Kind) + "|" + a.Target + "|" + strconv.FormatInt(a.Priority, 10)
		}
		w.events = append(w.events, event{at: a.At, key: key})
		touched[w] = true
	}
	for w := range touched {
		slices.SortStableFunc(w.events, func(a, b event) int { return a.at.Compare(b.at) })
	}
}

// RateLimitError is the error of an action its rate limit held back. It
// wraps ErrRateLimited.
type RateLimitError struct {
	Max  int
	What string // what the limit counts: "priority changes per minute", …
	// RoomAt is when, on the clock the limit counts on (Action.At), the
	// window next has room, unless other actions take it first.
	RoomAt time.Time
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%v: %d %s (room again at %s)", ErrRateLimited, e.Max, e.What, e.RoomAt.UTC().Format(time.RFC3339))
}

// Unwrap returns ErrRateLimited.
func (e *RateLimitError) Unwrap() error { return ErrRateLimited }

// giveBack returns the unit take spent at at for a, which made no
// transition.
func (g *Guard) giveBack(a Action, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w, _ := g.window(a.Kind)
	w.giveBack(at)
}

// window returns the rate limit of kind k and what it counts; g.mu is held.
func (g *Guard) window(k Kind) (*window, string) {
	if k == SetPriority {
		return &g.priority, "priority changes per minute"
	}
	return &g.power, "power transitions per hour"
}

// window is a sliding-window rate limit: at most max events in any span.
type window struct {
	span   time.Duration
	max    int
	events []event // oldest first
}

// An event is a unit spent at a time, on the action key names.
type event struct {
	at  time.Time
	key string
}

// take records an event at now for key if the window has room, or
// regardless when force is set, and reports whether it did; with once
// set, an event for key already in the window is enough (nothing is
// recorded).
func (w *window) take(now time.Time, force bool, key string, once bool) bool {
	cut := 0
	for cut < len(w.events) && !w.events[cut].at.After(now.Add(-w.span)) {
		cut++
	}
	w.events = w.events[cut:]
	if once && slices.ContainsFunc(w.events, func(e event) bool { return e.key == key }) {
		return true
	}
	if len(w.events) >= w.max && !force {
		return false
	}
	w.events = append(w.events, event{at: now, key: key})
	return true
}

// roomAt returns when the window, as take left it at now, next has room:
// when enough of its oldest events have left the span.
func (w *window) roomAt(now time.Time) time.Time {
	if len(w.events) < w.max || w.max <= 0 {
		return now
	}
	return w.events[len(w.events)-w.max].at.Add(w.span)
}

// giveBack forgets one event recorded at at, if the window still holds one.
func (w *window) giveBack(at time.Time) {
	for i := len(w.events) - 1; i >= 0; i-- {
		if w.events[i].at.Equal(at) {
			w.events = slices.Delete(w.events, i, i+1)
			return
		}
	}
}
