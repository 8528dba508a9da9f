// Package slurm follows a Slurm cluster's jobs and publishes each change once
// as a job event, with the GPUs each job holds as allocation intervals.
//
// It polls `squeue --json` (all states; Slurm 22.05's OpenAPI v0.0.38) and
// reads the job-completion log of jobcomp/filetxt from a remembered offset, for
// jobs that start and end between two polls or end while the source is down.
// Event times are Slurm's own submit, start and end times, so an event sent
// again after a crash is the same message and collapses downstream. What was
// emitted is kept in a small state file, written after the publishes succeed.
//
// A job that leaves squeue without an end that squeue or the log shows (it
// ended while the source was down for longer than slurmctld's MinJobAge, or
// slurmctld lost it) is lost: the source ends it as UNKNOWN at the last
// listing that showed it, so that the record does not hold its GPUs for
// ever. Should Slurm list it again, its events resume and a later end
// supersedes the lost one.
//
// A job that Slurm requeues (preemption, a node failure, scontrol requeue)
// keeps its id and gets a new submit time and a higher restart count. Each
// of its runs is published under the job's id as SUBMIT … END: the requeued
// run ends at the requeue (the new submit time), with its GPUs' intervals,
// and the next run starts with a SUBMIT of its own.
package slurm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heliostat-dev/heliostat/collector"
	"github.com/heliostat-dev/heliostat/internal/health"
	"github.com/heliostat-dev/heliostat/internal/logthrottle"
	"github.com/heliostat-dev/heliostat/schemas"
)

// maxJobCompRead bounds how much of the job-completion log one poll reads; the
// rest waits for the next poll.
const maxJobCompRead = 16 << 20

// fullBitstrings makes squeue and sacct print an array's task list in full:
// by default Slurm cuts it to 64 bytes ending in "...".
const fullBitstrings = "SLURM_BITSTR_LEN=0"

// Source follows one Slurm cluster. It is not safe for concurrent use: Run
// (or Poll) from one goroutine.
type Source struct {
	cfg    Config
	pub    collector.JobPublisher
	logger *slog.Logger
	m      *metrics
	now    func() time.Time
	st     *state
	dirty  bool
	// savedPolled is st.Polled as last saved; the state is saved at least
	// once a minute while polls succeed, so that a restart knows when
	// squeue last listed the jobs it tracks.
	savedPolled int64
	logs        logthrottle.Throttle // per-record warnings, keyed by input
	// scripts caches script hashes within one poll, by Slurm job id.
	scripts map[string]string
	// refusals counts the scripts slurmctld refused in a row since one
	// was printed, and scriptsPaused is when the source may ask again
	// after scriptRefusals of them (see scriptHash).
	refusals      int
	scriptsPaused time.Time
	// health holds the outcome of the last poll, for Ready, and of the
	// last read of the accounting.
	health *health.Status
	polls  *health.Cond
	acct   *health.Cond
	// private fails while slurmctld (squeue), or with Accounting slurmdbd
	// (sacct), hides other users' jobs from the source's user (see
	// checkPrivateData), which hidden remembers.
	private *health.Cond
	hidden  bool
	// currentUser is the user the source's commands run as: user.Current,
	// unless a test runs them as another.
	currentUser func() (*user.User, error)
	// acctRun is when the accounting was last read (this process), and
	// acctFailed whether that read failed.
	acctRun    time.Time
	acctFailed bool
	// published counts emits, so that a caller of handle can tell whether
	// it published anything.
	published int
}

// New returns a Source that publishes through pub, with the state loaded from
// cfg.StateFile. Its metrics are registered on reg.
func New(cfg Config, pub collector.Publisher, logger *slog.Logger, reg prometheus.Registerer, now func() time.Time) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	st, err := loadState(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("slurm: register metrics: %w", err)
	}
	m.tracked.Set(float64(len(st.Jobs)))
	s := &Source{
		cfg:         cfg,
		pub:         collector.JobPublisher{Pub: pub, Cluster: cfg.Cluster, Source: schemas.SourceSlurm, Retries: true},
		logger:      logger,
		m:           m,
		now:         now,
		st:          st,
		savedPolled: st.Polled,
		logs:        logthrottle.Throttle{Every: 10 * time.Second},
		health:      health.New(time.Now),
		currentUser: user.Current,
	}
	s.polls = s.health.Add("slurm", "waiting for the first poll")
	s.private = s.health.Add("slurm private data", "")
	if cfg.Accounting {
		s.acct = s.health.Add("slurm accounting", "waiting for the first read of sacct")
		m.acctTo.Set(float64(st.Accounted) / 1000)
	}
	return s, nil
}

// Ready returns nil once the last poll succeeded, and otherwise
// why it failed and since when: what the collector's /-/ready reports.
func (s *Source) Ready() error { return s.health.Err() }

// Run polls at the configured interval until ctx ends, starting at once. A
// failed poll is logged and counted, and the next poll tries again. Before
// the first poll it checks whether Slurm hides other users' jobs from it
// (checkPrivateData), and again every privateDataRecheck while it does or
// the check could not tell. It returns nil when ctx ends.
func (s *Source) Run(ctx context.Context) error {
	s.logger.Info("slurm source started", "cluster", s.cfg.Cluster, "interval", s.cfg.PollInterval,
		"squeue", s.cfg.Squeue, "jobcomp_log", s.cfg.JobCompLog, "accounting", s.cfg.Accounting, "state_file", s.cfg.StateFile, "jobs", len(s.st.Jobs))
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	var checkAt time.Time // zero: check now; never again once settled
	settled := false
	for {
		if now := s.now(); !settled && !now.Before(checkAt) {
			settled = s.checkPrivateData(ctx) && !s.hidden
			checkAt = now.Add(privateDataRecheck)
		}
		if err := s.Poll(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("slurm poll failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Poll reads squeue and the new part of the job-completion log once,
// publishes the events and allocation changes they show, and saves the state.
func (s *Source) Poll(ctx context.Context) (err error) {
	start := time.Now()
	defer func() {
		s.m.pollDuration.Observe(time.Since(start).Seconds())
		// Counted when the poll ends, with its outcome: a poll that
		// hangs in squeue (a controller that does not answer) is not
		// counted while it runs, so that polls and errors go up
		// together while every poll fails (HeliostatSlurmSourceFailing).
		s.m.polls.Inc()
		if err != nil {
			s.m.pollErrors.Inc()
		}
		// What was published is in the state even when the poll failed
		// later: save it so that it is not published again.
		if s.dirty || s.st.Polled-s.savedPolled >= time.Minute.Milliseconds() {
			if serr := s.st.save(s.cfg.StateFile); serr != nil {
				err = errors.Join(err, serr)
			} else {
				s.dirty, s.savedPolled = false, s.st.Polled
			}
		}
		s.m.tracked.Set(float64(len(s.st.Jobs)))
		if ctx.Err() == nil {
			s.polls.Report(err)
		}
	}()
	s.scripts = map[string]string{}

	listed := s.now()
	out, err := s.command(ctx, "squeue", []string{fullBitstrings}, s.cfg.Squeue, "--json", "--all", "--states=all")
	if err != nil {
		return err
	}
	return s.apply(ctx, out, listed)
}

// apply handles one squeue --json listing, taken at listed, the new part of
// the job-completion log, and the accounting when a read is due.
func (s *Source) apply(ctx context.Context, out []byte, listed time.Time) error {
	resp, err := decodeSqueue(out)
	if err != nil {
		s.m.parseErrors.WithLabelValues(inputSqueue).Inc()
		return fmt.Errorf("slurm: %w", err)
	}
	// A publish cut short by shutdown would be spooled and sent again; let
	// the publisher's own timeout bound it instead.
	pctx := context.WithoutCancel(ctx)
	seen := make(map[string]bool, len(resp.Jobs))
	// unknown holds, by array job id, the tasks that a record of a pending
	// array did not list (taskGap.above): they are neither seen nor missing.
	unknown := map[string]int64{}
	complete := true // every record understood: absent jobs really are absent
	// requeues are listings of a job's next run whose requeued run has not
	// ended yet: they are handled once the log and the accounting were
	// read, which may hold that run's end with its state.
	var requeues []*observation
	for i := range resp.Jobs {
		obs, gap, err := observeSqueue(&resp.Jobs[i])
		if err != nil {
			s.parseError(inputSqueue, err, "index", i)
			// The record's own job is not missing, whatever it holds;
			// other jobs' absence still counts.
			switch id, arr := squeueRecordIDs(&resp.Jobs[i]); {
			case id != "":
				seen[id] = true
			case arr != "":
				unknown[arr] = -1
			default:
				complete = false
			}
			continue
		}
		if gap != nil {
			s.truncatedTasks(inputSqueue, gap)
			if a, ok := unknown[gap.arrayJobID]; !ok || gap.above < a {
				unknown[gap.arrayJobID] = gap.above
			}
		}
		for _, o := range obs {
			seen[o.ev.JobID] = true
			if len(o.unreadable) > 0 {
				s.fieldsUnreadable(inputSqueue, o)
			}
			if s.awaitsRequeue(o) {
				requeues = append(requeues, o)
				continue
			}
			if err := s.handle(ctx, pctx, o); err != nil {
				return err
			}
			s.noteListed(o, listed)
		}
	}
	if s.cfg.JobCompLog != "" {
		atEnd, err := s.readJobComp(ctx, pctx)
		if err != nil {
			return err
		}
		// A job absent from squeue may be in the part of the log not read yet.
		complete = complete && atEnd
	}
	if err := s.readAccounting(ctx, pctx, listed, len(requeues) > 0); err != nil {
		return err
	}
	for _, o := range requeues {
		if err := s.handle(ctx, pctx, o); err != nil {
			return err
		}
		s.noteListed(o, listed)
	}
	if err := s.forget(pctx, seen, unknown, complete, listed); err != nil {
		return err
	}
	if complete {
		s.st.Polled = listed.UnixMilli()
	}
	return nil
}

// noteListed notes that the listing taken at listed showed the run of o, if
// that is the run the state tracks and it has not ended. The state is not
// made dirty for it (see jobRecord.Listed).
func (s *Source) noteListed(o *observation, listed time.Time) {
	if r := s.st.Jobs[o.ev.JobID]; r != nil && !r.Ended && r.Last.SubmitMillis == o.ev.SubmitMillis {
		r.Listed = listed.UnixMilli()
	}
}

// awaitsRequeue reports whether o, from squeue, shows the next run of a
// tracked job whose current run has not ended: Slurm requeued the job (a
// later submit time and a higher restart count).
func (s *Source) awaitsRequeue(o *observation) bool {
	r := s.st.Jobs[o.ev.JobID]
	return r != nil && !r.Ended && o.exactSubmit && o.ev.SubmitMillis > r.Last.SubmitMillis && o.restarts > r.Restarts
}

// fieldsUnreadable counts and logs (throttled) a record published with
// fields it could not read (observation.unreadable).
func (s *Source) fieldsUnreadable(input string, o *observation) {
	problems := make([]string, 0, len(o.unreadable))
	for _, f := range o.unreadable {
		s.m.unreadable.WithLabelValues(input, f.field).Inc()
		problems = append(problems, f.field+": "+f.problem)
	}
	if n, ok := s.logs.Note("unreadable "+input, s.now(), 1); ok {
		gpus := "unknown"
		if o.ev.GPUs != schemas.Unknown {
			gpus = strconv.FormatInt(o.ev.GPUs, 10)
		}
		s.logger.Warn("a job record has fields in a form not known; the job is published with them unknown (the GPUs as Slurm allocated them where it says; all are counted in heliostat_slurm_fields_unreadable_total)",
			"input", input, "job", o.ev.JobID, "gpus", gpus, "problems", strings.Join(problems, "; "), "records", n)
	}
}

// truncatedTasks counts and logs (throttled) a record of a pending array
// whose task list Slurm cut short.
func (s *Source) truncatedTasks(input string, gap *taskGap) {
	s.m.truncated.WithLabelValues(input).Inc()
	if n, ok := s.logs.Note("truncated "+input, s.now(), 1); ok {
		s.logger.Warn("slurm cut an array's task list short (SLURM_BITSTR_LEN not honoured); its tasks not listed in full wait for a full list (all are counted in heliostat_slurm_array_task_lists_truncated_total)",
			"input", input, "array_job_id", gap.arrayJobID, "listed_up_to_task", gap.above, "records", n)
	}
}

// forget drops ended jobs that squeue no longer lists from the state after
// the retention, and ends the unended ones that two complete listings in a
// row did not show (and the job-completion log, read to its end, and the
// accounting, read since, did not have either): they are lost. Tasks a
// listing left unknown (see apply) are not counted either way.
func (s *Source) forget(pctx context.Context, seen map[string]bool, unknown map[string]int64, complete bool, listed time.Time) error {
	cutoff := s.now().Add(-s.cfg.Retention).UnixMilli()
	for id, r := range s.st.Jobs {
		switch {
		case seen[id]:
			if r.Missing != 0 {
				r.Missing, r.GoneMillis, s.dirty = 0, 0, true
			}
		case r.Ended:
			if r.Last.EndMillis < cutoff {
				delete(s.st.Jobs, id)
				s.dirty = true
			}
		case !complete:
		case unlisted(r, unknown):
		default:
			if r.Missing == 0 {
				r.GoneMillis = listed.UnixMilli()
				if r.Listed == 0 {
					// A record from an older state file: the last
					// complete listing showed it (or it is newer).
					r.SeenMillis = s.st.Polled
				}
			}
			r.Missing++
			s.dirty = true
			if r.Missing >= 2 && (!s.cfg.Accounting || s.st.Accounted >= r.GoneMillis/1000*1000) {
				if err := s.endLost(pctx, id, r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// unlisted reports whether r is a task of a pending array whose record did
// not list it, nor say that it is not pending any more.
func unlisted(r *jobRecord, unknown map[string]int64) bool {
	above, ok := unknown[r.Last.ArrayJobID]
	return ok && r.Last.ArrayJobID != "" && !r.Started && r.Last.ArrayTaskID > above
}

// endLost ends a lost job as UNKNOWN, with no exit code, at the last listing
// that showed it (or its last event, when later): what is known to have
// happened, so that its run time is a lower bound. Its open allocation
// intervals close then too.
func (s *Source) endLost(pctx context.Context, id string, r *jobRecord) error {
	seenAt := r.Listed
	if seenAt == 0 {
		seenAt = r.SeenMillis
	}
	e := r.Last
	end := max(seenAt, e.EventMillis, e.SubmitMillis, e.StartMillis)
	if err := s.endRun(pctx, id, r, end, end, schemas.StateUnknown); err != nil {
		return err
	}
	s.m.lost.Inc()
	s.logger.Warn("slurm job vanished without an end; ended as UNKNOWN at the last listing that showed it", "job_id", id,
		"state", e.State.String(), "end", time.UnixMilli(end).UTC(), "jobcomp_log", s.cfg.JobCompLog, "accounting", s.cfg.Accounting)
	r.Lost = true
	return nil
}

// endRun publishes the END of r's run in state, with no exit code, ending at
// end and stamped at at, and closes its open allocation intervals at end.
func (s *Source) endRun(pctx context.Context, id string, r *jobRecord, end, at int64, state schemas.JobState) error {
	e := r.Last
	e.Type, e.EventMillis, e.EndMillis = schemas.JobEnd, at, end
	e.State, e.ExitCode = state, schemas.Unknown
	allocs := make([]schemas.Alloc, len(r.Allocs))
	for i, a := range r.Allocs {
		a.EndMillis = end
		allocs[i] = a
	}
	if err := s.emit(pctx, id, []schemas.JobEvent{e}, allocs); err != nil {
		return err
	}
	r.Ended, r.Last, r.Allocs, r.Missing, r.GoneMillis = true, e, nil, 0, 0
	s.dirty = true
	return nil
}

// requeued handles the listing o of the next run of r's job, which Slurm
// requeued: unless a record of Slurm's (the completion log, the accounting)
// ended r's run already, with its state, the run ends now as requeuedState at
// the requeue, which is the next run's submit time, and its GPUs' intervals
// close then. It returns the record of the next run, which keeps what is
// known of the job and follows the run's END.
func (s *Source) requeued(pctx context.Context, r *jobRecord, o *observation) (*jobRecord, error) {
	id, at := o.ev.JobID, o.ev.SubmitMillis
	if !r.Ended {
		// The END follows the run's last event, even one stamped by the
		// collector's clock after slurmctld's requeue time.
		if err := s.endRun(pctx, id, r, at, max(at, r.Last.EventMillis), requeuedState); err != nil {
			return nil, err
		}
	}
	s.m.requeued.Inc()
	s.logger.Info("slurm job requeued; its run ended and the job goes on as a new run", "job_id", id,
		"run_submit", time.UnixMilli(r.Last.SubmitMillis).UTC(), "run_state", r.Last.State.String(), "run_end", time.UnixMilli(r.Last.EndMillis).UTC(),
		"requeued_at", time.UnixMilli(at).UTC(), "restarts", o.restarts)
	return &jobRecord{Last: r.Last, Restarts: o.restarts, FirstSubmit: r.firstSubmit(), After: r.Last.EventMillis}, nil
}

// emit publishes a job's events, then its allocation changes, and counts the
// events.
func (s *Source) emit(pctx context.Context, id string, evs []schemas.JobEvent, allocs []schemas.Alloc) error {
	if err := s.pub.PublishJob(pctx, evs); err != nil {
		return fmt.Errorf("slurm: %w", err)
	}
	key := string(schemas.JobKey(s.cfg.Cluster, id))
	for len(allocs) > 0 {
		n := min(len(allocs), schemas.MaxEventsPerMessage)
		if err := s.pub.PublishAllocs(pctx, key, allocs[:n]); err != nil {
			return fmt.Errorf("slurm: %w", err)
		}
		allocs = allocs[n:]
	}
	for _, e := range evs {
		s.m.events.WithLabelValues(e.Type.String()).Inc()
	}
	s.published++
	return nil
}

// handle publishes what o shows that was not published yet: SUBMIT, START,
// END, or an UPDATE of priority, time limit or a pending job's request, and
// the allocation intervals that open at START and close at END.
func (s *Source) handle(ctx, pctx context.Context, o *observation) error {
	r := s.st.Jobs[o.ev.JobID]
	if r != nil && r.earlierRun(&o.ev) {
		// A record (the log's, the accounting's) of a run of the job that
		// Slurm requeued: its END was published when the next run was
		// listed.
		return nil
	}
	after := int64(0) // the last event of what had the id before o's run
	if r != nil && o.exactSubmit && r.Last.SubmitMillis != 0 && o.ev.SubmitMillis != r.Last.SubmitMillis {
		if o.ev.SubmitMillis < r.Last.SubmitMillis {
			// Two jobs under one id: slurmctld started with an empty
			// state (ids start again at FirstJobId) or ids wrapped. The
			// accounting still holds the older one. Its events would be
			// filed under the newer job's key and overwrite it.
			if r.OlderSkipped == o.ev.SubmitMillis {
				return nil
			}
			r.OlderSkipped, s.dirty = o.ev.SubmitMillis, true
			s.m.idReused.WithLabelValues(reuseOlderSkipped).Inc()
			s.logger.Info("slurm job id reused: an older job under the id of a tracked one is not published", "job_id", o.ev.JobID,
				"older_submit", time.UnixMilli(o.ev.SubmitMillis).UTC(), "tracked_submit", time.UnixMilli(r.Last.SubmitMillis).UTC())
			return nil
		}
		if o.restarts > r.Restarts {
			// The same job, requeued: Slurm resets the submit time.
			next, err := s.requeued(pctx, r, o)
			if err != nil {
				return err
			}
			r = next
		} else {
			s.m.idReused.WithLabelValues(reuseSuperseded).Inc()
			s.logger.Warn("slurm job id reused: a newer job took the id of a tracked one", "job_id", o.ev.JobID,
				"tracked_submit", time.UnixMilli(r.Last.SubmitMillis).UTC(), "newer_submit", time.UnixMilli(o.ev.SubmitMillis).UTC(), "tracked_ended", r.Ended)
			if !r.Ended {
				// Slurm gives an id again only once the job holding it is
				// gone, and the record is needed for the newer one.
				if err := s.endLost(pctx, o.ev.JobID, r); err != nil {
					return err
				}
			}
			after, r = r.Last.EventMillis, nil
		}
	}
	resumed := false
	if r != nil && r.Ended {
		switch {
		case r.Lost && r.Last.SubmitMillis == o.ev.SubmitMillis:
			// Ended as lost, and Slurm shows it again: its events resume,
			// and the end Slurm gives it later supersedes the lost one.
			// Its GPUs' allocation intervals stay closed.
			s.logger.Info("slurm job ended as lost is listed again; its events resume", "job_id", o.ev.JobID, "state", o.ev.State.String())
			r.Ended, r.Lost, resumed = false, false, true
		case r.Last.SubmitMillis == o.ev.SubmitMillis || o.slurmID == "":
			return nil
		default:
			after, r = r.Last.EventMillis, nil // Slurm reused the id (job ids wrap, or the cluster was rebuilt)
		}
	}
	if r == nil {
		r = &jobRecord{Restarts: max(o.restarts, 0), After: after}
		if o.batch && s.cfg.HashScripts {
			o.ev.CommandHash = s.scriptHash(ctx, o.slurmID)
		}
	} else {
		if !o.exactSubmit {
			// The log's submit time is text in a time zone: the run's
			// is the one squeue or the accounting gave.
			o.ev.SubmitMillis = r.Last.SubmitMillis
		}
		mergeKnown(&o.ev, &r.Last)
		if r.Started && o.ev.GPUType == "" && o.ev.GPUs == r.Last.GPUs {
			// An untyped request's GPU type is that of the GPUs it was
			// given, which squeue shows (gres_detail) only while the job
			// runs: its END keeps the type its START had.
			o.ev.GPUType = r.Last.GPUType
		}
	}

	changes := sanitize(&o.ev)
	var evs []schemas.JobEvent
	var allocs []schemas.Alloc
	if !r.Submitted {
		e := o.ev
		e.Type, e.EventMillis = schemas.JobSubmit, e.SubmitMillis
		e.State, e.StartMillis, e.EndMillis, e.Nodes, e.ExitCode = schemas.StatePending, 0, 0, nil, schemas.Unknown
		evs = append(evs, e)
	}
	opened := r.Allocs
	if o.started && !r.Started {
		e := o.ev
		e.Type, e.EventMillis = schemas.JobStart, e.StartMillis
		e.State, e.EndMillis, e.ExitCode = schemas.StateRunning, 0, schemas.Unknown
		evs = append(evs, e)
		opened = openAllocs(o)
		allocs = append(allocs, opened...)
		if opened == nil && o.ev.GPUs > 0 {
			s.m.noGPUIndex.Inc()
		}
	}
	if o.kind == kindFinal {
		e := o.ev
		e.Type, e.EventMillis = schemas.JobEnd, e.EndMillis
		evs = append(evs, e)
		for _, a := range opened {
			a.EndMillis = e.EndMillis
			allocs = append(allocs, a)
		}
		opened = nil
	}
	if len(evs) == 0 && (resumed || o.ev.Priority != r.Last.Priority || o.ev.TimeLimitS != r.Last.TimeLimitS ||
		o.kind == kindPending && !r.Started && requestChanged(&o.ev, &r.Last)) {
		// Slurm does not say when a priority, limit or request changed:
		// the event time is when it was seen. A resumed job's event puts
		// its state back after the lost end.
		e := o.ev
		e.Type, e.EventMillis = schemas.JobUpdate, s.now().UnixMilli()
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		return nil
	}
	// Each event must sort after the record's previous one in the jobs
	// table, whose latest event wins by (event time, type: SUBMIT < UPDATE
	// < START < END). A requeued job's next run is submitted in the second
	// its previous run ended (r.After: strictly after). An UPDATE is
	// stamped with this host's clock while START and END carry slurmctld's
	// times, so with this clock ahead an END could sort before the UPDATE
	// seen just before it and the job stay RUNNING in jobs for good. Only
	// the events' times move, not the job's start_time or end_time.
	prev, prevType := r.After, schemas.JobEnd
	if r.Submitted && r.Last.EventMillis >= prev {
		prev, prevType = r.Last.EventMillis, r.Last.Type
	}
	for i := range evs {
		if evs[i].EventMillis < prev || evs[i].EventMillis == prev && evs[i].Type <= prevType {
			evs[i].EventMillis = prev + 1
		}
		prev, prevType = evs[i].EventMillis, evs[i].Type
	}
	if err := s.emit(pctx, o.ev.JobID, evs, allocs); err != nil {
		return err
	}
	for _, c := range changes {
		s.m.altered.WithLabelValues(c.field, c.change).Inc()
		if n, ok := s.logs.Note("strings", s.now(), 1); ok {
			s.logger.Warn("a string Slurm gave was changed to fit the wire format (all are counted in heliostat_slurm_strings_altered_total)",
				"job_id", o.ev.JobID, "field", c.field, "change", c.change, "strings", n)
		}
	}
	r.Submitted, r.Started, r.Ended = true, r.Started || o.started, o.kind == kindFinal
	r.Last, r.Allocs, r.Missing = evs[len(evs)-1], opened, 0
	s.st.Jobs[o.ev.JobID] = r
	s.dirty = true
	return nil
}

// requestChanged reports whether a pending job's request, as ev shows it,
// differs from what last, its last event, carried: someone changed it with
// scontrol update (GPUs, nodes, CPUs, memory, partition, QOS, account, name,
// working directory). handle asks only while the job waits: its START
// carries what it was given, and a running job's figures (its CPUs, the GPU
// type of its allocation) may differ from its request without anyone
// changing it. Priority and time limit handle compares in any state.
func requestChanged(ev, last *schemas.JobEvent) bool {
	return ev.GPUs != last.GPUs || ev.GPUType != last.GPUType || ev.NodeCount != last.NodeCount || ev.CPUs != last.CPUs ||
		ev.MemReqBytes != last.MemReqBytes || ev.Partition != last.Partition || ev.QOS != last.QOS || ev.Account != last.Account ||
		ev.Name != last.Name || ev.WorkDir != last.WorkDir
}

// stringChange is one string sanitize changed: the field (as the wire
// names it) and the change (alteredTruncated or alteredInvalidUTF8).
type stringChange struct{ field, change string }

// sanitize makes the strings Slurm gave encodable: valid UTF-8, at most
// schemas.MaxStringLen bytes (longer names and paths are cut). It returns
// what it changed, so that the caller can count it.
func sanitize(ev *schemas.JobEvent) []stringChange {
	var changes []stringChange
	for _, f := range [...]struct {
		field string
		p     *string
	}{
		{"job_id", &ev.JobID}, {"array_job_id", &ev.ArrayJobID}, {"job_name", &ev.Name}, {"user", &ev.User},
		{"group", &ev.Group}, {"account", &ev.Account}, {"partition", &ev.Partition}, {"qos", &ev.QOS},
		{"gpu_type", &ev.GPUType}, {"command_hash", &ev.CommandHash}, {"work_dir", &ev.WorkDir},
	} {
		changes = cleanString(f.p, f.field, changes)
	}
	for i := range ev.Nodes {
		changes = cleanString(&ev.Nodes[i], "nodes", changes)
	}
	return changes
}

// cleanString makes *s encodable and appends what it changed to changes.
func cleanString(s *string, field string, changes []stringChange) []stringChange {
	if len(*s) <= schemas.MaxStringLen && utf8.ValidString(*s) {
		return changes
	}
	if !utf8.ValidString(*s) {
		*s = strings.ToValidUTF8(*s, "\uFFFD")
		changes = append(changes, stringChange{field, alteredInvalidUTF8})
	}
	if len(*s) > schemas.MaxStringLen {
		v := (*s)[:schemas.MaxStringLen]
		for !utf8.ValidString(v) { // a rune cut in two at the end
			v = v[:len(v)-1]
		}
		*s = v
		changes = append(changes, stringChange{field, alteredTruncated})
	}
	return changes
}

// mergeKnown fills what the job-completion log does not say (priority, GPUs,
// command hash) from the last event emitted for the job.
func mergeKnown(ev, last *schemas.JobEvent) {
	if ev.Priority == schemas.Unknown {
		ev.Priority = last.Priority
	}
	if ev.GPUs == schemas.Unknown {
		ev.GPUs, ev.GPUType = last.GPUs, last.GPUType
	}
	if ev.CommandHash == "" {
		ev.CommandHash = last.CommandHash
	}
	if ev.EligibleMillis == 0 {
		ev.EligibleMillis = last.EligibleMillis
	}
	if ev.MemReqBytes == schemas.Unknown {
		ev.MemReqBytes = last.MemReqBytes
	}
}

// openAllocs returns the open allocation intervals of a started job, one per
// GPU, in node and index order; nil when Slurm did not show the indices.
func openAllocs(o *observation) []schemas.Alloc {
	var out []schemas.Alloc
	for _, node := range o.ev.Nodes {
		for _, idx := range o.gpuIdx[node] {
			out = append(out, schemas.Alloc{
				Host: node, GPUIndex: idx, JobID: o.ev.JobID, User: o.ev.User,
				StartMillis: o.ev.StartMillis, Source: schemas.AllocScontrol,
			})
		}
	}
	return out
}

// readJobComp handles the lines appended to the job-completion log since the
// remembered offset. On the first run it starts at the log's end: jobs that
// ended before the source ever ran are the trace importer's.
func (s *Source) readJobComp(ctx, pctx context.Context) (atEnd bool, err error) {
	jc := &s.st.JobComp
	f, err := os.Open(s.cfg.JobCompLog)
	if errors.Is(err, os.ErrNotExist) {
		// slurmctld creates it at the first job's end: all of it will be new.
		if !jc.Known {
			jc.Known, s.dirty = true, true
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("slurm: open job-completion log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("slurm: job-completion log: %w", err)
	}
	ino := inode(fi)
	switch {
	case !jc.Known:
		jc.Known, jc.Inode, jc.Offset = true, ino, fi.Size()
		s.dirty = true
		s.m.jobCompBytes.Set(float64(jc.Offset))
		return true, nil
	case jc.Inode == 0 && jc.Offset == 0:
		jc.Inode, s.dirty = ino, true // the log did not exist when first looked for
	case ino != jc.Inode || fi.Size() < jc.Offset:
		s.logger.Info("job-completion log was rotated or truncated; reading it from the start",
			"path", s.cfg.JobCompLog, "offset", jc.Offset, "size", fi.Size())
		jc.Inode, jc.Offset = ino, 0
		s.dirty = true
	}
	if fi.Size() == jc.Offset {
		return true, nil
	}
	if _, err := f.Seek(jc.Offset, io.SeekStart); err != nil {
		return false, fmt.Errorf("slurm: job-completion log: %w", err)
	}
	br := bufio.NewReader(io.LimitReader(f, maxJobCompRead))
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			// A line without its newline is still being written (or the
			// read limit cut it): take it next time.
			if len(line) == maxJobCompRead {
				return false, fmt.Errorf("slurm: job-completion log: line at offset %d longer than %d bytes", jc.Offset, maxJobCompRead)
			}
			// A cut or unfinished line is not the end.
			return jc.Offset >= fi.Size(), nil
		}
		if err != nil {
			return false, fmt.Errorf("slurm: read job-completion log: %w", err)
		}
		if strings.TrimSpace(line) != "" {
			o, perr := parseJobCompLine(line, s.cfg.JobCompLocation)
			if perr != nil {
				s.parseError(inputJobComp, perr, "offset", jc.Offset, "path", s.cfg.JobCompLog)
			} else if err := s.handle(ctx, pctx, o); err != nil {
				return false, err
			}
		}
		jc.Offset += int64(len(line))
		s.dirty = true
		s.m.jobCompBytes.Set(float64(jc.Offset))
	}
}

// command runs a Slurm command, counted as label (squeue, scontrol, sacct)
// when it fails, with env (KEY=value) added to the environment, and returns
// its standard output.
func (s *Source) command(ctx context.Context, label string, env []string, name string, args ...string) ([]byte, error) {
	out, _, err := s.runCommand(ctx, label, env, name, args...)
	return out, err
}

// commandWaitDelay bounds how long a Slurm command's output is waited for
// once the command has been killed at its timeout or has exited.
const commandWaitDelay = 2 * time.Second

// runCommand is command, also returning the command's standard error, which
// a failure carries too.
func (s *Source) runCommand(ctx context.Context, label string, env []string, name string, args ...string) (stdout, stderr []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	// A child of the command (a site's wrapper, ssh, sudo) may keep its
	// output open after the command is killed at the timeout: stop
	// waiting for it soon after.
	cmd.WaitDelay = commandWaitDelay
	if s.cfg.SlurmConf != "" {
		env = append(env, "SLURM_CONF="+s.cfg.SlurmConf)
	}
	if len(env) > 0 {
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return slices.ContainsFunc(env, func(set string) bool {
				k, _, _ := strings.Cut(set, "=")
				return strings.HasPrefix(kv, k+"=")
			})
		}), env...)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		s.m.cmdErrors.WithLabelValues(label).Inc()
		if msg := lastLine(errOut.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return nil, errOut.Bytes(), fmt.Errorf("slurm: %s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.Bytes(), errOut.Bytes(), nil
}

// parseError counts a record that could not be parsed and logs it, at most
// once per ten seconds per input.
func (s *Source) parseError(input string, err error, attrs ...any) {
	s.m.parseErrors.WithLabelValues(input).Inc()
	n, ok := s.logs.Note(input, s.now(), 1)
	if !ok {
		return
	}
	s.logger.Warn("skipped a record that could not be parsed (all are counted in heliostat_slurm_parse_errors_total)",
		append([]any{"input", input, "records", n, "err", err}, attrs...)...)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
