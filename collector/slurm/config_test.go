package slurm

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // "" for valid
	}{
		{"defaults", Config{Cluster: "c"}, ""},
		{"no cluster", Config{}, "cluster name is empty"},
		{"negative poll", Config{Cluster: "c", PollInterval: -time.Second}, "--slurm.poll-interval: -1s is negative"},
		{"accounting, default retention", Config{Cluster: "c", Accounting: true}, ""},
		{"accounting, short retention", Config{Cluster: "c", Accounting: true, Retention: 5 * time.Minute}, "--slurm.retention: 5m0s is too short"},
		{"accounting, slow reads", Config{Cluster: "c", Accounting: true, Retention: 10 * time.Minute, AccountingInterval: 5 * time.Minute}, "want over 10m0s"},
		{"short retention, no accounting", Config{Cluster: "c", Retention: time.Minute}, ""},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: Validate() = %v; want %q", tt.name, err, tt.want)
		}
	}
}
