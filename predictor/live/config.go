package live

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/heliostat-dev/heliostat/predictor/duration"
)

// Config configures a Runner.
type Config struct {
	// Database holds heliostat's tables (set from the ClickHouse settings, not
	// a flag of its own).
	Database string
	// Interval between prediction passes. Default 15s.
	Interval time.Duration
	// RetrainInterval is how often the model is refitted from the jobs
	// table. Default 10m.
	RetrainInterval time.Duration
	// History is the window of jobs, by submit time, that the predictor
	// learns from and predicts: the last History before the newest job
	// event in ClickHouse (the data's own clock, so that a simulated cluster
	// running ahead of the wall clock or an imported trace works the same
	// way; an event of a live source stamped more than an hour after
	// ClickHouse's now() is left out). Default 720h (30 days).
	History time.Duration
	// OutcomeWait is how long after its submit a predicted job is waited
	// for, to record its error when it ends: a job still running when its
	// submit falls out of History is looked up by its run in job_runs each
	// pass until it ends or its submit is OutcomeWait old, when it is given
	// up (counted, logged). Default 2160h (90 days); a value shorter than
	// History means History.
	OutcomeWait time.Duration
	// Holdout is the share of the training rows, the latest by submit time,
	// that a second fit leaves out to report held-out accuracy and to
	// calibrate the intervals. Default 0.2; 0 < Holdout < 1 (0 is the
	// default, not "hold nothing out").
	Holdout float64
	// Batch caps the rows of one insert. Default 10000.
	Batch int
	// AccuracyWindow is how many of the latest outcomes the rolling accuracy
	// gauges cover. Default 1000; at most MaxAccuracyWindow, as their buffer
	// is allocated up front.
	AccuracyWindow int
	// AdaptRate is the step per ended job of the online correction of the
	// intervals (duration.Adaptive). 0 means duration.DefaultAdaptRate;
	// negative turns the correction off.
	AdaptRate float64
}

// defaultOutcomeWait is Config.OutcomeWait's default: three times the
// default History, longer than the longest time limits clusters commonly
// allow (Slurm sites rarely exceed 14 days) plus a long wait in the queue.
const defaultOutcomeWait = 90 * 24 * time.Hour

// MaxAccuracyWindow caps Config.AccuracyWindow.
const MaxAccuracyWindow = 1_000_000

// RegisterFlags adds the --predictor.* flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.Interval, "predictor.interval", 15*time.Second, "how often to predict new jobs and record the errors of ended ones")
	fs.DurationVar(&c.RetrainInterval, "predictor.retrain-interval", 10*time.Minute, "how often to refit the duration model from the jobs table")
	fs.DurationVar(&c.History, "predictor.history", 30*24*time.Hour, "window of jobs (by submit time, back from the newest job event) to learn from and predict")
	fs.DurationVar(&c.OutcomeWait, "predictor.outcome-wait", defaultOutcomeWait,
		"how long after its submit a predicted job is waited for to record its error, also once it has left --predictor.history (never less than that)")
	fs.Float64Var(&c.Holdout, "predictor.holdout", 0.2, "share of the latest training rows held out to report the model's accuracy")
	fs.IntVar(&c.Batch, "predictor.batch", 10000, "rows per insert")
	fs.IntVar(&c.AccuracyWindow, "predictor.accuracy-window", 1000, "outcomes covered by the rolling accuracy gauges")
	fs.Float64Var(&c.AdaptRate, "predictor.adapt-rate", duration.DefaultAdaptRate,
		"step per ended job, in log space, of the online correction that keeps the 80% intervals covering 80% of run times (negative: off)")
}

// Validate reports a configuration error. Zero values mean the defaults (so
// commands refuse a flag given as 0, which would not mean 0).
func (c Config) Validate() error {
	var errs []error
	if c.Interval < 0 || c.RetrainInterval < 0 || c.History < 0 || c.OutcomeWait < 0 {
		errs = append(errs, errors.New("live: --predictor.interval, --predictor.retrain-interval, --predictor.history and --predictor.outcome-wait must not be negative"))
	}
	if c.Interval > 0 && c.RetrainInterval > 0 && c.RetrainInterval < c.Interval {
		errs = append(errs, errors.New("live: --predictor.retrain-interval must not be shorter than --predictor.interval"))
	}
	if c.Holdout < 0 || c.Holdout >= 1 {
		errs = append(errs, fmt.Errorf("live: --predictor.holdout %v: must be above 0 and below 1", c.Holdout))
	}
	if c.Batch < 0 || c.AccuracyWindow < 0 {
		errs = append(errs, errors.New("live: --predictor.batch and --predictor.accuracy-window must not be negative"))
	}
	if c.AccuracyWindow > MaxAccuracyWindow {
		errs = append(errs, fmt.Errorf("live: --predictor.accuracy-window %d: at most %d (the rolling gauges' buffer is allocated up front)", c.AccuracyWindow, MaxAccuracyWindow))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Interval == 0 {
		c.Interval = 15 * time.Second
	}
	if c.RetrainInterval == 0 {
		c.RetrainInterval = 10 * time.Minute
	}
	if c.History == 0 {
		c.History = 30 * 24 * time.Hour
	}
	if c.OutcomeWait == 0 {
		c.OutcomeWait = defaultOutcomeWait
	}
	c.OutcomeWait = max(c.OutcomeWait, c.History)
	if c.Holdout == 0 {
		c.Holdout = 0.2
	}
	if c.Batch == 0 {
		c.Batch = 10000
	}
	if c.AccuracyWindow == 0 {
		c.AccuracyWindow = 1000
	}
	return c
}
