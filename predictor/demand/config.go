package demand

import (
	"flag"
	"fmt"
	"math"
	"time"
)

// Defaults for the zero values of Config fields: the Cluster Energy Saving
// protocol on the Philly node sequence (shared/ANCHORS.md).
const (
	DefaultStep       = 10 * time.Minute
	DefaultHorizon    = time.Hour
	DefaultRefitEvery = 24 * time.Hour
	DefaultRidge      = 1e-3
)

// The default test window of the CES protocol: decisions from 2017-12-01
// 00:00 up to (not including) 2017-12-15 00:00, on the file's clock
// (DefaultConfig().TestFrom and TestUntil).

// defaultTestFrom is the first decision time of the CES protocol's test window.
func defaultTestFrom() time.Time { return time.Date(2017, 12, 1, 0, 0, 0, 0, time.UTC) }

// defaultTestUntil ends the CES protocol's test window (excluded).
func defaultTestUntil() time.Time { return time.Date(2017, 12, 15, 0, 0, 0, 0, time.UTC) }

// Config configures the forecaster and its backtest. The zero value of each
// field means its default; DefaultConfig returns them filled in.
type Config struct {
	// Step is the forecasting step; series are resampled to it with Max,
	// so a step's demand is the most nodes busy at any moment within it.
	// Default: 10m.
	Step time.Duration
	// Horizon is how far ahead a forecast looks, a whole number of steps.
	// Default: 1h.
	Horizon time.Duration
	// TestFrom is the first decision time of a backtest; the first model
	// is trained on everything that ended before it. Default: 2017-12-01
	// 00:00.
	TestFrom time.Time
	// TestUntil ends the backtest: decisions are taken at every step
	// boundary in [TestFrom, TestUntil) whose target the series knows.
	// Default: 2017-12-15 00:00.
	TestUntil time.Time
	// RefitEvery is how often a backtest retrains, at decision times
	// TestFrom + n·RefitEvery, on everything that ended before that time;
	// negative: never. Default: 24h.
	RefitEvery time.Duration
	// HalfLife, when positive, down-weights older training rows: a row's
	// weight halves for every HalfLife between the end of its target step
	// and the end of the training data. Default: 0, equal weights.
	HalfLife time.Duration
	// Ridge adds Ridge·var(x) to each feature's variance (ridge regression,
	// scale-free); negative: none. Default: 1e-3.
	Ridge float64
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config { return Config{}.withDefaults() }

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Step == 0 {
		c.Step = DefaultStep
	}
	if c.Horizon == 0 {
		c.Horizon = DefaultHorizon
	}
	if c.TestFrom.IsZero() {
		c.TestFrom = defaultTestFrom()
	}
	if c.TestUntil.IsZero() {
		c.TestUntil = defaultTestUntil()
	}
	if c.RefitEvery == 0 {
		c.RefitEvery = DefaultRefitEvery
	}
	if c.Ridge == 0 {
		c.Ridge = DefaultRidge
	}
	return c
}

// RegisterFlags registers the forecaster's flags on fs, with the defaults
// filled in. --horizon keeps the name the evaluation interface gives it
// (`heliostat predictor backtest-demand --horizon 1h`); the others are
// dotted.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	*c = DefaultConfig()
	fs.DurationVar(&c.Horizon, "horizon", c.Horizon, "how far ahead to forecast, a whole number of steps")
	fs.DurationVar(&c.Step, "demand.step", c.Step, "forecasting step; demand is the max within a step")
	fs.Var((*timeFlag)(&c.TestFrom), "demand.test-from", "first decision time of the backtest (YYYY-MM-DD[ HH:MM:SS], the series' clock)")
	fs.Var((*timeFlag)(&c.TestUntil), "demand.test-until", "the backtest takes decisions before this time")
	fs.DurationVar(&c.RefitEvery, "demand.refit-every", c.RefitEvery, "retrain the backtest's model this often; negative: never")
	fs.DurationVar(&c.HalfLife, "demand.half-life", c.HalfLife, "halve a training row's weight per this age; 0: equal weights")
	fs.Float64Var(&c.Ridge, "demand.ridge", c.Ridge, "ridge penalty relative to each feature's variance; negative: none")
}

// Validate reports the first invalid field, named by its flag. Zero fields
// are valid (they mean the default).
func (c Config) Validate() error {
	d := c.withDefaults()
	switch {
	case d.Step < 0:
		return fmt.Errorf("demand: --demand.step: %v is negative", c.Step)
	case d.Horizon < 0:
		return fmt.Errorf("demand: --horizon: %v is negative", c.Horizon)
	case d.Horizon%d.Step != 0:
		return fmt.Errorf("demand: --horizon: %v is not a whole number of %v steps", d.Horizon, d.Step)
	case math.IsNaN(d.Ridge) || math.IsInf(d.Ridge, 0):
		return fmt.Errorf("demand: --demand.ridge: %v is not finite", c.Ridge)
	case d.HalfLife < 0:
		return fmt.Errorf("demand: --demand.half-life: %v is negative", c.HalfLife)
	case d.RefitEvery > 0 && d.RefitEvery%d.Step != 0:
		return fmt.Errorf("demand: --demand.refit-every: %v is not a whole number of %v steps", d.RefitEvery, d.Step)
	case !d.TestUntil.After(d.TestFrom):
		return fmt.Errorf("demand: --demand.test-until: %s is not after --demand.test-from %s",
			d.TestUntil.Format(timeLayout), d.TestFrom.Format(timeLayout))
	}
	return nil
}

// timeFlag is a flag.Value for a zone-less time read as UTC.
type timeFlag time.Time

func (t *timeFlag) String() string {
	if t == nil || time.Time(*t).IsZero() {
		return ""
	}
	return time.Time(*t).Format(timeLayout)
}

func (t *timeFlag) Set(s string) error {
	v, err := time.Parse(time.DateOnly, s)
	if err != nil {
		if v, err = parseTime(s); err != nil {
			return err
		}
	}
	*t = timeFlag(v)
	return nil
}
