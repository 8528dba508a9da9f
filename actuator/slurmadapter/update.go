package slurmadapter

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
)

// What `scontrol update jobid=J …` writes to its standard error (Slurm
// 22.05, src/scontrol/update_job.c), one line each:
//
//	MSG for job J     slurmctld refused the request as a whole
//	J_TASKS: MSG      Slurm's answer for a group of J's array tasks (or
//	                  J: MSG for a job), MSG "No error" where it applied
//	                  the update
//	(null): MSG       an array's own record, with no task left in it
//
// slurmctld applies an update of a job array to each of its tasks and
// answers once per outcome, each with the tasks that had it, e.g.
// "17_0-1,3: No error" and "17_2: Job is in held state, pending scheduler
// release". scontrol prints those lines and exits 1 whenever there is more
// than one, so its exit status does not say whether the update was applied.
// A list of tasks longer than Slurm's buffer ends in "...".

// taskReply is one line of scontrol's answer to an update.
type taskReply struct {
	// Job is the job id the line names; "" for "(null)".
	Job string
	// Tasks are the array tasks the line names, as Slurm writes them
	// ("0-1,3", maybe cut short with "..."); "" for a line about a job
	// as a whole.
	Tasks string
	// Msg is Slurm's answer: "No error" where the update was applied,
	// otherwise the error's text.
	Msg string
}

// String names the job or tasks the way scontrol does.
func (r taskReply) String() string {
	switch {
	case r.Job == "":
		return "(null)"
	case r.Tasks == "":
		return r.Job
	}
	return r.Job + "_" + r.Tasks
}

// applied reports whether Slurm applied the update to r's tasks.
func (r taskReply) applied() bool { return r.Msg == "No error" }

var (
	// replyIDPattern is the job or tasks a per-task line starts with.
	replyIDPattern = regexp.MustCompile(`^([0-9]{1,12})(?:_([0-9]+(?:[-,][0-9]+)*(?:[-,]?\.\.\.)?))?$`)
	// replyJobPattern is the job a "MSG for job J" line ends with: the id
	// as it was given to scontrol.
	replyJobPattern = regexp.MustCompile(`^[0-9]{1,12}(?:[_+][0-9]{1,9})?$`)
)

// parseUpdateReply reads scontrol's standard error after an update that
// exited 1. Lines of scontrol's own log ("scontrol: error: …") and empty
// lines are left out; any other line must be an answer, or parseUpdateReply
// returns an error wrapping ErrRecord that names it.
func parseUpdateReply(stderr string) ([]taskReply, error) {
	var out []taskReply
	for i, line := range strings.Split(stderr, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "scontrol: ") {
			continue
		}
		r, ok := parseReplyLine(line)
		if !ok {
			return nil, fmt.Errorf("%w: scontrol's answer, line %d: %q is not Slurm's answer for a job or its tasks", ErrRecord, i+1, cut(line, 200))
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: scontrol's answer names no job: %q", ErrRecord, cut(stderr, 200))
	}
	return out, nil
}

func parseReplyLine(line string) (taskReply, bool) {
	if id, msg, ok := strings.Cut(line, ": "); ok && msg != "" {
		if id == "(null)" {
			return taskReply{Msg: msg}, true
		}
		if m := replyIDPattern.FindStringSubmatch(id); m != nil {
			return taskReply{Job: m[1], Tasks: m[2], Msg: msg}, true
		}
	}
	if i := strings.LastIndex(line, " for job "); i > 0 {
		job := line[i+len(" for job "):]
		if replyJobPattern.MatchString(job) {
			r := taskReply{Job: job, Msg: line[:i]}
			if j, t, ok := strings.Cut(job, "_"); ok {
				r.Job, r.Tasks = j, t
			}
			return r, true
		}
	}
	return taskReply{}, false
}

// cut shortens s to at most n bytes for an error message.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// priorityResult turns scontrol's answer to setting job jobID's priority
// into SetPriority's error. When Slurm applied it to any task, the action
// happened: nil, or, when other tasks were left out (held, ended, refused
// for another reason), an error wrapping adapter.ErrPartial that names
// them. Otherwise it wraps adapter.ErrHeld when at least one task was
// held and the others had ended, adapter.ErrUnknownJob when all had
// ended, and is a plain error (the action failed) when any was refused
// for another reason. A "(null)" line names no task and counts for
// neither.
func priorityResult(jobID string, priority int64, replies []taskReply) error {
	var applied, held, gone, refused []string
	for _, r := range replies {
		switch {
		case r.Job == "":
		case r.applied():
			applied = append(applied, r.String())
		case strings.Contains(r.Msg, "Job is in held state"):
			held = append(held, r.String()+": "+r.Msg)
		case jobGone(r.Msg):
			gone = append(gone, r.String()+": "+r.Msg)
		default:
			refused = append(refused, r.String()+": "+r.Msg)
		}
	}
	leftOut := strings.Join(append(append(refused, held...), gone...), "; ")
	switch {
	case len(applied) > 0 && leftOut == "":
		return nil
	case len(applied) > 0:
		return fmt.Errorf("%w: slurmadapter: priority %d of job %s set on %s; left out %s", adapter.ErrPartial, priority, jobID, strings.Join(applied, ", "), leftOut)
	case len(refused) > 0:
		return fmt.Errorf("slurmadapter: set priority %d: %s", priority, leftOut)
	case len(held) > 0:
		return fmt.Errorf("%w: %s", adapter.ErrHeld, leftOut)
	case len(gone) > 0:
		return fmt.Errorf("%w: %s", adapter.ErrUnknownJob, leftOut)
	}
	return errors.New("slurmadapter: set priority of job " + jobID + ": scontrol exited 1 and named no task")
}
