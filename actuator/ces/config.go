package ces

import (
	"flag"
	"fmt"
	"math"
	"time"
)

// Config is the power-plan policy. DefaultConfig gives the defaults, which
// RegisterFlags also sets; unlike some configs of heliostat a zero field here
// means zero, not the default.
type Config struct {
	// Quantile is the quantile of the forecast's largest demand over the
	// horizon the plan keeps powered (Forecast.Upper); the forecaster is
	// asked for it and Plan checks the forecast it gets carries it.
	// Default: 0.995.
	Quantile float64
	// Buffer is the number of nodes kept powered on top of the forecast's
	// upper bound. Default: 0 (the quantile is the margin).
	Buffer int
	// DownDelay is the down-side hysteresis: nodes are powered down only
	// after the target has stayed below the powered count for this long, and
	// then to the highest target seen meanwhile. 0 powers down at once.
	// Default: 30m.
	DownDelay time.Duration
	// DownMargin: a power-down happens only when it frees more than this
	// many nodes. Default: 0.
	DownMargin int
	// MinPowered is the fewest nodes kept powered, whatever the forecast.
	// Default: 1.
	MinPowered int
	// MaxTransitionsPerHour caps the power transitions (ups and downs, one
	// per node) in any hour; power-downs stop at the cap, power-ups for a
	// shortfall do not. 0: no cap. Default: 60 (on Philly's 420 nodes it
	// costs under 0.1 point of powered-node utilization and stops a
	// monitoring outage that reads as zero demand from powering down most
	// of the cluster at once).
	MaxTransitionsPerHour int
	// WakeLatency is how long a powered-up node takes to take jobs. A plan
	// must look at least this far ahead, so the forecast's horizon must
	// cover it (and should cover one decision step more). Default: 10m.
	WakeLatency time.Duration
}

// Defaults of DefaultConfig, chosen on the two weeks before the Philly test
// window (2017-11-17 .. 30) and checked on the test window by the package's
// replay test.
const (
	DefaultQuantile              = 0.995
	DefaultDownDelay             = 30 * time.Minute
	DefaultMinPowered            = 1
	DefaultWakeLatency           = 10 * time.Minute
	DefaultMaxTransitionsPerHour = 60
)

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Quantile:              DefaultQuantile,
		DownDelay:             DefaultDownDelay,
		MinPowered:            DefaultMinPowered,
		WakeLatency:           DefaultWakeLatency,
		MaxTransitionsPerHour: DefaultMaxTransitionsPerHour,
	}
}

// RegisterFlags sets c to the defaults and registers its flags on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	*c = DefaultConfig()
	fs.Float64Var(&c.Quantile, "ces.quantile", c.Quantile, "keep powered this quantile of the forecast's largest demand over the horizon, in (0, 1)")
	fs.IntVar(&c.Buffer, "ces.buffer", c.Buffer, "nodes kept powered on top of the forecast quantile")
	fs.DurationVar(&c.DownDelay, "ces.down-delay", c.DownDelay, "power down only after the target stayed below the powered count this long")
	fs.IntVar(&c.DownMargin, "ces.down-margin", c.DownMargin, "power down only when that frees more than this many nodes")
	fs.IntVar(&c.MinPowered, "ces.min-powered", c.MinPowered, "never fewer powered nodes than this")
	fs.IntVar(&c.MaxTransitionsPerHour, "ces.max-transitions-per-hour", c.MaxTransitionsPerHour, "cap on power transitions (up and down) per hour; power-ups for a shortfall ignore it; 0: no cap")
	fs.DurationVar(&c.WakeLatency, "ces.wake-latency", c.WakeLatency, "time a powered-up node takes to accept jobs")
}

// Validate reports the first invalid field, named by its flag.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.Quantile) || c.Quantile <= 0 || c.Quantile >= 1:
		return fmt.Errorf("ces: --ces.quantile: %v is not in (0, 1)", c.Quantile)
	case c.Buffer < 0:
		return fmt.Errorf("ces: --ces.buffer: %d is negative", c.Buffer)
	case c.DownDelay < 0:
		return fmt.Errorf("ces: --ces.down-delay: %v is negative", c.DownDelay)
	case c.DownMargin < 0:
		return fmt.Errorf("ces: --ces.down-margin: %d is negative", c.DownMargin)
	case c.MinPowered < 0:
		return fmt.Errorf("ces: --ces.min-powered: %d is negative", c.MinPowered)
	case c.MaxTransitionsPerHour < 0:
		return fmt.Errorf("ces: --ces.max-transitions-per-hour: %d is negative", c.MaxTransitionsPerHour)
	case c.WakeLatency < 0:
		return fmt.Errorf("ces: --ces.wake-latency: %v is negative", c.WakeLatency)
	}
	return nil
}
