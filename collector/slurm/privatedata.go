package slurm

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/heliostat-dev/heliostat/internal/slurmfmt"
)

// privateDataRecheck is how often the source checks again whether Slurm
// hides other users' jobs from it while the last check found that it does,
// or could not tell: an admin who grants the source's user an admin level
// sees its readiness recover without a restart.
const privateDataRecheck = 10 * time.Minute

// slurmConfig is what the source reads from `scontrol show config`.
type slurmConfig struct {
	// PrivateData is slurm.conf's PrivateData as slurmctld prints it: the
	// flags it set, lower case ("jobs", "usage", …; PrivateData=all prints
	// every flag); nil for "none".
	PrivateData []string
	// SlurmUser is the user slurmctld runs as, by name, and SlurmUID its
	// uid, -1 where scontrol did not print one.
	SlurmUser string
	SlurmUID  int64
}

// hidesJobs reports whether slurmctld shows a user who is neither root,
// SlurmUser nor a Slurm operator only that user's own jobs.
func (c slurmConfig) hidesJobs() bool {
	for _, f := range c.PrivateData {
		// slurmctld prints the flags it set, "all" as every one of them;
		// "all" is taken too should a version print it as given.
		if f == "jobs" || f == "all" {
			return true
		}
	}
	return false
}

// parseSlurmConfig reads PrivateData and SlurmUser from the output of
// `scontrol show config` (slurmfmt.ConfigValues). An error names the line,
// or the name that is missing.
func parseSlurmConfig(b []byte) (slurmConfig, error) {
	c := slurmConfig{SlurmUID: -1}
	vals, err := slurmfmt.ConfigValues(b, "PrivateData", "SlurmUser")
	if err != nil {
		return slurmConfig{}, fmt.Errorf("slurm: scontrol show config: %w", err)
	}
	private, ok := vals["PrivateData"]
	if !ok {
		return slurmConfig{}, fmt.Errorf("slurm: scontrol show config: no PrivateData line")
	}
	if v := private.Value; v != "none" && v != "" {
		for _, f := range strings.Split(v, ",") {
			f = strings.ToLower(strings.TrimSpace(f))
			if f == "" {
				return slurmConfig{}, fmt.Errorf("slurm: scontrol show config: line %d: PrivateData %q has an empty flag", private.Line, v)
			}
			c.PrivateData = append(c.PrivateData, f)
		}
	}
	su, ok := vals["SlurmUser"]
	if !ok {
		return slurmConfig{}, fmt.Errorf("slurm: scontrol show config: no SlurmUser line")
	}
	// "slurm(64030)": the name, and the uid in parentheses.
	uname, uid, paren := strings.Cut(su.Value, "(")
	if uname == "" {
		return slurmConfig{}, fmt.Errorf("slurm: scontrol show config: line %d: SlurmUser %q has no user name", su.Line, su.Value)
	}
	c.SlurmUser = uname
	if paren {
		uid, ok := strings.CutSuffix(uid, ")")
		id, err := strconv.ParseInt(uid, 10, 64)
		if !ok || err != nil || id < 0 {
			return slurmConfig{}, fmt.Errorf("slurm: scontrol show config: line %d: SlurmUser %q: want name(uid)", su.Line, su.Value)
		}
		c.SlurmUID = id
	}
	return c, nil
}

// checkPrivateData finds out whether slurmctld hides other users' jobs from
// the source's user: slurm.conf's PrivateData=jobs shows a user who is
// neither root, SlurmUser nor a Slurm operator (AdminLevel=Operator or
// Administrator, kept by slurmdbd) only its own jobs, in squeue and sacct,
// with no error. The source then misses every other user's pending and
// running jobs: it says so at Error level, sets heliostat_slurm_jobs_hidden
// and fails its readiness, but goes on (the job-completion log still has
// every job's end). It reports whether it could tell; when it could not
// (scontrol failed), it logs why and changes nothing.
func (s *Source) checkPrivateData(ctx context.Context) bool {
	out, err := s.command(ctx, "scontrol", nil, s.cfg.Scontrol, "show", "config")
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Warn("cannot tell whether slurm hides other users' jobs from the source (PrivateData); checking again later", "err", err, "again_in", privateDataRecheck)
		}
		return false
	}
	conf, err := parseSlurmConfig(out)
	if err != nil {
		s.m.parseErrors.WithLabelValues(inputConfig).Inc()
		s.logger.Warn("cannot tell whether slurm hides other users' jobs from the source (PrivateData); checking again later", "err", err, "again_in", privateDataRecheck)
		return false
	}
	hidden, err := s.jobsHidden(ctx, conf)
	switch {
	case err == nil:
		if s.hidden {
			s.logger.Info("slurm shows the source every user's jobs now", "private_data", strings.Join(conf.PrivateData, ","))
		}
		s.hidden = false
		s.m.jobsHidden.Set(0)
		s.private.OK()
		return true
	case !hidden:
		s.logger.Warn("cannot tell whether slurm hides other users' jobs from the source (PrivateData); checking again later", "err", err, "again_in", privateDataRecheck)
		return false
	}
	if !s.hidden {
		s.logger.Error("slurm hides other users' jobs from the source: their pending and running jobs are not recorded (the job-completion log still gives their ends); checking again later",
			"err", err, "private_data", strings.Join(conf.PrivateData, ","), "slurm_user", conf.SlurmUser, "again_in", privateDataRecheck)
	}
	s.hidden = true
	s.m.jobsHidden.Set(1)
	s.private.Report(err)
	return true
}

// jobsHidden reports, as an error that says what to do, whether conf hides
// other users' jobs from the source's user; hidden is true with that error,
// and false with an error when it cannot tell (no current user).
func (s *Source) jobsHidden(ctx context.Context, conf slurmConfig) (hidden bool, err error) {
	if !conf.hidesJobs() {
		return false, nil
	}
	u, err := s.currentUser()
	if err != nil {
		return false, fmt.Errorf("slurm.conf has PrivateData=%s, and the source's user is unknown: %w", strings.Join(conf.PrivateData, ","), err)
	}
	isSlurmUser := u.Uid == strconv.FormatInt(conf.SlurmUID, 10) || (conf.SlurmUID < 0 && u.Username == conf.SlurmUser)
	if u.Uid == "0" || isSlurmUser {
		return false, nil
	}
	level, lerr := s.adminLevel(ctx, u.Username)
	if lerr == nil && (level == "Operator" || level == "Administrator") {
		return false, nil
	}
	found := "AdminLevel " + level
	switch {
	case lerr != nil:
		found = "AdminLevel unknown: " + lerr.Error()
	case level == "":
		found = "not a user in Slurm's accounting"
	}
	return true, fmt.Errorf("slurm.conf has PrivateData=%s: squeue and sacct show user %s only its own jobs (%s); give it AdminLevel=Operator (sacctmgr modify user %s set adminlevel=Operator) or run the source as SlurmUser (%s)",
		strings.Join(conf.PrivateData, ","), u.Username, found, u.Username, conf.SlurmUser)
}

// adminLevel returns a user's Slurm admin level as sacctmgr prints it
// (None, Operator, Administrator), or "" when the accounting has no such
// user. Admin levels live in slurmdbd: without it, sacctmgr fails.
func (s *Source) adminLevel(ctx context.Context, username string) (string, error) {
	out, err := s.command(ctx, "sacctmgr", nil, s.cfg.Sacctmgr, "-nP", "show", "user", username, "format=adminlevel")
	if err != nil {
		return "", err
	}
	level, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return level, nil
}
