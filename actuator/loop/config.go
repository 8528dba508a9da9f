package loop

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/heliostat-dev/heliostat/actuator/ces"
	"github.com/heliostat-dev/heliostat/actuator/qssf"
	"github.com/heliostat-dev/heliostat/internal/envdefault"
	"github.com/heliostat-dev/heliostat/predictor/demand"
)

// Config is the control loop's configuration. The safety settings (dry run,
// allowlists, rate limits) are the Guard's (adapter.GuardConfig).
type Config struct {
	// Cluster is the cluster the loop acts on, as the collector names it:
	// its jobs, demand history and audit records. Default DefaultCluster.
	Cluster string
	// Interval between passes. Default 30s.
	Interval time.Duration
	// QSSF is the ordering policy.
	QSSF qssf.Config
	// CES is the power-plan policy.
	CES ces.Config
	// UnknownDuration is the run time assumed for a job that has neither a
	// prediction nor a time limit: long, so that such a job does not jump
	// the queue. Default 24h.
	UnknownDuration time.Duration
	// PeakWindow is the demand history behind the peak forecast, used
	// until the demand model takes over (ForecastMinHistory) or when it
	// fails, and always with Forecast "peak": the plan keeps powered the
	// most nodes demanded within the last PeakWindow (plus the CES buffer).
	// Until the loop has watched demand for a whole PeakWindow there is no
	// forecast and nothing is powered down. Default 1h.
	PeakWindow time.Duration
	// Forecast is the forecast power plans read: ForecastModel (default)
	// or ForecastPeak.
	Forecast string
	// ForecastMinHistory is how much demand history the loop records
	// before the model forecast takes over from the peak. Default 24h.
	ForecastMinHistory time.Duration
	// RepeatAfter is how long an action that was skipped (dry run, busy
	// node, rate limit) is not recorded again while the plan keeps asking
	// for it unchanged. Default 10m.
	RepeatAfter time.Duration
	// KindUseHalfLife is the half-life of each node kind's recent use
	// (ces.Input.KindUse): the nodes of the kind busy, incoming or needed
	// at each pass, averaged over the time watched with weights that halve
	// every KindUseHalfLife back. In a partition of several kinds the spare nodes a plan keeps
	// follow it. Default 6h; negative: they follow the node counts alone.
	KindUseHalfLife time.Duration
	// MaxPassAge is how long the loop stays ready (Loop.Ready) without a
	// pass that succeeded: a pass hanging on a Slurm or ClickHouse call
	// reports no failure, so readiness reads the age of the last success
	// too. Longer than Interval. Default 3 × Interval.
	MaxPassAge time.Duration
}

// DefaultCluster is the cluster the loop acts on when none is configured:
// the collector's default name (collector.DefaultCluster), so that a
// collector and an actuator left at their defaults agree.
const DefaultCluster = "default"

// RegisterFlags adds the loop's flags, and the QSSF and CES policies' flags,
// to fs. getenv supplies the default cluster (HELIOSTAT_CLUSTER, as the
// collector reads it); nil means none.
func (c *Config) RegisterFlags(fs *flag.FlagSet, getenv func(string) string) {
	cluster := envdefault.String(getenv, "HELIOSTAT_CLUSTER", DefaultCluster)
	fs.StringVar(&c.Cluster, "actuator.cluster", cluster, "the cluster the actuator acts on, as the collector names it (--collector.cluster): its jobs, demand history and audit records (env HELIOSTAT_CLUSTER)")
	fs.DurationVar(&c.Interval, "actuator.interval", 30*time.Second, "time between two passes of the control loop")
	fs.DurationVar(&c.UnknownDuration, "actuator.unknown-duration", 24*time.Hour, "run time assumed for a job with neither a prediction nor a time limit")
	fs.DurationVar(&c.PeakWindow, "actuator.peak-window", time.Hour, "until the demand model takes over (--actuator.forecast), power plans keep powered the peak demand of this window; nothing is powered down before the loop has watched demand this long")
	fs.StringVar(&c.Forecast, "actuator.forecast", ForecastModel, "power plans read the demand model's forecast (model: 10-minute steps, 1 h ahead or the wake-up latency plus a step if longer, upper bound at --ces.quantile of its past errors, refitted daily) once --actuator.forecast-min-history of demand is recorded, the watched peak before that; peak: always the peak of --actuator.peak-window")
	fs.DurationVar(&c.ForecastMinHistory, "actuator.forecast-min-history", 24*time.Hour, "demand history the loop records before the model forecast replaces the watched peak")
	fs.DurationVar(&c.RepeatAfter, "actuator.repeat-after", 10*time.Minute, "an unchanged action that was skipped is recorded again only after this long")
	fs.DurationVar(&c.KindUseHalfLife, "actuator.kind-use-half-life", 6*time.Hour, "in a partition whose nodes are of several kinds (GPU types, features), the idle nodes a power plan keeps ready are spread over the kinds by their recent use: the nodes of each kind busy, incoming or needed, averaged over the time watched with weights that halve every this long back; negative: by the kinds' node counts alone")
	fs.DurationVar(&c.MaxPassAge, "actuator.max-pass-age", 0, "/readyz fails once no pass of the control loop has succeeded for this long (a pass hanging on Slurm or ClickHouse, or every pass failing); longer than --actuator.interval; 0: 3 × --actuator.interval")
	c.QSSF.RegisterFlags(fs)
	c.CES.RegisterFlags(fs)
}

// Validate checks the settings; zero durations mean the defaults.
func (c Config) Validate() error {
	if c.Interval < 0 || c.UnknownDuration < 0 || c.PeakWindow < 0 || c.RepeatAfter < 0 || c.MaxPassAge < 0 {
		return errors.New("loop: --actuator.interval, --actuator.unknown-duration, --actuator.peak-window, --actuator.repeat-after and --actuator.max-pass-age must not be negative")
	}
	if interval := (Config{Interval: c.Interval}).withDefaults().Interval; c.MaxPassAge != 0 && c.MaxPassAge <= interval {
		return fmt.Errorf("loop: --actuator.max-pass-age %v must be longer than --actuator.interval %v: readiness would fail between two good passes", c.MaxPassAge, interval)
	}
	switch c.Forecast {
	case "", ForecastModel, ForecastPeak:
	default:
		return fmt.Errorf("loop: --actuator.forecast %q: want %q or %q", c.Forecast, ForecastModel, ForecastPeak)
	}
	if c.ForecastMinHistory < 0 {
		return errors.New("loop: --actuator.forecast-min-history must not be negative")
	}
	if err := c.QSSF.Validate(); err != nil {
		return err
	}
	if c.CES != (ces.Config{}) {
		if err := c.CES.Validate(); err != nil {
			return err
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Cluster == "" {
		c.Cluster = DefaultCluster
	}
	if c.Interval == 0 {
		c.Interval = 30 * time.Second
	}
	if c.UnknownDuration == 0 {
		c.UnknownDuration = 24 * time.Hour
	}
	if c.PeakWindow == 0 {
		c.PeakWindow = time.Hour
	}
	if c.RepeatAfter == 0 {
		c.RepeatAfter = 10 * time.Minute
	}
	if c.MaxPassAge == 0 {
		c.MaxPassAge = 3 * c.Interval
	}
	if c.KindUseHalfLife == 0 {
		c.KindUseHalfLife = 6 * time.Hour
	}
	if c.Forecast == "" {
		c.Forecast = ForecastModel
	}
	if c.ForecastMinHistory == 0 {
		c.ForecastMinHistory = 24 * time.Hour
	}
	if c.CES == (ces.Config{}) {
		c.CES = ces.DefaultConfig()
	}
	if c.QSSF.AgingRate == 0 {
		c.QSSF.AgingRate = qssf.DefaultAgingRate
	}
	return c
}

// PriorityCeiling is the highest priority the loop sets; see Priority.
const PriorityCeiling = 4_000_000_000

// Priority maps a job's QSSF key to a scheduler priority (higher starts
// first):
//
//	priority = PriorityCeiling − round(Key / AgingRate), clipped to [1, PriorityCeiling],
//
// where Key / AgingRate = service / AgingRate + seconds from 2000-01-01 to
// the job's submission (qssf.Config.Key). Priorities therefore sort exactly
// as QSSF ranks (up to the clip and rounding to the second), and a job's
// priority depends only on its own submission and prediction: it changes
// only when its prediction does, not whenever other jobs come or go, so the
// loop sends few updates. Today's jobs get
// about 3.2e9 − service / AgingRate. Slurm reads 0 as held and
// reserves the two largest 32-bit values, which the range avoids.
func Priority(c qssf.Config, j *qssf.Job) int64 {
	rate := c.AgingRate
	if rate == 0 {
		rate = qssf.DefaultAgingRate
	}
	k := c.Key(j) / rate
	if math.IsNaN(k) {
		return 1
	}
	p := float64(PriorityCeiling) - math.Round(k)
	return int64(min(max(p, 1), PriorityCeiling))
}

// forecasterConfig is the demand model's configuration: predictor/demand's
// defaults (10-minute steps of the max, refitted daily, 14 days of errors
// calibrating the upper bound), the CES quantile, and a horizon of an hour
// or the wake-up latency plus a step if that is longer.
func (c Config) forecasterConfig() demand.ForecasterConfig {
	m := demand.DefaultConfig()
	if need := c.CES.WakeLatency + m.Step; need > m.Horizon {
		m.Horizon = (need + m.Step - 1) / m.Step * m.Step
	}
	return demand.ForecasterConfig{Model: m, Quantile: c.CES.Quantile}
}

// describe is the loop's settings in words, for the startup log.
func (c Config) describe() string {
	return fmt.Sprintf("every %v (unready after %v without a good pass); QSSF aging %g; CES quantile %g buffer %d min %d down-delay %v wake %v; forecast %s (model after %v), peak window %v; spares by kind use, half-life %v (negative: by node counts)",
		c.Interval, c.MaxPassAge, c.QSSF.AgingRate, c.CES.Quantile, c.CES.Buffer, c.CES.MinPowered, c.CES.DownDelay, c.CES.WakeLatency, c.Forecast, c.ForecastMinHistory, c.PeakWindow, c.KindUseHalfLife)
}
