package demand

import (
	"flag"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	want := Config{
		Step: 10 * time.Minute, Horizon: time.Hour,
		TestFrom:   time.Date(2017, 12, 1, 0, 0, 0, 0, time.UTC),
		TestUntil:  time.Date(2017, 12, 15, 0, 0, 0, 0, time.UTC),
		RefitEvery: 24 * time.Hour, Ridge: 1e-3,
	}
	if c != want {
		t.Errorf("DefaultConfig() = %+v; want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("DefaultConfig().Validate() = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		c    Config
		want string // "" for valid
	}{
		{Config{}, ""},
		{Config{Horizon: 6 * time.Hour, RefitEvery: -1, HalfLife: 14 * 24 * time.Hour, Ridge: -1}, ""},
		{Config{Step: -time.Minute}, "--demand.step"},
		{Config{Horizon: -time.Hour}, "--horizon"},
		{Config{Horizon: 15 * time.Minute}, "--horizon: 15m0s is not a whole number of 10m0s steps"},
		{Config{RefitEvery: 25 * time.Minute}, "--demand.refit-every"},
		{Config{TestUntil: time.Date(2017, 11, 1, 0, 0, 0, 0, time.UTC)}, "--demand.test-until"},
		{Config{HalfLife: -time.Hour}, "--demand.half-life"},
		{Config{Ridge: math.NaN()}, "--demand.ridge"},
	}
	for _, tt := range tests {
		err := tt.c.Validate()
		if (tt.want == "" && err != nil) || (tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want))) {
			t.Errorf("Validate(%+v) = %v; want %q", tt.c, err, tt.want)
		}
	}
}

func TestConfigFlags(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("backtest-demand", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	if c != DefaultConfig() {
		t.Errorf("RegisterFlags left %+v; want the defaults", c)
	}
	err := fs.Parse([]string{"--horizon", "6h", "--demand.test-from", "2017-11-17", "--demand.test-until", "2017-12-01 12:00:00", "--demand.refit-every", "-1s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Horizon != 6*time.Hour || !c.TestFrom.Equal(time.Date(2017, 11, 17, 0, 0, 0, 0, time.UTC)) ||
		!c.TestUntil.Equal(time.Date(2017, 12, 1, 12, 0, 0, 0, time.UTC)) || c.RefitEvery != -time.Second {
		t.Errorf("after Parse = %+v", c)
	}
	if err := fs.Parse([]string{"--demand.test-from", "yesterday"}); err == nil {
		t.Errorf("Parse(--demand.test-from yesterday) = nil error; want one")
	}
}
