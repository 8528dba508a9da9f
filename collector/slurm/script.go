package slurm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// After scriptRefusals batch scripts in a row that slurmctld refused to the
// source's user, the source does not ask for the scripts of new jobs for
// scriptPause: the refusal is of the user, not of the job (every other
// user's job is refused alike), so asking for each new job would only load
// slurmctld. It asks again after the pause, so that a user made an operator
// meanwhile is noticed; a script printed ends the count.
const (
	scriptRefusals = 3
	scriptPause    = 10 * time.Minute
)

// errScriptRefused is a batch script that slurmctld refused to the source's
// user: the job is another user's, and the source's user is neither root,
// SlurmUser nor a Slurm operator.
var errScriptRefused = errors.New("slurm: batch script refused to the source's user")

// refusalMessages are the messages of Slurm's errors that refuse a batch script to
// the user asking: ESLURM_USER_ID_MISSING, what slurmctld 22.05 answers for
// another user's job, and ESLURM_ACCESS_DENIED.
var refusalMessages = []string{"Invalid user id", "Access/permission denied"}

// scriptHash returns the sha256 of a batch job's script as scontrol prints
// it, or "" when scontrol does not print it, which is counted as a failed
// scontrol and logged (throttled). While scripts are refused (see
// scriptRefusals) it returns "" without asking.
func (s *Source) scriptHash(ctx context.Context, slurmID string) string {
	if h, ok := s.scripts[slurmID]; ok {
		return h
	}
	now := s.now()
	if now.Before(s.scriptsPaused) {
		return ""
	}
	h := ""
	script, err := s.batchScript(ctx, slurmID)
	switch {
	case err == nil:
		s.refusals = 0
		sum := sha256.Sum256(script)
		h = hex.EncodeToString(sum[:])
	case errors.Is(err, errScriptRefused):
		s.refusals++
		if n, ok := s.logs.Note("scontrol refused", now, 1); ok {
			s.logger.Warn("slurm refused a batch script to the source's user; the job gets no command hash. Hashing other users' scripts needs that user to be root, SlurmUser or a Slurm operator "+
				"(sacctmgr modify user heliostat set adminlevel=Operator); else set --slurm.hash-scripts=false (all are counted in heliostat_slurm_command_errors_total{command=\"scontrol\"})",
				"job_id", slurmID, "err", err, "jobs", n)
		}
		if s.refusals >= scriptRefusals {
			s.scriptsPaused = now.Add(scriptPause)
			s.logger.Warn("slurm refused batch scripts repeatedly; not asking for the scripts of new jobs for a while (they get no command hash)",
				"refused_in_a_row", s.refusals, "pause", scriptPause)
		}
	default:
		if n, ok := s.logs.Note("scontrol", now, 1); ok {
			s.logger.Warn("cannot read a batch script; the job gets no command hash (all are counted in heliostat_slurm_command_errors_total{command=\"scontrol\"})",
				"job_id", slurmID, "err", err, "jobs", n)
		}
	}
	s.scripts[slurmID] = h
	return h
}

// batchScript returns a batch job's script as `scontrol write batch_script
// J -` prints it. Slurm 22.05's scontrol exits 0 also when it prints no
// script (slurmctld refused it to this user, or the job is gone), saying why
// on standard error: only a script printed without complaint is one. A
// failure is counted as a failed scontrol; a refusal is errScriptRefused.
func (s *Source) batchScript(ctx context.Context, slurmID string) ([]byte, error) {
	args := []string{"write", "batch_script", slurmID, "-"}
	out, stderr, err := s.runCommand(ctx, "scontrol", nil, s.cfg.Scontrol, args...)
	msg := lastLine(string(stderr))
	if slices.ContainsFunc(refusalMessages, func(r string) bool { return strings.Contains(msg, r) }) {
		if err == nil {
			s.m.cmdErrors.WithLabelValues("scontrol").Inc()
		}
		return nil, fmt.Errorf("%w (%s %s: %s)", errScriptRefused, s.cfg.Scontrol, strings.Join(args, " "), msg)
	}
	switch {
	case err != nil: // counted
		return nil, err
	case msg == "" && len(out) > 0:
		return out, nil
	case msg == "":
		msg = "printed nothing"
	default:
		msg = "wrote to standard error: " + msg
	}
	s.m.cmdErrors.WithLabelValues("scontrol").Inc()
	return nil, fmt.Errorf("slurm: %s %s: exited 0 but %s", s.cfg.Scontrol, strings.Join(args, " "), msg)
}
