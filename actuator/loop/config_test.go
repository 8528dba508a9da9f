package loop

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/collector"
)

// TestClusterFlag: --actuator.cluster defaults to the name the collector
// gives the cluster (HELIOSTAT_CLUSTER, else collector.DefaultCluster), so
// that an actuator and a collector left at their defaults act on the same
// jobs; the flag wins over both.
func TestClusterFlag(t *testing.T) {
	tests := []struct {
		name string
		env  string
		args []string
		want string
	}{
		{"default", "", nil, collector.DefaultCluster},
		{"environment", "helios", nil, "helios"},
		{"flag", "helios", []string{"--actuator.cluster", "venus"}, "venus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("actuator", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var c Config
			c.RegisterFlags(fs, func(k string) string {
				if k == "HELIOSTAT_CLUSTER" {
					return tt.env
				}
				return ""
			})
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if c.Cluster != tt.want {
				t.Errorf("cluster = %q; want %q", c.Cluster, tt.want)
			}
			var cc collector.Config
			cfs := flag.NewFlagSet("collector", flag.ContinueOnError)
			cc.RegisterFlags(cfs, func(k string) string {
				if k == "HELIOSTAT_CLUSTER" {
					return tt.env
				}
				return ""
			})
			if tt.args == nil && cc.Cluster != c.Cluster {
				t.Errorf("collector cluster %q, actuator cluster %q: want the same default", cc.Cluster, c.Cluster)
			}
		})
	}
	if (Config{}).withDefaults().Cluster != collector.DefaultCluster {
		t.Errorf("zero Config acts on cluster %q; want %q", Config{}.withDefaults().Cluster, collector.DefaultCluster)
	}
}

// TestMaxPassAge: --actuator.max-pass-age defaults to three intervals, and
// is refused when negative or not longer than the interval (readiness would
// fail between two good passes).
func TestMaxPassAge(t *testing.T) {
	tests := []struct {
		args    []string
		want    time.Duration
		wantErr string
	}{
		{nil, 90 * time.Second, ""},
		{[]string{"--actuator.interval", "1m"}, 3 * time.Minute, ""},
		{[]string{"--actuator.max-pass-age", "5m"}, 5 * time.Minute, ""},
		{[]string{"--actuator.max-pass-age", "-1s"}, 0, "must not be negative"},
		{[]string{"--actuator.max-pass-age", "30s"}, 0, "must be longer than --actuator.interval 30s"},
		{[]string{"--actuator.interval", "2m", "--actuator.max-pass-age", "1m"}, 0, "must be longer than --actuator.interval 2m0s"},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("actuator", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var c Config
		c.RegisterFlags(fs, nil)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		err := c.Validate()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate(%q) = %v; want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Validate(%q) = %v; want nil", tt.args, err)
		}
		if got := c.withDefaults().MaxPassAge; got != tt.want {
			t.Errorf("MaxPassAge(%q) = %v; want %v", tt.args, got, tt.want)
		}
	}
}
