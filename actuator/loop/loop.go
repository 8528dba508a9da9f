// Package loop is the actuator's control loop. Every pass it
//
//  1. reads the scheduler (pending jobs, nodes) through the Guard, and
//     exports each node's power state as heliostat_actuator_node_powered_off
//     (1: powered down or powering down), by which HeliostatComponentDown
//     leaves the collectors of powered-down nodes alone;
//  2. predicts each pending job's run time — with the live duration model
//     (predictor/live) when one is trained, else the job's time limit, else
//     Config.UnknownDuration, and says which (source model, time_limit,
//     unknown);
//  3. ranks the queue by QSSF (actuator/qssf) and maps each job's QSSF key
//     to a scheduler priority (Priority), setting those that differ for jobs
//     of allowlisted partitions;
//  4. for each partition, from its nodes, its demand (busy nodes plus the
//     nodes its pending jobs need: a job submitted to several partitions
//     counts in each, a job asking for several nodes gets whole nodes, a
//     pending array counts each task that may start, and held jobs and jobs
//     that cannot start yet — Job.Ineligible — count not at all, but by
//     reason in heliostat_actuator_demand_excluded_jobs and in the power
//     actions' basis; so do jobs the adapter could not read in full —
//     Job.Unreadable — which are not ranked either, and for which, unless
//     they are held or cannot start yet, the Guard refuses to power down
//     the nodes of their partitions) and
//     a forecast, makes a CES power plan
//     (actuator/ces) and powers nodes down and up accordingly. The
//     forecast is predictor/demand's (a causal model of the demand the
//     loop has recorded, with an upper bound calibrated on its own past
//     errors) once the recorded demand spans Config.ForecastMinHistory,
//     and the peak demand of the last Config.PeakWindow before that. With
//     a DemandStore, the recorded demand is saved as it grows and loaded
//     back at start, so a restart keeps the model, and the time before the
//     saved history is rebuilt from the job records, so a new installation
//     forecasts from the jobs the pipeline already holds;
//  5. writes every action to the audit table (actuator/audit) before any of
//     them is sent, sends them through the Guard (dry run, allowlists, rate
//     limits, a fresh look at the node), and writes their outcomes. A pass
//     cancelled once its plan is recorded finishes the action in flight and
//     records the outcomes (ActTimeout), and starts no other.
//
// Power plans choose only nodes the Guard lets them power and the scheduler
// does not exclude from power saving; the others count as they stand
// (ces.Node.Fixed). The caps on power transitions, CES's and the Guard's,
// count the power actions of the hour before the loop started, and the
// Guard's cap on priority changes those of the minute before, read back
// from the audit table (caps.go), so that a restart does not reset them.
//
// The latest pass's ranked queue and plans are kept as a View for the
// advisory API.
package loop

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
	"github.com/heliostat-dev/heliostat/actuator/audit"
	"github.com/heliostat-dev/heliostat/actuator/ces"
	"github.com/heliostat-dev/heliostat/actuator/demandlog"
	"github.com/heliostat-dev/heliostat/actuator/qssf"
	"github.com/heliostat-dev/heliostat/internal/health"
	"github.com/heliostat-dev/heliostat/predictor/live"
)

// Predictor predicts a job's run time from its spec: *live.Runner.
type Predictor interface {
	Predict(s live.Spec) (live.Estimate, error)
}

// Auditor records actions before and after they are applied: *audit.Log.
type Auditor interface {
	NewID(at time.Time) string
	Plan(ctx context.Context, recs []audit.Record) error
	Settle(ctx context.Context, recs []audit.Record) error
}

// DemandStore keeps the demand history the loop records for its demand
// model across restarts: *demandlog.Log.
type DemandStore interface {
	Save(ctx context.Context, cluster string, marks []demandlog.Mark) error
	Load(ctx context.Context, cluster string, since, until time.Time) (demandlog.Loaded, error)
}

// Prediction sources.
const (
	SourceModel     = "model"      // the live duration model
	SourceTimeLimit = "time_limit" // no model (yet): the job's time limit
	SourceUnknown   = "unknown"    // neither: Config.UnknownDuration
)

// Prediction is a job's predicted run time and where it came from.
type Prediction struct {
	Predicted    time.Duration
	Lower, Upper time.Duration
	Source       string
	ModelVersion uint64
	// Note says why a fallback was used.
	Note string
}

// Loop is the control loop. Its View is safe for concurrent use with Run.
type Loop struct {
	cfg    Config
	g      *adapter.Guard
	audit  Auditor
	pred   Predictor
	logger *slog.Logger
	m      *metrics
	now    func() time.Time

	mu   sync.Mutex // one pass at a time; guards the fields below
	pool map[string]*poolState
	seen map[string]recent // kind|target → last skipped action recorded
	owed []audit.Record    // outcomes not yet written (ClickHouse was down)
	// unreadable holds the pending jobs whose record the adapter could not
	// read in full (adapter.Job.Unreadable) that the log has named, so
	// that each is named once while it waits.
	unreadable map[string]bool
	// useRebuilt holds the partitions rebuildUse has been through.
	useRebuilt map[string]bool

	stored storedDemand // the demand history's DemandStore side
	caps   capHistory   // the power actions of the hour before the start

	view viewBox

	age passAge // when the last pass succeeded, and the one running began

	health  *health.Status
	passes  *health.Cond // the last pass failed (scheduler or audit table)
	actions *health.Cond // the last pass's actions: some failed
}

// poolState is what the loop remembers of one partition between passes.
type poolState struct {
	name    string
	ces     ces.State
	demand  []demandMark // demand seen, oldest first, within PeakWindow
	model   *demandModel // Config.Forecast "model": the forecaster and its history
	first   time.Time    // first pass that saw the partition
	changed map[string]time.Time
	// use is each node kind's recent use (ces.Input.KindUse) as of useAt.
	use   map[string]kindUse
	useAt time.Time
	// planned is this pass's power plan until its outcomes are known; the
	// nodes whose action was sent to the scheduler are in carried.
	planned *ces.Plan
	carried map[string]bool
}

// observeUse folds the nodes of a pass that are busy, incoming or needed,
// counted by kind, into the partition's recent use of each kind and returns
// it: for each kind, the mean of its counts over the time the loop has
// watched it, each pass's count standing for the time since the pass
// before, with weights that halve every halfLife back (so a new loop learns
// from its first hours, not only after a half-life). A kind's first pass
// stands alone until the next; a kind whose nodes left the partition is
// forgotten; a pass no later than the one before changes nothing.
func (ps *poolState) observeUse(now time.Time, nodes []ces.Node, halfLife time.Duration) map[string]float64 {
	if ps.useAt.IsZero() || now.After(ps.useAt) {
		cur := make(map[string]float64, 2)
		for _, n := range nodes {
			v := cur[n.Kind]
			if n.Busy || n.Incoming || n.Needed {
				v++
			}
			cur[n.Kind] = v
		}
		keep := 0.0
		if !ps.useAt.IsZero() {
			keep = math.Exp2(-float64(now.Sub(ps.useAt)) / float64(halfLife))
		}
		next := make(map[string]kindUse, len(cur))
		for k, v := range cur {
			u, seen := ps.use[k]
			if seen {
				u = kindUse{sum: keep*u.sum + (1-keep)*v, weight: keep*u.weight + (1 - keep), last: v}
			} else {
				u = kindUse{last: v} // the kind's first pass: no time to stand for yet
			}
			next[k] = u
		}
		ps.use, ps.useAt = next, now
	}
	out := make(map[string]float64, len(ps.use))
	for k, u := range ps.use {
		out[k] = u.last
		if u.weight > 0 {
			out[k] = u.sum / u.weight
		}
	}
	return out
}

// kindUse is a kind's weighted sum of counts, the sum of its weights, and
// its count at the latest pass (the use until a second pass gives weight).
type kindUse struct{ sum, weight, last float64 }

type demandMark struct {
	at time.Time
	v  float64
}

type recent struct {
	value int64
	at    time.Time
	// until, when set, ends the hold before RepeatAfter: a rate limit's
	// window has room again then.
	until time.Time
	// unread: held because the power caps' history could not be read;
	// the hold ends once it is (seedCaps).
	unread bool
}

// holds reports whether r, recorded as skipped, keeps the same action from
// being recorded again at now.
func (r recent) holds(now time.Time, repeatAfter time.Duration) bool {
	if now.Before(r.at) {
		return false
	}
	if !r.until.IsZero() {
		return now.Before(r.until)
	}
	return now.Sub(r.at) < repeatAfter
}

// New returns a Loop acting through g, recording in a, predicting with p
// (nil: time limits only), keeping its demand history in d (nil: in memory
// only, so a restart starts it afresh). When d also reads job records
// (JobRecords, as *demandlog.Log does), each partition's history from before
// the saved one is rebuilt from them at start. Metrics are registered on reg
// unless it is nil.
func New(cfg Config, g *adapter.Guard, a Auditor, p Predictor, d DemandStore, logger *slog.Logger, reg prometheus.Registerer, now func() time.Time) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if g == nil || a == nil {
		return nil, errors.New("loop: a guard and an auditor are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	stored := storedDemand{store: d}
	if jr, ok := d.(JobRecords); ok {
		stored.jobs = jr
	}
	l := &Loop{cfg: cfg, g: g, audit: a, pred: p, logger: logger, m: m, now: now,
		pool: map[string]*poolState{}, seen: map[string]recent{}, unreadable: map[string]bool{}, stored: stored, health: health.New(now)}
	if h, ok := a.(History); ok {
		l.caps.history = h
	}
	l.passes = l.health.Add("actuator", "no pass of the control loop yet")
	l.actions = l.health.Add("scheduler actions", "")
	return l, nil
}

// Ready returns nil while the loop does its work: a pass has completed, the
// last one did not fail, one succeeded within Config.MaxPassAge, and the
// scheduler accepted every action it sent. Otherwise it says what fails,
// since when and why. It does not wait for a pass in flight.
func (l *Loop) Ready() error {
	return errors.Join(l.health.Err(), l.age.stale(l.now(), l.cfg.MaxPassAge))
}

// passAge is when the last pass succeeded and when the pass in flight
// began, kept apart from Loop.mu, which a hanging pass holds.
type passAge struct {
	mu      sync.Mutex
	ok      time.Time // the end of the last pass that succeeded; zero: none yet
	running time.Time // the start of the pass in flight; zero: none
}

func (a *passAge) begin(at time.Time) { a.mu.Lock(); a.running = at; a.mu.Unlock() }
func (a *passAge) end()               { a.mu.Lock(); a.running = time.Time{}; a.mu.Unlock() }
func (a *passAge) succeeded(at time.Time) {
	a.mu.Lock()
	a.ok = at
	a.mu.Unlock()
}

// stale returns an error when no pass has succeeded for longer than maxAge
// at now, saying since when and whether a pass is running (a failed one is
// named by the "actuator" condition); nil otherwise. Before the first
// success, only a first pass running longer than maxAge is stale: until
// then the "actuator" condition waits, or names the failure.
func (a *passAge) stale(now time.Time, maxAge time.Duration) error {
	a.mu.Lock()
	ok, running := a.ok, a.running
	a.mu.Unlock()
	var inFlight string
	if !running.IsZero() {
		inFlight = fmt.Sprintf("a pass has been running for %s (since %s)", fmtDur(now.Sub(running)), running.UTC().Format(time.RFC3339))
	}
	switch {
	case ok.IsZero() && !running.IsZero() && now.Sub(running) > maxAge:
		return fmt.Errorf("actuator: no pass has succeeded yet; %s, longer than --actuator.max-pass-age %s", inFlight, maxAge)
	case ok.IsZero() || now.Sub(ok) <= maxAge:
		return nil
	}
	err := fmt.Sprintf("actuator: no pass has succeeded for %s (since %s; --actuator.max-pass-age %s)", fmtDur(now.Sub(ok)), ok.UTC().Format(time.RFC3339), maxAge)
	if inFlight != "" {
		err += "; " + inFlight
	}
	return errors.New(err)
}

// Config returns the loop's settings, defaults filled in.
func (l *Loop) Config() Config { return l.cfg }

// Timeouts of the work a pass finishes past its caller's cancellation.
const (
	// ActTimeout bounds sending, once a pass has recorded its plan, the
	// actions already started, and recording their outcomes: they run on a
	// context detached from the caller's, so that a cancellation (SIGTERM,
	// an API client gone) neither kills a command Slurm may have applied
	// nor leaves the audit rows planned.
	ActTimeout = 2 * time.Minute
	// StopSettleTimeout bounds Run's last try, as it stops, at recording
	// the outcomes an earlier pass could not.
	StopSettleTimeout = 10 * time.Second
)

// ErrOutcomesNotRecorded is the error of a pass that sent its actions but
// could not write their outcomes to the audit table: its Report lists the
// actions all the same, and the outcomes are written by a later pass (or as
// Run stops).
var ErrOutcomesNotRecorded = errors.New("loop: outcomes not written to the audit table")

// errPassCancelled is the reason of the actions a cancelled pass did not
// start.
var errPassCancelled = errors.New("loop: pass cancelled (or ActTimeout spent) before the action was sent; the next pass retries it")

// Run makes a pass every Interval until ctx ends. A failed pass is logged
// and counted; the next one tries again. As it stops, it tries once more to
// record the outcomes a pass could not (StopSettleTimeout).
func (l *Loop) Run(ctx context.Context) error {
	defer l.settleOwedAtStop(ctx)
	gc := l.g.Config()
	l.logger.Info("actuator loop", "adapter", l.g.Scheduler().Name(), "apply", gc.Apply, "partitions", gc.Partitions, "nodes", gc.Nodes, "settings", l.cfg.describe())
	if len(gc.Partitions) == 0 {
		l.logger.Warn("no partition allowlisted (--actuator.partitions): the actuator only advises and records nothing")
	}
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := l.Once(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			l.logger.Warn("actuator pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Report says what one pass did.
type Report struct {
	At      time.Time
	Pending int
	// Actions are the actions recorded this pass, with their outcomes.
	Actions []audit.Record
}

// planned is an action and its audit record.
type planned struct {
	a   adapter.Action
	rec audit.Record
}

// Once makes one pass.
func (l *Loop) Once(ctx context.Context) (Report, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	begin := l.now()
	l.age.begin(begin)
	defer l.age.end()
	defer func() { l.m.duration.Observe(l.now().Sub(begin).Seconds()) }()
	rep, err := l.once(ctx)
	if ctx.Err() == nil {
		l.passes.Report(err)
	}
	if err != nil {
		l.m.errors.Inc()
		return rep, err
	}
	end := l.now()
	l.age.succeeded(end)
	l.m.lastSuccess.Set(float64(end.UnixNano()) / 1e9)
	return rep, nil
}

func (l *Loop) once(ctx context.Context) (Report, error) {
	if err := l.settleOwed(ctx); err != nil {
		return Report{}, err
	}
	snap, err := l.g.Snapshot(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("loop: read scheduler: %w", err)
	}
	// A failed read (above) keeps the last pass's power states: slurmctld,
	// which powers nodes down and up, is then most likely down too, and
	// HeliostatActuatorLoopFailing pages.
	l.m.setNodePower(snap.Nodes)
	now := snap.At
	if now.IsZero() {
		now = l.now()
	}
	// UTC and to the second, as the audit table keeps decided_at and Slurm
	// reports its times: the Slurm adapter reads the host's clock, in its
	// zone, and every time a pass shows (the API's at, the plans') derives
	// from now.
	now = now.UTC().Truncate(time.Second)
	rep := Report{At: now}
	v := &View{At: now, Adapter: l.g.Scheduler().Name(), Apply: l.g.Config().Apply, QSSF: l.cfg.QSSF}

	// Predictions and the QSSF order. A job the adapter could not read in
	// full is not ranked: its GPU service time is unknown.
	l.noteUnreadable(snap.Jobs)
	var qjobs []qssf.Job
	byID := map[string]*adapter.Job{}
	preds := map[string]Prediction{}
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		if j.Held || j.Unreadable != "" {
			continue
		}
		p := l.predict(j)
		preds[j.ID] = p
		byID[j.ID] = j
		l.m.predictions.WithLabelValues(p.Source).Inc()
		qjobs = append(qjobs, qssf.Job{ID: j.ID, User: j.User, VC: j.Partition, GPUs: j.GPUs, Submit: j.Submit, Predicted: p.Predicted})
	}
	rep.Pending = len(qjobs)
	l.m.pending.Set(float64(len(qjobs)))
	ranked := l.cfg.QSSF.Rank(now, qjobs)
	var todo []planned
	for _, r := range ranked {
		j, p := byID[r.ID], preds[r.ID]
		want := Priority(l.cfg.QSSF, &r.Job)
		managed := l.g.PartitionAllowed(j.Partition)
		v.Queue = append(v.Queue, QueueEntry{Rank: r.Rank, JobID: r.ID, User: r.User, Partition: j.Partition, GPUs: r.GPUs,
			Submit: r.Submit, PredictedS: p.Predicted.Seconds(), LowerS: p.Lower.Seconds(), UpperS: p.Upper.Seconds(),
			Source: p.Source, ModelVersion: p.ModelVersion, GPUServiceS: r.Job.Service(), Score: r.Score,
			Priority: j.Priority, TargetPriority: want, Managed: managed})
		if !managed || j.Priority == want {
			continue
		}
		basis, _ := json.Marshal(map[string]any{
			"rank": r.Rank, "of": len(ranked), "predicted_s": p.Predicted.Seconds(), "lower_s": p.Lower.Seconds(), "upper_s": p.Upper.Seconds(),
			"source": p.Source, "model_version": p.ModelVersion, "gpu_service_s": r.Job.Service(), "score": r.Score, "waited_s": r.Waited.Seconds(),
		})
		why := fmt.Sprintf("qssf rank %d of %d: predicted %s (%s) × %d GPUs = %.0f GPU·s; priority %d → %d",
			r.Rank, len(ranked), fmtDur(p.Predicted), p.Source, max(r.GPUs, 1), r.Job.Service(), j.Priority, want)
		if p.Note != "" {
			why += "; " + p.Note
		}
		prev, val := j.Priority, want
		todo = append(todo, planned{
			a:   adapter.Action{Kind: adapter.SetPriority, Target: j.ID, Partition: j.Partition, Priority: want},
			rec: audit.Record{Kind: string(adapter.SetPriority), Target: j.ID, Partition: j.Partition, Value: &val, Previous: &prev, Reason: why, Basis: string(basis), ModelVersion: p.ModelVersion},
		})
	}
	v.sortKeys()

	// Power plans, one per partition, on the demand history saved by
	// earlier runs once it is loaded; the demand recorded is saved.
	pools, excluded := partitionNodes(snap)
	l.loadDemand(ctx, now)
	l.rebuildDemand(ctx, now, pools)
	l.rebuildUse(ctx, now, pools)
	l.seedCaps(ctx, now)
	plans, power := l.plan(now, snap, pools, excluded)
	v.Plans = plans
	l.saveDemand(ctx, now)
	todo = append(todo, power...)

	// Record, act, record.
	todo = l.dedupe(now, todo)
	if len(todo) == 0 {
		l.carryPlans()
		l.actions.OK() // nothing sent, so nothing is failing
	} else {
		recs, err := l.apply(ctx, now, todo)
		rep.Actions = recs
		l.carryPlans()
		if err != nil {
			l.view.store(v)
			return rep, err
		}
	}
	l.view.store(v)
	return rep, nil
}

// noteUnreadable logs, once while it waits, each pending job whose record
// the adapter could not read in full, and forgets the jobs that left the
// queue or were read in full since.
func (l *Loop) noteUnreadable(jobs []adapter.Job) {
	now := map[string]bool{}
	for _, j := range jobs {
		if j.Unreadable == "" {
			continue
		}
		now[j.ID] = true
		if l.unreadable[j.ID] {
			continue
		}
		l.unreadable[j.ID] = true
		effect := "its priority is left alone, it does not count as demand, and no node of its partitions is powered down while it waits"
		switch {
		case j.Held:
			effect = "its priority is left alone; it is held, so no power-down waits on it"
		case j.Ineligible:
			effect = "its priority is left alone; it cannot start yet (" + j.Reason + "), so no power-down waits on it until it can"
		}
		l.logger.Warn("pending job could not be read in full", "job", j.ID, "partition", j.Partition, "user", j.User, "problem", j.Unreadable, "effect", effect)
	}
	for id := range l.unreadable {
		if !now[id] {
			delete(l.unreadable, id)
		}
	}
}

// carryPlans hands each partition's plan of this pass on to the next as
// far as it was carried out (ces.Plan.Carried): a power action counts as a
// transition, and a round of power-downs restarts the down-side clock, only
// once it was sent to the scheduler (applied, or failed); a skipped one (a
// dry run, a partition not allowlisted, the guard's caps, a busy node) is
// planned again as the nodes stand.
func (l *Loop) carryPlans() {
	for _, ps := range l.pool {
		if ps.planned == nil {
			continue
		}
		ps.ces = ps.planned.Carried(func(a ces.Action) bool { return ps.carried[a.Node] })
		ps.planned, ps.carried = nil, nil
	}
}

// predict returns j's prediction: the model's, else its time limit, else
// UnknownDuration.
func (l *Loop) predict(j *adapter.Job) Prediction {
	var note string
	if l.pred != nil {
		e, err := l.pred.Predict(live.Spec{Cluster: l.cfg.Cluster, JobID: j.ID, User: j.User, Name: j.Name, Partition: j.Partition, GPUs: j.GPUs, TimeLimit: j.TimeLimit, Submit: j.Submit, GPUType: j.GPUType})
		if err == nil {
			return Prediction{Predicted: e.Point, Lower: e.Low, Upper: e.High, Source: SourceModel, ModelVersion: e.ModelVersion}
		}
		note = "no model prediction: " + err.Error()
	} else {
		note = "no predictor configured"
	}
	if j.TimeLimit > 0 {
		return Prediction{Predicted: j.TimeLimit, Lower: 0, Upper: j.TimeLimit, Source: SourceTimeLimit, Note: note + "; using the time limit"}
	}
	d := l.cfg.UnknownDuration
	return Prediction{Predicted: d, Lower: 0, Upper: d, Source: SourceUnknown, Note: note + "; no time limit either, assuming " + fmtDur(d)}
}

// partitionNodes groups snap's nodes by partition. A node in several
// partitions (or none) is excluded: whose demand keeps it up is not one
// pool's to say, so it is never touched.
func partitionNodes(snap adapter.Snapshot) (pools map[string][]adapter.Node, excluded []string) {
	pools = map[string][]adapter.Node{}
	for _, n := range snap.Nodes {
		if len(n.Partitions) != 1 {
			excluded = append(excluded, n.Name)
			continue
		}
		pools[n.Partitions[0]] = append(pools[n.Partitions[0]], n)
	}
	return pools, excluded
}

// plan makes each partition's power plan and the actions of the managed
// ones.
func (l *Loop) plan(now time.Time, snap adapter.Snapshot, pools map[string][]adapter.Node, excluded []string) ([]PoolPlan, []planned) {
	bound := map[string]bool{}
	for _, j := range snap.Jobs {
		if j.Held {
			continue
		}
		for _, n := range j.Nodes {
			bound[n] = true
		}
	}
	pending := pendingByPool(snap.Jobs)
	unreadable := unreadableByPool(snap.Jobs, pools)
	notCounted, total := excludedByPool(snap.Jobs)
	l.m.excluded.Reset()
	l.m.excluded.WithLabelValues("unreadable").Set(0) // always there: an alert reads it
	for r, n := range total {
		l.m.excluded.WithLabelValues(r).Set(float64(n))
	}
	names := make([]string, 0, len(pools))
	for p := range pools {
		names = append(names, p)
	}
	sort.Strings(names)
	var out []PoolPlan
	var todo []planned
	for _, part := range names {
		nodes := pools[part]
		ps := l.pool[part]
		if ps == nil {
			ps = &poolState{name: part, first: now, changed: map[string]time.Time{}}
			l.pool[part] = ps
		}
		if past := l.caps.transitions[part]; len(past) > 0 {
			// Transitions of the hour before this run (seedCaps).
			ps.ces.Transitions = mergeTimes(past, ps.ces.Transitions)
			delete(l.caps.transitions, part)
		}
		managed := l.g.PartitionAllowed(part)
		in := ces.Input{Now: now, State: ps.ces}
		busy, gpn := 0, 0
		open, asks := splitAsks(pending[part], nodes)
		var skipped, moving, fixed []string
		for _, n := range nodes {
			if n.Unusable {
				skipped = append(skipped, n.Name)
				continue
			}
			if n.Power == adapter.PowerGoingDown || n.Power == adapter.PowerUnknown {
				// Between states: left alone until it settles.
				moving = append(moving, n.Name)
				continue
			}
			// Fixed: a node of a managed partition the guard would not
			// let the plan power (--actuator.nodes), or one the
			// scheduler's power saving excludes, stays as it is and
			// counts as it stands, so that the plan powers the nodes it
			// may instead of asking every pass for ones it may not.
			cn := ces.Node{Name: n.Name, Powered: n.Power.Powered(), Busy: n.Busy || len(n.Jobs) > 0, Incoming: bound[n.Name],
				LastTransition: ps.changed[n.Name], WakingUntil: n.WakeAt, Kind: n.Kind(),
				Fixed: n.PowerSaveExcluded || managed && !l.g.NodeAllowed(n)}
			if cn.Fixed {
				fixed = append(fixed, n.Name)
			}
			if n.Power == adapter.PowerWaking && n.WakeAt.IsZero() {
				cn.WakingUntil = now.Add(l.cfg.CES.WakeLatency)
			}
			if cn.Busy {
				busy++
			}
			gpn = max(gpn, n.GPUs)
			in.Nodes = append(in.Nodes, cn)
		}
		byName := make(map[string]*ces.Node, len(in.Nodes))
		for i := range in.Nodes {
			byName[in.Nodes[i].Name] = &in.Nodes[i]
		}
		restricted := restrictedDemand(asks, nodes, byName)
		need := float64(nodesNeeded(open, gpn) + restricted)
		in.Demand = min(float64(busy)+need, float64(len(in.Nodes)))
		if l.cfg.KindUseHalfLife > 0 {
			in.KindUse = ps.observeUse(now, in.Nodes, l.cfg.KindUseHalfLife)
		}
		var kind string
		in.Forecast, kind = l.forecast(ps, now, in.Demand)
		pp := PoolPlan{Partition: part, Managed: managed, Unusable: skipped, Transitioning: moving, Fixed: fixed, Nodes: len(nodes), ForecastKind: kind,
			UnreadableJobs: unreadable[part]}
		if len(in.KindUse) > 1 {
			pp.KindUse = in.KindUse
		}
		plan, err := l.cfg.CES.Plan(in)
		if err != nil {
			pp.Error = err.Error()
			out = append(out, pp)
			continue
		}
		ps.planned, ps.carried = &plan, map[string]bool{}
		pp.Plan = &plan
		out = append(out, pp)
		if !pp.Managed {
			continue
		}
		b := map[string]any{"partition": part, "target": plan.Target, "demand": plan.Demand, "powered": plan.Powered,
			"held": plan.Held, "forecast": plan.Forecast, "forecast_kind": kind}
		if ex := notCounted[part]; len(ex) > 0 {
			b["excluded_jobs"] = ex
		}
		basis, _ := json.Marshal(b)
		for _, acts := range []struct {
			kind adapter.Kind
			list []ces.Action
		}{{adapter.PowerUp, plan.PowerUp}, {adapter.PowerDown, plan.PowerDown}} {
			for _, a := range acts.list {
				todo = append(todo, planned{
					a:   adapter.Action{Kind: acts.kind, Target: a.Node},
					rec: audit.Record{Kind: string(acts.kind), Target: a.Node, Partition: part, Reason: a.Reason, Basis: string(basis)},
				})
			}
		}
	}
	if len(excluded) > 0 {
		out = append(out, PoolPlan{Partition: "", Excluded: excluded})
	}
	return out, todo
}

// pendingByPool groups the pending jobs that count as demand (all but the
// held ones, those that cannot start however many nodes are up and those the
// adapter could not read in full) by the
// partitions they were submitted to. A job submitted to several
// ("gpu,other") is in each: whichever starts it, each keeps room for it.
func pendingByPool(jobs []adapter.Job) map[string][]*adapter.Job {
	out := map[string][]*adapter.Job{}
	for i := range jobs {
		j := &jobs[i]
		if j.Held || j.Ineligible || j.Unreadable != "" {
			continue
		}
		for p := range j.PartitionSeq() {
			out[p] = append(out[p], j)
		}
	}
	return out
}

// unreadableByPool returns, for each partition of pools, the ids of the
// pending jobs that hold its power-downs (adapter.Job.HoldsPowerDowns, the
// Guard's rule); nil when none does.
func unreadableByPool(jobs []adapter.Job, pools map[string][]adapter.Node) map[string][]string {
	var out map[string][]string
	for p := range pools {
		for i := range jobs {
			if j := &jobs[i]; j.HoldsPowerDowns([]string{p}) {
				if out == nil {
					out = map[string][]string{}
				}
				out[p] = append(out[p], j.ID)
			}
		}
	}
	return out
}

// restrictedAsk is the pending jobs of a pool that ask for the same thing
// (GPUs, nodes, GPU type, constraint) and that only some of its usable
// nodes can run (adapter.Job.Fits).
type restrictedAsk struct {
	jobs []*adapter.Job
	typ  string // the GPU type asked for; "" for any
	fit  []int  // indices into the pool's nodes of the usable nodes that fit
	gpn  int    // the most GPUs of the kind asked for on one fitting node
}

// splitAsks divides a pool's pending jobs into those every usable node of
// nodes could run (open; a job of 8 GPUs on one node where every node has 8
// says nothing about which nodes to wake) and those restricted to some of
// them, by what they ask for — their GPUs per node, GPU type or constraint
// — grouped by ask in order of first appearance, so that a long queue of
// alike jobs costs one check per node.
func splitAsks(jobs []*adapter.Job, nodes []adapter.Node) (open []*adapter.Job, asks []restrictedAsk) {
	type ask struct {
		gpu, constraint string
		gpus, nodes     int
	}
	index := map[ask]int{} // -1: open
	for _, j := range jobs {
		a := ask{j.GPUType, j.Constraint, j.GPUs, j.NodeCount}
		i, seen := index[a]
		if !seen {
			i = -1
			probe := adapter.Job{GPUType: a.gpu, Constraint: a.constraint, GPUs: a.gpus, NodeCount: a.nodes}
			if fits, restricted := probe.Fitter(); restricted {
				var fit []int
				gpn, all := 0, true
				for k := range nodes {
					if nodes[k].Unusable {
						continue
					}
					if !fits(&nodes[k]) {
						all = false
						continue
					}
					fit = append(fit, k)
					if a.gpu != "" {
						gpn = max(gpn, nodes[k].GPUTypes[a.gpu])
					} else {
						gpn = max(gpn, nodes[k].GPUs)
					}
				}
				if !all {
					i = len(asks)
					asks = append(asks, restrictedAsk{typ: a.gpu, fit: fit, gpn: gpn})
				}
			}
			index[a] = i
		}
		if i < 0 {
			open = append(open, j)
			continue
		}
		asks[i].jobs = append(asks[i].jobs, j)
	}
	return open, asks
}

// restrictedDemand counts the nodes the restricted asks of a pool add to
// its demand, and marks Wanted the plan's nodes that fit an ask and Needed
// those counted for one (plan: the pool's nodes the plan sees, by name;
// nodes: the pool's nodes). Each ask, in turn, counts the nodes its jobs
// need as nodesNeeded does, in nodes of its fitting nodes' size, less the
// free GPUs of the fitting nodes already busy (of the type asked for,
// adapter.Node.FreeGPUTypes; where its one-node jobs can start without
// another node), and no more than the fitting nodes that are
// neither busy, bound for a job, nor counted for an ask before it: a job
// only busy nodes could run waits for one of them and holds no other node
// up (before 2026-11-24 an A100 job kept an idle V100 node of its
// partition powered). The nodes counted are taken powered first, then off,
// off longest first; an off node the plan may not power (Fixed) is never
// counted. Needed, they are woken or kept whatever the plan's count target.
func restrictedDemand(asks []restrictedAsk, nodes []adapter.Node, plan map[string]*ces.Node) (need int) {
	type typed struct{ node, typ string }
	var (
		free      []*ces.Node // an ask's countable nodes, reused
		taken     map[string]int
		takenType map[typed]int // GPUs of busy nodes counted for asks before, in all and by type
	)
	for _, a := range asks {
		free = free[:0]
		gpus, whole := 0, 0
		gpn := max(a.gpn, 1)
		for _, j := range a.jobs {
			tasks := j.PendingTasks()
			if j.NodeCount > 1 {
				whole += tasks * max(j.NodeCount, ceilDiv(j.GPUs, gpn))
				continue
			}
			gpus += tasks * max(j.GPUs, 1)
		}
		for _, k := range a.fit {
			n := plan[nodes[k].Name]
			if n == nil {
				continue // between power states: left alone
			}
			n.Wanted = true
			if n.Busy && n.Powered && gpus > 0 {
				if taken == nil {
					taken, takenType = map[string]int{}, map[typed]int{}
				}
				left := nodes[k].FreeGPUs - taken[n.Name]
				if a.typ != "" {
					// Of the type asked for: as the scheduler says, else
					// at most the node's GPUs of that type.
					of := nodes[k].GPUTypes[a.typ]
					if ft := nodes[k].FreeGPUTypes; ft != nil {
						of = ft[a.typ]
					}
					left = min(left, of-takenType[typed{n.Name, a.typ}])
				}
				took := min(max(left, 0), gpus)
				gpus -= took
				taken[n.Name] += took
				takenType[typed{n.Name, a.typ}] += took
			}
			if n.Busy || n.Incoming || n.Needed || n.Fixed && !n.Powered {
				continue
			}
			free = append(free, n)
		}
		slices.SortFunc(free, func(x, y *ces.Node) int {
			if x.Powered != y.Powered {
				if x.Powered {
					return -1
				}
				return 1
			}
			return ces.CompareAge(*x, *y)
		})
		c := min(ceilDiv(gpus, gpn)+whole, len(free))
		for _, n := range free[:c] {
			n.Needed = true
		}
		need += c
	}
	return need
}

// excludedByPool counts the pending jobs pendingByPool leaves out of demand
// (held, ineligible or unreadable) by reason (excludedReason): in each
// partition they were submitted to, and in all (a job once).
func excludedByPool(jobs []adapter.Job) (byPool map[string]map[string]int, total map[string]int) {
	byPool, total = map[string]map[string]int{}, map[string]int{}
	for _, j := range jobs {
		if !j.Held && !j.Ineligible && j.Unreadable == "" {
			continue
		}
		r := excludedReason(&j)
		total[r]++
		for p := range j.PartitionSeq() {
			if byPool[p] == nil {
				byPool[p] = map[string]int{}
			}
			byPool[p][r]++
		}
	}
	return byPool, total
}

// excludedReason returns the label a job left out of demand is counted
// under: "unreadable" for a job the adapter could not read in full; else the
// scheduler's reason when it is a word of at most 64 letters, digits and
// underscores (as Slurm's are) other than "None"; else "held" or
// "ineligible".
func excludedReason(j *adapter.Job) string {
	if j.Unreadable != "" {
		return "unreadable"
	}
	r := j.Reason
	ok := r != "" && r != "None" && len(r) <= 64
	for i := 0; ok && i < len(r); i++ {
		c := r[i]
		ok = c == '_' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
	}
	switch {
	case ok:
		return r
	case j.Held:
		return "held"
	}
	return "ineligible"
}

// nodesNeeded returns the nodes of gpn GPUs each (below 1 counts as 1) that
// jobs need: the jobs that ask for one node or do not say share nodes,
// ⌈Σ GPUs ÷ gpn⌉, a job without GPUs counting one; a job that asks for
// several nodes gets whole nodes of its own, as many as it asks for and at
// least ⌈GPUs ÷ gpn⌉, as the simulator places them. A pending array counts
// each task it stands for (PendingTasks) as such a job.
func nodesNeeded(jobs []*adapter.Job, gpn int) int {
	gpn = max(gpn, 1)
	shared, whole := 0, 0
	for _, j := range jobs {
		tasks := j.PendingTasks()
		if j.NodeCount > 1 {
			whole += tasks * max(j.NodeCount, ceilDiv(j.GPUs, gpn))
			continue
		}
		shared += tasks * max(j.GPUs, 1)
	}
	return ceilDiv(shared, gpn) + whole
}

// ceilDiv returns ⌈a ÷ b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

// dedupe drops actions the loop recorded as skipped less than RepeatAfter ago
// with the same value (held back by a rate limit: until its window has
// room), and forgets skipped actions the plan no longer asks for.
func (l *Loop) dedupe(now time.Time, todo []planned) []planned {
	keep := todo[:0]
	asked := map[string]bool{}
	for _, p := range todo {
		k := string(p.a.Kind) + "|" + p.a.Target
		asked[k] = true
		if r, ok := l.seen[k]; ok && r.value == p.a.Priority && r.holds(now, l.cfg.RepeatAfter) {
			continue
		}
		keep = append(keep, p)
	}
	for k := range l.seen {
		if !asked[k] {
			delete(l.seen, k)
		}
	}
	return keep
}

// apply records todo as planned, sends each through the guard, and records
// the outcomes. Nothing is sent unless the plan was recorded. Once it is,
// the actions and the outcomes run on a context detached from ctx's
// cancellation, bounded by ActTimeout; when ctx ends (or the time is up),
// no further action is started: those left are recorded as skipped and not
// deduped, so that the next pass sends them.
func (l *Loop) apply(ctx context.Context, now time.Time, todo []planned) ([]audit.Record, error) {
	dry := !l.g.Config().Apply
	recs := make([]audit.Record, len(todo))
	for i := range todo {
		r := &todo[i].rec
		r.Cluster, r.Adapter, r.DryRun, r.DecidedAt = l.cfg.Cluster, l.g.Scheduler().Name(), dry, now
		r.ID = l.audit.NewID(now)
		recs[i] = *r
	}
	if err := l.audit.Plan(ctx, recs); err != nil {
		for _, p := range todo {
			l.m.actions.WithLabelValues(string(p.a.Kind), outcomeNotRecorded).Inc()
		}
		return nil, fmt.Errorf("loop: record %d planned actions (none sent): %w", len(recs), err)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ActTimeout)
	defer cancel()
	for i, p := range todo {
		p.a.At = now // the guard's rate limits count on the scheduler's clock, as the plans do
		var res adapter.Result
		stopped := ctx.Err() != nil || actx.Err() != nil
		switch {
		case stopped:
			res = adapter.Result{Outcome: adapter.Skipped, Err: fmt.Errorf("%w: %w", errPassCancelled, cmp.Or(context.Cause(ctx), context.Cause(actx)))}
		case p.a.Kind == adapter.PowerDown && l.caps.unread != nil:
			res = adapter.Result{Outcome: adapter.Skipped, Err: l.caps.unread}
		default:
			res = l.g.Do(actx, p.a)
		}
		recs[i].Outcome = string(res.Outcome)
		if res.Err != nil {
			recs[i].Error = res.Err.Error()
		}
		l.m.actions.WithLabelValues(string(p.a.Kind), string(res.Outcome)).Inc()
		k := string(p.a.Kind) + "|" + p.a.Target
		var limited *adapter.RateLimitError
		switch {
		case res.Outcome == adapter.Skipped && !stopped && errors.Is(res.Err, errCapsUnread):
			// Set aside until the caps' history is read.
			l.seen[k] = recent{value: p.a.Priority, at: now, unread: true}
		case res.Outcome == adapter.Skipped && errors.Is(res.Err, adapter.ErrAlreadyPowered):
			// The node woke by itself: not set aside, so that a plan
			// that needs it woken again (it went down since) asks at
			// once.
			delete(l.seen, k)
		case res.Outcome == adapter.Skipped && !stopped && errors.As(res.Err, &limited):
			// Set aside only until the cap has room: the next pass
			// from then sends it, rather than one RepeatAfter later.
			l.seen[k] = recent{value: p.a.Priority, at: now, until: limited.RoomAt}
		case res.Outcome == adapter.Skipped && !stopped:
			l.seen[k] = recent{value: p.a.Priority, at: now}
		default:
			delete(l.seen, k) // not set aside: sent, or left for the next pass
		}
		if ps := l.pool[p.rec.Partition]; ps != nil && p.a.Kind != adapter.SetPriority {
			if res.Outcome == adapter.Applied {
				ps.changed[p.a.Target] = now
			}
			// Sent, whatever came of it: a failed action waits out the
			// plan's hysteresis as an applied one does, instead of being
			// sent again every pass.
			if res.Outcome != adapter.Skipped && ps.carried != nil {
				ps.carried[p.a.Target] = true
			}
		}
		lv := slog.LevelInfo
		if res.Outcome == adapter.Failed {
			lv = slog.LevelWarn
		}
		attrs := []any{"kind", p.a.Kind, "target", p.a.Target, "outcome", res.Outcome, "dry_run", dry, "reason", recs[i].Reason}
		if recs[i].Error != "" {
			attrs = append(attrs, "err", recs[i].Error)
		}
		l.logger.Log(actx, lv, "action", attrs...)
	}
	l.actions.Report(failedActions(recs))
	// The outcomes get a time of their own: the actions may have spent
	// all of ActTimeout.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), ActTimeout)
	defer scancel()
	if err := l.audit.Settle(sctx, recs); err != nil {
		l.owed = append(l.owed, recs...)
		return recs, fmt.Errorf("%w (%d actions; retried next pass): %w", ErrOutcomesNotRecorded, len(recs), err)
	}
	return recs, nil
}

// failedActions returns nil when no action of recs failed, and otherwise
// an error counting them and quoting the first.
func failedActions(recs []audit.Record) error {
	n, first := 0, -1
	for i, r := range recs {
		if r.Outcome == string(adapter.Failed) {
			if n++; first < 0 {
				first = i
			}
		}
	}
	if n == 0 {
		return nil
	}
	r := recs[first]
	return fmt.Errorf("%d of %d actions failed in the last pass; first: %s %s: %s", n, len(recs), r.Kind, r.Target, r.Error)
}

// settleOwed writes outcomes an earlier pass could not.
func (l *Loop) settleOwed(ctx context.Context) error {
	if len(l.owed) == 0 {
		return nil
	}
	if err := l.audit.Settle(ctx, l.owed); err != nil {
		return fmt.Errorf("loop: record %d owed outcomes: %w", len(l.owed), err)
	}
	l.owed = nil
	return nil
}

// settleOwedAtStop tries once, on a context detached from ctx and bounded
// by StopSettleTimeout, to record the outcomes passes could not, so that
// their rows do not stay planned after Run stops.
func (l *Loop) settleOwedAtStop(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.owed) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StopSettleTimeout)
	defer cancel()
	n := len(l.owed)
	if err := l.settleOwed(sctx); err != nil {
		l.logger.Warn("outcomes not recorded at stop; their audit rows stay planned", "rows", n, "err", err)
	}
}

// View returns the latest pass's ranked queue and power plans; nil before
// the first pass.
func (l *Loop) View() *View { return l.view.load() }

func fmtDur(d time.Duration) string { return d.Round(time.Second).String() }
