package slurm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heliostat-dev/heliostat/internal/slurmfmt"
	"github.com/heliostat-dev/heliostat/schemas"
)

// Reading ended jobs from Slurm's accounting (`sacct --json`, slurmdbd): each
// read asks for the jobs that ended in a window of end times, from a little
// before where the last read stopped (acctOverlap: slurmctld sends job ends to
// slurmdbd asynchronously) up to now, at most acctChunk at a time, so that
// catching up after a long outage reads it in bounded pieces.
const (
	acctOverlap = 5 * time.Minute
	acctChunk   = time.Hour
	// acctTime is how sacct's --starttime and --endtime are written; the
	// command runs with TZ=UTC.
	acctTime = "2006-01-02T15:04:05"
	// acctStates are the states of ended runs: with them, sacct selects
	// jobs by their end time. RQ is a run that Slurm requeued on request
	// (scontrol requeue); a preempted or node-failed run that was
	// requeued is recorded PR or NF. sacct without --duplicates shows a
	// requeued run's record in the window of its end, under its own
	// submit time, beside the job's next run.
	acctStates = "BF,CA,CD,DL,F,NF,OOM,PR,RQ,TO"
)

// sacctResponse is the part of `sacct --json` that the source reads: Slurm
// 22.05 (dbv0.0.38) and the later shapes slurmfmt reads (numbers as {set,
// infinite, number}, states as lists).
type sacctResponse struct {
	Meta struct {
		Plugin struct {
			Type string `json:"type"`
		} `json:"plugin"`
	} `json:"meta"`
	Errors []json.RawMessage `json:"errors"`
	Jobs   []acctJob         `json:"jobs"`
}

// legacyExitCodes reports whether the document comes from the data parser
// of Slurm 22.05 and 23.02 (openapi/dbv0.0.38, dbv0.0.39), whose exit_code is
// wrong: 22.05.8 writes status SUCCESS with return_code 0 for a job that
// exited 3, while the database and sacct's text output have 3:0. The source
// then reads the exit codes from the text output (sacctExitCodes).
func (r *sacctResponse) legacyExitCodes() bool {
	return strings.HasPrefix(r.Meta.Plugin.Type, "openapi/dbv0.0.3")
}

// sacctNothingFound is the error Slurm 22.05's sacct --json reports, instead
// of an empty list, when no job matches (ESLURM_REST_EMPTY_RESULT).
const sacctNothingFound = 9003

// acctJob is one job allocation of `sacct --json --allocations`.
type acctJob struct {
	JobID slurmfmt.Int `json:"job_id"`
	Array struct {
		JobID  slurmfmt.Int `json:"job_id"`
		TaskID slurmfmt.Int `json:"task_id"`
		Task   string       `json:"task"` // the tasks of an array record that never split: "0-5", "[0-5%2]"
	} `json:"array"`
	Name      string `json:"name"`
	User      string `json:"user"`
	Group     string `json:"group"`
	Account   string `json:"account"`
	Partition string `json:"partition"`
	QOS       string `json:"qos"`
	Nodes     string `json:"nodes"`
	WorkDir   string `json:"working_directory"`
	State     struct {
		Current slurmfmt.States `json:"current"`
	} `json:"state"`
	ExitCode        acctExitCode `json:"exit_code"`
	Priority        slurmfmt.Int `json:"priority"`
	AllocationNodes slurmfmt.Int `json:"allocation_nodes"`
	Time            struct {
		Submission slurmfmt.Int `json:"submission"`
		Eligible   slurmfmt.Int `json:"eligible"`
		Start      slurmfmt.Int `json:"start"`
		End        slurmfmt.Int `json:"end"`
		Limit      slurmfmt.Int `json:"limit"` // minutes; unset when unlimited
	} `json:"time"`
	TRES struct {
		Allocated []acctTRES `json:"allocated"`
		Requested []acctTRES `json:"requested"`
	} `json:"tres"`
}

// acctTRES is one trackable resource of a job: cpu, mem (MB), node, gres
// (name "gpu" or "gpu:TYPE").
type acctTRES struct {
	Type  string       `json:"type"`
	Name  string       `json:"name"`
	Count slurmfmt.Int `json:"count"`
}

// acctExitCode is a job's exit code in `sacct --json`: {"status": "SUCCESS"
// | "FAILED" | "SIGNALED", "return_code": N, "signal": {"signal_id": N}} in
// 22.05; the status a list, return_code an Int object and the signal's number
// "id" from v0.0.40. Code is what a shell reports: the exit status, or 128
// plus the signal that killed the job.
type acctExitCode struct {
	Code int64
	Set  bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *acctExitCode) UnmarshalJSON(b []byte) error {
	*c = acctExitCode{}
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	var v struct {
		Status     slurmfmt.States `json:"status"`
		ReturnCode slurmfmt.Int    `json:"return_code"`
		Signal     struct {
			SignalID slurmfmt.Int `json:"signal_id"`
			ID       slurmfmt.Int `json:"id"`
		} `json:"signal"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	sig := v.Signal.SignalID
	if !sig.Set {
		sig = v.Signal.ID
	}
	switch {
	case sig.Set && sig.V > 0 && sig.V < 128 && (v.Status.Base() == "SIGNALED" || !v.ReturnCode.Set || v.ReturnCode.V == 0):
		*c = acctExitCode{Code: 128 + sig.V, Set: true}
	case v.ReturnCode.Set:
		*c = acctExitCode{Code: v.ReturnCode.V, Set: true}
	}
	return nil
}

// decodeSacct decodes the output of `sacct --json`. An error means the whole
// document is unusable; errors Slurm itself reports in "errors" are one too.
func decodeSacct(b []byte) (*sacctResponse, error) {
	var r sacctResponse
	if err := decodeJSON(b, &r, "sacct --json"); err != nil {
		return nil, err
	}
	var errs []json.RawMessage
	for _, e := range r.Errors {
		var v struct {
			Number int `json:"error_number"`
		}
		if json.Unmarshal(e, &v) == nil && v.Number == sacctNothingFound {
			continue // no job in the window
		}
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("sacct --json reports errors: %s", joinRaw(errs, 200))
	}
	if r.Jobs == nil && !bytes.Contains(b, []byte(`"jobs"`)) {
		return nil, errors.New("decode sacct --json: no \"jobs\" list")
	}
	return &r, nil
}

// parseSacctExitCodes reads `sacct --noheader --parsable2 --format
// JobIDRaw,ExitCode` ("8|3:0", "9|0:15"): each job's exit code as a shell
// reports it (the exit status, or 128 plus the signal). Errors name the line.
func parseSacctExitCodes(b []byte) (map[int64]int64, error) {
	codes := map[int64]int64{}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		idStr, ec, ok := strings.Cut(line, "|")
		code, sig, ok2 := strings.Cut(ec, ":")
		id, err := strconv.ParseInt(idStr, 10, 64)
		c, err1 := strconv.ParseInt(code, 10, 64)
		n, err2 := strconv.ParseInt(sig, 10, 64)
		if !ok || !ok2 || err != nil || err1 != nil || err2 != nil || id <= 0 || c < 0 || n < 0 || n > 127 {
			return nil, fmt.Errorf("sacct exit codes, line %d: %.80q is not JobIDRaw|exit:signal", i+1, line)
		}
		if n != 0 {
			c = 128 + n
		}
		codes[id] = c
	}
	return codes, nil
}

// observeSacct turns one sacct record of an ended run into observations:
// one, or one per task of an array that ended before any task was split off
// (a pending array cancelled as a whole). gap is not nil when the task list
// of such an array was cut short: observations are only for the tasks
// listed in full. Errors name the field.
func observeSacct(j *acctJob) (obs []*observation, gap *taskGap, err error) {
	if !j.JobID.Set || j.JobID.V <= 0 {
		return nil, nil, fmt.Errorf("job_id %d is not a job id", j.JobID.V)
	}
	id := strconv.FormatInt(j.JobID.V, 10)
	state, err := normalizeEndState(j.State.Current.Base())
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: state.current: %w", id, err)
	}
	if j.Time.Submission.V <= 0 {
		return nil, nil, fmt.Errorf("job %s: time.submission %d is not a time", id, j.Time.Submission.V)
	}
	if j.Time.End.V <= 0 {
		return nil, nil, fmt.Errorf("job %s: time.end %d is not a time", id, j.Time.End.V)
	}
	submit, err := slurmMillis(id, "time.submission", j.Time.Submission.V)
	if err != nil {
		return nil, nil, err
	}
	end, err := slurmMillis(id, "time.end", j.Time.End.V)
	if err != nil {
		return nil, nil, err
	}
	ev := schemas.JobEvent{
		JobID: id, ArrayTaskID: schemas.Unknown,
		Name: j.Name, User: j.User, UID: schemas.Unknown, Group: j.Group, Account: j.Account, Partition: j.Partition, QOS: j.QOS,
		State: state, ExitCode: j.ExitCode.orUnknown(), Priority: j.Priority.Or(schemas.Unknown),
		SubmitMillis: submit, EndMillis: end,
		TimeLimitS: schemas.Unknown, NodeCount: j.AllocationNodes.Or(schemas.Unknown),
		CPUs: schemas.Unknown, GPUs: schemas.Unknown, MemReqBytes: schemas.Unknown, WorkDir: j.WorkDir,
	}
	if j.Time.Eligible.V > 0 {
		if ev.EligibleMillis, err = slurmMillis(id, "time.eligible", j.Time.Eligible.V); err != nil {
			return nil, nil, err
		}
	}
	if j.Time.Limit.Set && j.Time.Limit.V >= 0 {
		ev.TimeLimitS = j.Time.Limit.V * 60
	}
	if err := acctResources(j, &ev); err != nil {
		return nil, nil, fmt.Errorf("job %s: %w", id, err)
	}
	o := &observation{kind: kindFinal, exactSubmit: true, restarts: schemas.Unknown}
	// As from squeue and the log: a job holds nodes only once it runs, and
	// Slurm gives a job cancelled while pending a start time but no nodes.
	if j.Nodes != "" && j.Nodes != "None assigned" && j.Time.Start.V > 0 {
		if ev.Nodes, err = slurmfmt.ExpandHostlist(j.Nodes); err != nil {
			return nil, nil, fmt.Errorf("job %s: nodes: %w", id, err)
		}
		if ev.StartMillis, err = slurmMillis(id, "time.start", j.Time.Start.V); err != nil {
			return nil, nil, err
		}
		if ev.EndMillis < ev.StartMillis {
			return nil, nil, fmt.Errorf("job %s: time.end %d before time.start %d", id, j.Time.End.V, j.Time.Start.V)
		}
		o.started = true
	}
	if j.Array.JobID.V <= 0 {
		o.ev = ev
		return []*observation{o}, nil, nil
	}
	ev.ArrayJobID = strconv.FormatInt(j.Array.JobID.V, 10)
	if j.Array.TaskID.Set {
		ev.ArrayTaskID = j.Array.TaskID.V
		ev.JobID = ev.ArrayJobID + "_" + strconv.FormatInt(j.Array.TaskID.V, 10)
		o.ev = ev
		return []*observation{o}, nil, nil
	}
	if o.started {
		return nil, nil, fmt.Errorf("job %s: array.task_id is null for an array job that ran", id)
	}
	tasks, complete, err := expandArrayTasks(strings.TrimSuffix(strings.TrimPrefix(j.Array.Task, "["), "]"))
	if err != nil {
		return nil, nil, fmt.Errorf("job %s: array.task: %w", id, err)
	}
	if !complete {
		gap = &taskGap{arrayJobID: ev.ArrayJobID, above: -1}
		if len(tasks) > 0 {
			gap.above = slices.Max(tasks)
		}
	}
	return perTask(o, ev, tasks), gap, nil
}

// acctResources fills CPUs, GPUs and GPU type from the allocated resources
// (the requested ones for a job that never ran) and the memory asked for.
// GPUs stay unknown when the accounting does not track gres/gpu
// (AccountingStorageTRES); the source then keeps what squeue showed.
func acctResources(j *acctJob, ev *schemas.JobEvent) error {
	list := j.TRES.Allocated
	if len(list) == 0 {
		list = j.TRES.Requested
	}
	// The untyped gres/gpu count is the total; without it, the typed ones
	// (gres/gpu:a100) add up.
	untyped, typed, sawTyped := int64(schemas.Unknown), int64(0), false
	var types []string
	for _, t := range list {
		if !t.Count.Set {
			continue
		}
		if t.Count.V < 0 {
			return fmt.Errorf("tres %s/%s count %d is negative", t.Type, t.Name, t.Count.V)
		}
		switch {
		case t.Type == "cpu":
			ev.CPUs = t.Count.V
		case t.Type == "gres" && t.Name == "gpu":
			untyped = t.Count.V
		case t.Type == "gres" && strings.HasPrefix(t.Name, "gpu:"):
			typed, sawTyped = typed+t.Count.V, true
			types = append(types, strings.TrimPrefix(t.Name, "gpu:"))
		}
	}
	if ev.GPUType == "" {
		ev.GPUType = slurmfmt.JoinTypes(types)
	}
	switch {
	case untyped != schemas.Unknown:
		ev.GPUs = untyped
	case sawTyped:
		ev.GPUs = typed
	}
	for _, t := range j.TRES.Requested {
		if t.Type == "mem" && t.Count.Set && t.Count.V >= 0 {
			ev.MemReqBytes = t.Count.V << 20
		}
	}
	return nil
}

func (c acctExitCode) orUnknown() int64 {
	if !c.Set {
		return schemas.Unknown
	}
	return c.Code
}

// readAccounting reads the jobs that ended since the last read from sacct,
// when one is due, and handles them as it handles squeue's records (a job
// already ended is not published again). A failing sacct is reported on the
// accounting condition and counted, and leaves the read where it was: the
// squeue side of the poll goes on.
func (s *Source) readAccounting(ctx, pctx context.Context, listed time.Time, requeues bool) error {
	if !s.acctDue(listed, requeues) {
		return nil
	}
	now := listed.UnixMilli()
	from := s.st.Accounted - acctOverlap.Milliseconds()
	if s.st.Accounted == 0 {
		// First read: jobs that ended before the source ever ran are the
		// trace importer's, as with the job-completion log.
		from = now - acctOverlap.Milliseconds()
	}
	to := min(now, from+acctChunk.Milliseconds())
	s.acctRun = listed
	window := []string{"--allocations", "--allusers", "--starttime=" + time.UnixMilli(from).UTC().Format(acctTime),
		"--endtime=" + time.UnixMilli(to).UTC().Format(acctTime), "--state=" + acctStates}
	err := s.applyAccounting(ctx, pctx, window)
	s.acctFailed = err != nil
	if err != nil {
		if ctx.Err() == nil {
			s.acct.Report(err)
			s.logger.Warn("cannot read ended jobs from Slurm's accounting; retrying next poll", "err", err)
		}
		var pe publishError
		if errors.As(err, &pe) {
			return err // the publisher's failure fails the poll, as for squeue
		}
		return nil
	}
	s.acct.Report(nil)
	// Whole seconds: sacct's window is in seconds, and an end in the
	// second of `to` may be in the next window too (it overlaps).
	s.st.Accounted, s.dirty = to/1000*1000, true
	s.m.acctTo.Set(float64(s.st.Accounted) / 1000)
	if to < now {
		s.logger.Info("catching up on Slurm's accounting", "read_until", time.UnixMilli(to).UTC(), "behind", time.Duration(now-to)*time.Millisecond)
	}
	return nil
}

// acctDue says whether this poll reads the accounting: on the first poll,
// every --slurm.accounting-interval, while catching up, at once when a job
// went missing from squeue after the last read (before it could be ended as
// lost), and when squeue shows requeued jobs (the accounting has the state
// their runs ended in); after a failed read, only once the interval has
// passed.
func (s *Source) acctDue(listed time.Time, requeues bool) bool {
	if !s.cfg.Accounting {
		return false
	}
	if s.acctFailed && listed.Sub(s.acctRun) < s.cfg.AccountingInterval {
		return false // slurmdbd down: do not ask it at every poll
	}
	if requeues || s.st.Accounted == 0 || s.acctRun.IsZero() || listed.Sub(s.acctRun) >= s.cfg.AccountingInterval ||
		listed.UnixMilli()-s.st.Accounted > s.cfg.AccountingInterval.Milliseconds()+acctOverlap.Milliseconds() {
		return true
	}
	for _, r := range s.st.Jobs {
		if r.Missing > 0 && !r.Ended && r.GoneMillis > s.st.Accounted {
			return true
		}
	}
	return false
}

// publishError marks a failure to publish, which fails the poll.
type publishError struct{ error }

func (e publishError) Unwrap() error { return e.error }

// sacct runs the sacct command with args, in UTC, with array task lists in
// full.
func (s *Source) sacct(ctx context.Context, args ...string) ([]byte, error) {
	return s.command(ctx, "sacct", []string{"TZ=UTC", fullBitstrings}, s.cfg.Sacct, args...)
}

// applyAccounting reads the ended jobs of one window (sacct's selection
// flags) and handles them.
func (s *Source) applyAccounting(ctx, pctx context.Context, window []string) error {
	out, err := s.sacct(ctx, append([]string{"--json"}, window...)...)
	if err != nil {
		return err
	}
	resp, err := decodeSacct(out)
	if err != nil {
		s.m.parseErrors.WithLabelValues(inputSacct).Inc()
		return fmt.Errorf("slurm: %w", err)
	}
	if resp.legacyExitCodes() && len(resp.Jobs) > 0 {
		out, err := s.sacct(ctx, append([]string{"--noheader", "--parsable2", "--format=JobIDRaw,ExitCode"}, window...)...)
		if err != nil {
			return err
		}
		codes, err := parseSacctExitCodes(out)
		if err != nil {
			s.m.parseErrors.WithLabelValues(inputSacct).Inc()
			return fmt.Errorf("slurm: %w", err)
		}
		for i := range resp.Jobs {
			c, ok := codes[resp.Jobs[i].JobID.V]
			resp.Jobs[i].ExitCode = acctExitCode{Code: c, Set: ok}
		}
	}
	for i := range resp.Jobs {
		obs, gap, err := observeSacct(&resp.Jobs[i])
		if err != nil {
			s.parseError(inputSacct, err, "index", i)
			continue
		}
		if gap != nil {
			// The tasks not listed in full follow the usual rules: one
			// that squeue no longer lists is ended as lost.
			s.truncatedTasks(inputSacct, gap)
		}
		for _, o := range obs {
			// handle publishes nothing for a job whose end squeue or the
			// log showed already.
			n := s.published
			if err := s.handle(ctx, pctx, o); err != nil {
				return publishError{err}
			}
			if s.published > n {
				s.m.acctRecovered.Inc()
			}
		}
	}
	return nil
}
