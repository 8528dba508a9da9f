package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBenchIngestLogLevel: --log.level of `bench ingest` defaults to warn,
// and the help says so, and a value given is used (a bad one fails before
// anything starts).
func TestBenchIngestLogLevel(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stderr or the error
	}{
		{[]string{"bench", "ingest", "-h"}, `log level: debug, info, warn, error (default "warn")`},
		{[]string{"bench", "ingest", "--log.level", "loud"}, `--log.level "loud"`},
	} {
		var out, errs bytes.Buffer
		err := run(context.Background(), tc.args, noEnv, &out, &errs)
		if err == nil {
			t.Fatalf("heliostat %q: no error", tc.args)
		}
		if got := errs.String() + err.Error(); !strings.Contains(got, tc.want) {
			t.Errorf("heliostat %q: stderr and error %q; want %q", tc.args, got, tc.want)
		}
	}
}
