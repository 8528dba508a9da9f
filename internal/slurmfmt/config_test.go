package slurmfmt

import (
	"reflect"
	"strings"
	"testing"
)

func TestConfigValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want map[string]ConfigValue
		err  string
	}{
		{name: "scontrol's layout", in: "Configuration data as of 2026-11-23T21:50:12\nAccountingStorageBackupHost = (null)\nPrivateData             = jobs,usage\nSlurmUser               = slurm(64030)\nSuspendExcNodes         = (null)\n\nSlurmctld(primary) at head is UP\n",
			want: map[string]ConfigValue{"PrivateData": {"jobs,usage", 3}, "SlurmUser": {"slurm(64030)", 4}, "SuspendExcNodes": {"", 5}}},
		{name: "a value holding =", in: "SuspendExcNodes = a=b\n", want: map[string]ConfigValue{"SuspendExcNodes": {"a=b", 1}}},
		{name: "not printed", in: "Other = 1\n", want: map[string]ConfigValue{}},
		{name: "twice", in: "SlurmUser = root(0)\nPrivateData = none\nSlurmUser = slurm(1)\n", err: "line 3: SlurmUser again (first on line 1)"},
		{name: "a line too long", in: "SlurmUser = " + strings.Repeat("x", 1<<20) + "\n", err: "token too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigValues([]byte(tc.in), "PrivateData", "SlurmUser", "SuspendExcNodes")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("ConfigValues error = %v; want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ConfigValues = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
