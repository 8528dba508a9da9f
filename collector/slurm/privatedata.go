package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heliostat-dev/heliostat/internal/slurmfmt"
)

// privateDataRecheck is how often the source checks again whether Slurm
// hides other users' jobs from it while the last check found that it does,
// or could not tell: an admin who grants the source's user an admin level
// sees its readiness recover without a restart.
const privateDataRecheck = 10 * time.Minute

// slurmConfig is what the source reads from `scontrol show config`, or of
// slurmdbd's own settings from `sacctmgr show configuration`.
type slurmConfig struct {
	// PrivateData is the PrivateData of slurm.conf (or slurmdbd.conf) as
	// slurmctld (or slurmdbd) prints it: the flags it set, lower case
	// ("jobs", "usage", …; PrivateData=all prints every flag); nil for
	// "none".
	PrivateData []string
	// SlurmUser is the user the daemon runs as, by name, and SlurmUID its
	// uid, -1 where it was printed without one.
	SlurmUser string
	SlurmUID  int64
}

// hidesJobs reports whether the daemon shows a user who is neither root,
// its SlurmUser nor a Slurm operator only that user's own jobs.
func (c slurmConfig) hidesJobs() bool {
	for _, f := range c.PrivateData {
		// The daemons print the flags set, "all" as every one of them;
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
	return parseConfig(b, "scontrol show config")
}

// dbdConfigHeader starts the part of `sacctmgr show configuration` that
// slurmdbd sent. Above it sacctmgr prints settings of the slurm.conf it
// read itself, PrivateData among them, which are not slurmdbd's.
const dbdConfigHeader = "SlurmDBD configuration:"

// errNoDbdConfig: `sacctmgr show configuration` printed no part from
// slurmdbd. Slurm 22.05's sacctmgr does so, exiting 0, when slurmdbd does
// not answer (it says why on standard error).
var errNoDbdConfig = errors.New("slurm: sacctmgr show configuration printed no SlurmDBD configuration")

// parseDbdConfig reads slurmdbd's PrivateData and SlurmUser from the output
// of `sacctmgr show configuration`: the lines below dbdConfigHeader, laid
// out as scontrol's. Without that header it returns errNoDbdConfig; other
// errors name the line (of the whole output), or the name that is missing.
func parseDbdConfig(b []byte) (slurmConfig, error) {
	rest, line := b, 0
	for len(rest) > 0 {
		l, after, _ := bytes.Cut(rest, []byte("\n"))
		rest, line = after, line+1
		if string(bytes.TrimSpace(l)) == dbdConfigHeader {
			// Blank lines in place of sacctmgr's own part keep the line
			// numbers of errors those of the whole output.
			return parseConfig(append(bytes.Repeat([]byte("\n"), line), rest...), "sacctmgr show configuration")
		}
	}
	return slurmConfig{}, errNoDbdConfig
}

// parseConfig reads PrivateData and SlurmUser from the output of cmd, laid
// out as `scontrol show config`'s.
func parseConfig(b []byte, cmd string) (slurmConfig, error) {
	c := slurmConfig{SlurmUID: -1}
	vals, err := slurmfmt.ConfigValues(b, "PrivateData", "SlurmUser")
	if err != nil {
		return slurmConfig{}, fmt.Errorf("slurm: %s: %w", cmd, err)
	}
	private, ok := vals["PrivateData"]
	if !ok {
		return slurmConfig{}, fmt.Errorf("slurm: %s: no PrivateData line", cmd)
	}
	if v := private.Value; v != "none" && v != "" {
		for _, f := range strings.Split(v, ",") {
			f = strings.ToLower(strings.TrimSpace(f))
			if f == "" {
				return slurmConfig{}, fmt.Errorf("slurm: %s: line %d: PrivateData %q has an empty flag", cmd, private.Line, v)
			}
			c.PrivateData = append(c.PrivateData, f)
		}
	}
	su, ok := vals["SlurmUser"]
	if !ok {
		return slurmConfig{}, fmt.Errorf("slurm: %s: no SlurmUser line", cmd)
	}
	// "slurm(64030)": the name, and the uid in parentheses.
	uname, uid, paren := strings.Cut(su.Value, "(")
	if uname == "" {
		return slurmConfig{}, fmt.Errorf("slurm: %s: line %d: SlurmUser %q has no user name", cmd, su.Line, su.Value)
	}
	c.SlurmUser = uname
	if paren {
		uid, ok := strings.CutSuffix(uid, ")")
		id, err := strconv.ParseInt(uid, 10, 64)
		if !ok || err != nil || id < 0 {
			return slurmConfig{}, fmt.Errorf("slurm: %s: line %d: SlurmUser %q: want name(uid)", cmd, su.Line, su.Value)
		}
		c.SlurmUID = id
	}
	return c, nil
}

// checkPrivateData finds out whether Slurm hides other users' jobs from the
// source's user. slurm.conf's PrivateData=jobs makes slurmctld show a user
// who is neither root, SlurmUser nor a Slurm operator (AdminLevel=Operator
// or Administrator, kept by slurmdbd) only its own jobs in squeue, with no
// error: the source then misses every other user's pending and running
// jobs. With Accounting, slurmdbd.conf's PrivateData=jobs does the same to
// sacct, by slurmdbd's own rules (root, slurmdbd's SlurmUser, operators),
// whatever slurm.conf says: other users' jobs that end while the source is
// down are then ended as lost. When either hides jobs, the source says so
// at Error level, naming the file, sets heliostat_slurm_jobs_hidden and
// fails its readiness, but goes on. It reports whether it could tell; when
// it could not (a command failed, or printed what cannot be read) and
// neither hides jobs, it logs why and changes nothing.
func (s *Source) checkPrivateData(ctx context.Context) bool {
	// The source's user and its admin level are looked up once per check,
	// and only when a configuration hides jobs.
	currentUser := sync.OnceValues(s.currentUser)
	level := sync.OnceValues(func() (string, error) {
		u, err := currentUser()
		if err != nil {
			return "", err
		}
		return s.adminLevel(ctx, u.Username)
	})
	var hidden, unknown error
	note := func(h bool, err error) {
		switch {
		case err == nil:
		case h:
			hidden = joinErr(hidden, err)
		default:
			unknown = joinErr(unknown, err)
		}
	}
	attrs := []any{"again_in", privateDataRecheck}
	ctldHides := false // slurm.conf's hides jobs: the worse, logged as such
	if conf, err := s.slurmConfig(ctx); err != nil {
		note(false, err)
	} else {
		attrs = append(attrs, "private_data", strings.Join(conf.PrivateData, ","), "slurm_user", conf.SlurmUser)
		ctldHides, err = jobsHidden(conf, "slurm.conf", "squeue shows", "SlurmUser", currentUser, level)
		note(ctldHides, err)
	}
	if s.cfg.Accounting {
		if dbd, err := s.dbdConfig(ctx); err != nil {
			note(false, err)
		} else {
			attrs = append(attrs, "dbd_private_data", strings.Join(dbd.PrivateData, ","), "dbd_slurm_user", dbd.SlurmUser)
			note(jobsHidden(dbd, "slurmdbd.conf", "sacct shows", "slurmdbd's SlurmUser", currentUser, level))
		}
	}
	if ctx.Err() != nil {
		return false
	}
	switch {
	case hidden == nil && unknown == nil:
		if s.hidden {
			s.logger.Info("slurm shows the source every user's jobs now", attrs[2:]...)
		}
		s.hidden = false
		s.m.jobsHidden.Set(0)
		s.private.OK()
		return true
	case hidden == nil:
		s.logger.Warn("cannot tell whether slurm hides other users' jobs from the source (PrivateData); checking again later", append([]any{"err", unknown}, attrs...)...)
		return false
	}
	if !s.hidden {
		msg := "slurm hides other users' jobs from the source: their pending and running jobs are not recorded (the job-completion log still gives their ends); checking again later"
		if !ctldHides {
			msg = "slurmdbd hides other users' jobs from the source's sacct: those that end while the source is down are ended as lost (the job-completion log still gives their ends); checking again later"
		}
		s.logger.Error(msg, append([]any{"err", hidden}, attrs...)...)
	}
	s.hidden = true
	s.m.jobsHidden.Set(1)
	s.private.Report(hidden)
	return true
}

// joinErr returns err added to errs, "; " between them: readiness and log
// show the whole on one line.
func joinErr(errs, err error) error {
	if errs == nil {
		return err
	}
	return fmt.Errorf("%w; %w", errs, err)
}

// slurmConfig reads slurm.conf's PrivateData and SlurmUser from slurmctld
// (scontrol show config).
func (s *Source) slurmConfig(ctx context.Context) (slurmConfig, error) {
	out, err := s.command(ctx, "scontrol", nil, s.cfg.Scontrol, "show", "config")
	if err != nil {
		return slurmConfig{}, err
	}
	conf, err := parseSlurmConfig(out)
	if err != nil {
		s.m.parseErrors.WithLabelValues(inputConfig).Inc()
		return slurmConfig{}, err
	}
	return conf, nil
}

// dbdConfig reads slurmdbd.conf's PrivateData and SlurmUser from slurmdbd
// (sacctmgr show configuration, which any user may run). A run that printed
// nothing from slurmdbd counts as a failed sacctmgr, as one that exited
// non-zero does.
func (s *Source) dbdConfig(ctx context.Context) (slurmConfig, error) {
	out, errOut, err := s.runCommand(ctx, "sacctmgr", nil, s.cfg.Sacctmgr, "show", "configuration")
	if err != nil {
		return slurmConfig{}, err
	}
	conf, err := parseDbdConfig(out)
	switch {
	case errors.Is(err, errNoDbdConfig):
		s.m.cmdErrors.WithLabelValues("sacctmgr").Inc()
		if msg := lastLine(string(errOut)); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return slurmConfig{}, err
	case err != nil:
		s.m.parseErrors.WithLabelValues(inputDbdConfig).Inc()
		return slurmConfig{}, err
	}
	return conf, nil
}

// jobsHidden reports, as an error that says what to do, whether conf (of
// file, whose daemon's SlurmUser is called slurmUser in the fix) hides
// other users' jobs from the source's user, in what shows (the commands
// affected); hidden is true with that error, and false with an error when
// it cannot tell (no current user).
func jobsHidden(conf slurmConfig, file, shows, slurmUser string, currentUser func() (*user.User, error), adminLevel func() (string, error)) (hidden bool, err error) {
	if !conf.hidesJobs() {
		return false, nil
	}
	u, err := currentUser()
	if err != nil {
		return false, fmt.Errorf("%s has PrivateData=%s, and the source's user is unknown: %w", file, strings.Join(conf.PrivateData, ","), err)
	}
	isSlurmUser := u.Uid == strconv.FormatInt(conf.SlurmUID, 10) || (conf.SlurmUID < 0 && u.Username == conf.SlurmUser)
	if u.Uid == "0" || isSlurmUser {
		return false, nil
	}
	level, lerr := adminLevel()
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
	return true, fmt.Errorf("%s has PrivateData=%s: %s user %s only its own jobs (%s); give it AdminLevel=Operator (sacctmgr modify user %s set adminlevel=Operator) or run the source as %s (%s)",
		file, strings.Join(conf.PrivateData, ","), shows, u.Username, found, u.Username, slurmUser, conf.SlurmUser)
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
