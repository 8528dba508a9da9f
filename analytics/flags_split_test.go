package analytics

import (
	"flag"
	"slices"
	"testing"
	"time"
)

// TestRegisterFlagsSplit: RegisterWindowFlags adds the flags of a window's
// figures, RegisterScheduleFlags the schedule's, RegisterFlags both, with
// their defaults.
func TestRegisterFlagsSplit(t *testing.T) {
	window := []string{"analytics.capacity", "analytics.capacity-file", "analytics.lookback", "analytics.timezone"}
	schedule := []string{"analytics.interval", "analytics.settle", "analytics.windows"}
	for _, tc := range []struct {
		name     string
		register func(*Config, *flag.FlagSet)
		want     []string
	}{
		{"RegisterWindowFlags", (*Config).RegisterWindowFlags, window},
		{"RegisterScheduleFlags", (*Config).RegisterScheduleFlags, schedule},
		{"RegisterFlags", (*Config).RegisterFlags, append(append([]string{}, window...), schedule...)},
	} {
		var c Config
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		tc.register(&c, fs)
		var got []string
		fs.VisitAll(func(f *flag.Flag) { got = append(got, f.Name) })
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s registers %v; want %v", tc.name, got, tc.want)
		}
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		if fs.Lookup("analytics.timezone") != nil && (c.TimeZone != "UTC" || c.Lookback != 30*24*time.Hour) {
			t.Errorf("%s: time zone %q, lookback %v; want UTC, 720h", tc.name, c.TimeZone, c.Lookback)
		}
		if fs.Lookup("analytics.interval") != nil && (c.Interval != 15*time.Minute || c.Settle != 48*time.Hour || !slices.Equal(c.Periods, []Period{Day, Month})) {
			t.Errorf("%s: interval %v, settle %v, windows %v; want 15m, 48h, [day month]", tc.name, c.Interval, c.Settle, c.Periods)
		}
		if fs.Lookup("analytics.interval") == nil && (c.Interval != 0 || c.Periods != nil) {
			t.Errorf("%s: interval %v, windows %v; want none: no schedule", tc.name, c.Interval, c.Periods)
		}
	}
}
