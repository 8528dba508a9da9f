package slurm

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// Defaults of Config fields.
const (
	DefaultPollInterval   = 5 * time.Second
	DefaultSqueue         = "squeue"
	DefaultScontrol       = "scontrol"
	DefaultStateFile      = "data/slurm-state.json"
	DefaultCommandTimeout = 30 * time.Second
	DefaultRetention      = time.Hour
	DefaultSacct          = "sacct"
	DefaultSacctmgr       = "sacctmgr"
	DefaultAcctInterval   = time.Minute
)

// Config configures a Source. Zero durations and empty command paths mean
// their defaults; an empty JobCompLog means the log is not read.
type Config struct {
	// Cluster is stamped on every message. Not a flag of its own: the
	// collector subcommand passes its --collector.cluster. Required.
	Cluster string
	// PollInterval is the time between polls of squeue and the log.
	// Default: 5s.
	PollInterval time.Duration
	// Squeue and Scontrol are the Slurm commands, a name on PATH or a path.
	// Default: "squeue", "scontrol". Scontrol also reads slurm.conf's
	// PrivateData at start (scontrol show config).
	Squeue, Scontrol string
	// Sacctmgr is the sacctmgr command, asked for the admin level of the
	// source's user when PrivateData hides other users' jobs, and, with
	// Accounting, for slurmdbd.conf's PrivateData (sacctmgr show
	// configuration), which governs what sacct shows.
	// Default: "sacctmgr".
	Sacctmgr string
	// SlurmConf, when set, is passed to the commands as SLURM_CONF.
	// Default: $SLURM_CONF of the environment (the commands' own default
	// when that is empty too).
	SlurmConf string
	// JobCompLog is slurm.conf's JobCompLoc with JobCompType=jobcomp/filetxt:
	// jobs that start and end between two polls, or end while the source is
	// down, are found there. Default: "" (not read).
	JobCompLog string
	// JobCompLocation is the time zone of the log's times, slurmctld's local
	// zone. Default: time.Local.
	JobCompLocation *time.Location
	// StateFile remembers what was emitted across restarts.
	// Default: "data/slurm-state.json".
	StateFile string
	// HashScripts runs `scontrol write batch_script` once per new batch job
	// whose command squeue does not show (sbatch --wrap, scripts on stdin)
	// to hash its script. slurmctld gives other users' scripts only to
	// root, SlurmUser and Slurm operators: for another user, such a job
	// gets no hash. Default (flag): true.
	HashScripts bool
	// CommandTimeout bounds one run of squeue, scontrol or sacct. Default: 30s.
	CommandTimeout time.Duration
	// Retention is how long an ended job is remembered once squeue no longer
	// lists it. Default: 1h.
	Retention time.Duration
	// Accounting reads ended jobs from Slurm's accounting (sacct --json,
	// which needs slurmdbd) too: a job that ended while the source was down
	// for longer than slurmctld's MinJobAge gets its real end instead of
	// being ended as lost, with or without the job-completion log.
	Accounting bool
	// Sacct is the sacct command. Default: "sacct".
	Sacct string
	// AccountingInterval is the time between two reads of the accounting;
	// a job missing from squeue is looked up at once. Default: 1m.
	AccountingInterval time.Duration
}

// RegisterFlags registers the source's flags on fs, with defaults filled in;
// getenv supplies SLURM_CONF.
func (c *Config) RegisterFlags(fs *flag.FlagSet, getenv func(string) string) {
	fs.DurationVar(&c.PollInterval, "slurm.poll-interval", DefaultPollInterval, "time between polls of squeue and the job-completion log")
	fs.StringVar(&c.Squeue, "slurm.squeue", DefaultSqueue, "squeue command (Slurm 22.05 or later, with --json)")
	fs.StringVar(&c.Scontrol, "slurm.scontrol", DefaultScontrol, "scontrol command, used to hash batch scripts and to read slurm.conf's PrivateData at start")
	fs.StringVar(&c.Sacctmgr, "slurm.sacctmgr", DefaultSacctmgr, "sacctmgr command, asked for the source user's admin level when PrivateData=jobs hides other users' jobs, and with --slurm.accounting for slurmdbd.conf's PrivateData (sacctmgr show configuration)")
	fs.StringVar(&c.SlurmConf, "slurm.conf", getenv("SLURM_CONF"), "slurm.conf the commands read (SLURM_CONF); empty for their default")
	fs.StringVar(&c.JobCompLog, "slurm.jobcomp-log", "", "job-completion log (JobCompLoc of jobcomp/filetxt); empty to not read it")
	fs.Func("slurm.jobcomp-timezone", "time zone of the job-completion log's times, slurmctld's (default Local)", func(s string) error {
		loc, err := time.LoadLocation(s)
		if err != nil {
			return err
		}
		c.JobCompLocation = loc
		return nil
	})
	fs.StringVar(&c.StateFile, "slurm.state-file", DefaultStateFile, "file remembering the events already emitted, across restarts")
	fs.BoolVar(&c.HashScripts, "slurm.hash-scripts", true, "hash batch scripts that squeue does not show (one scontrol run per new job; other users' scripts need root, SlurmUser or a Slurm operator)")
	fs.DurationVar(&c.CommandTimeout, "slurm.command-timeout", DefaultCommandTimeout, "timeout of one squeue, scontrol or sacct run")
	fs.DurationVar(&c.Retention, "slurm.retention", DefaultRetention, "how long ended jobs are remembered after squeue drops them")
	fs.BoolVar(&c.Accounting, "slurm.accounting", false, "also read ended jobs from Slurm's accounting (sacct --json; needs slurmdbd), so that jobs that ended while the source was down longer than MinJobAge get their real end instead of being ended as lost")
	fs.StringVar(&c.Sacct, "slurm.sacct", DefaultSacct, "sacct command, used with --slurm.accounting")
	fs.DurationVar(&c.AccountingInterval, "slurm.accounting-interval", DefaultAcctInterval, "time between two reads of the accounting (a job missing from squeue is looked up at once)")
}

// Validate reports the first invalid field, named by its flag.
func (c Config) Validate() error {
	if c.Cluster == "" {
		return errors.New("slurm: cluster name is empty (--collector.cluster)")
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"slurm.poll-interval", c.PollInterval}, {"slurm.command-timeout", c.CommandTimeout}, {"slurm.retention", c.Retention}, {"slurm.accounting-interval", c.AccountingInterval}} {
		if d.v < 0 {
			return fmt.Errorf("slurm: --%s: %v is negative", d.flag, d.v)
		}
	}
	// Each read of the accounting goes back acctOverlap before where the
	// last one stopped: an ended job forgotten sooner would be read, and
	// published, again.
	if d := c.withDefaults(); c.Accounting && d.Retention <= acctOverlap+d.AccountingInterval {
		return fmt.Errorf("slurm: --slurm.retention: %v is too short with --slurm.accounting, whose reads go back %v before the last one (every %v); want over %v",
			d.Retention, acctOverlap, d.AccountingInterval, acctOverlap+d.AccountingInterval)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Squeue == "" {
		c.Squeue = DefaultSqueue
	}
	if c.Scontrol == "" {
		c.Scontrol = DefaultScontrol
	}
	if c.StateFile == "" {
		c.StateFile = DefaultStateFile
	}
	if c.JobCompLocation == nil {
		c.JobCompLocation = time.Local
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = DefaultCommandTimeout
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.Sacct == "" {
		c.Sacct = DefaultSacct
	}
	if c.Sacctmgr == "" {
		c.Sacctmgr = DefaultSacctmgr
	}
	if c.AccountingInterval == 0 {
		c.AccountingInterval = DefaultAcctInterval
	}
	return c
}
