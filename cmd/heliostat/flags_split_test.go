package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestFlagsSplit: the commands that characterize one window (analytics run,
// report) take the flags that shape its figures and not the schedule's,
// which they would ignore; those that run the schedule (analytics, up) take
// both, their defaults as before.
func TestFlagsSplit(t *testing.T) {
	window := []string{"-analytics.timezone", "-analytics.capacity ", "-analytics.capacity-file", "-analytics.lookback"}
	schedule := []string{"-analytics.interval", "-analytics.windows", "-analytics.settle"}
	for _, tc := range []struct {
		cmd      []string
		schedule bool
	}{
		{[]string{"analytics", "run"}, false},
		{[]string{"report"}, false},
		{[]string{"analytics"}, true},
		{[]string{"up"}, true},
	} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), append(tc.cmd, "-h"), noEnv, &out, &errb); err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%v -h = %v", tc.cmd, err)
		}
		help := out.String() + errb.String()
		for _, name := range window {
			if !strings.Contains(help, name) {
				t.Errorf("%v -h lacks %s", tc.cmd, name)
			}
		}
		for _, name := range schedule {
			if got := strings.Contains(help, name); got != tc.schedule {
				t.Errorf("%v -h names %s: %v; want %v", tc.cmd, name, got, tc.schedule)
			}
		}
		if tc.schedule {
			for _, def := range []string{"-analytics.interval duration", "(default 48h0m0s)", "(default day,month)"} {
				if !strings.Contains(help, def) {
					t.Errorf("%v -h lacks %s", tc.cmd, def)
				}
			}
			continue
		}
		for _, arg := range []string{"--analytics.interval=1m", "--analytics.windows=week", "--analytics.settle=1h"} {
			err := run(context.Background(), append(append([]string{}, tc.cmd...), arg, "--json", "--clickhouse.addr", "127.0.0.1:1"), noEnv, &out, &errb)
			if err == nil || !strings.Contains(err.Error(), "flag provided but not defined") {
				t.Errorf("%v %s = %v; want the flag refused", tc.cmd, arg, err)
			}
		}
	}
}
