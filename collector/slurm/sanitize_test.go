package slurm

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/heliostat-dev/heliostat/schemas"
)

func TestSanitize(t *testing.T) {
	long := strings.Repeat("é", schemas.MaxStringLen) // 2 bytes a rune: cut between runes
	for _, tc := range []struct {
		name string
		edit func(e *schemas.JobEvent)
		want []stringChange
	}{
		{"clean", func(*schemas.JobEvent) {}, nil},
		{"long name", func(e *schemas.JobEvent) { e.Name = long }, []stringChange{{"job_name", alteredTruncated}}},
		{"bad bytes in the work dir", func(e *schemas.JobEvent) { e.WorkDir = "/home/\xffx" }, []stringChange{{"work_dir", alteredInvalidUTF8}}},
		{"both, and a node", func(e *schemas.JobEvent) {
			e.Account = "\xfe" + long
			e.Nodes = []string{"gpu1", "gpu\xff"}
		}, []stringChange{{"account", alteredInvalidUTF8}, {"account", alteredTruncated}, {"nodes", alteredInvalidUTF8}}},
	} {
		e := schemas.JobEvent{JobID: "7", Name: "train", WorkDir: "/home/a", Nodes: []string{"gpu1"}}
		tc.edit(&e)
		got := sanitize(&e)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: sanitize = %v; want %v", tc.name, got, tc.want)
		}
		for _, s := range append([]string{e.JobID, e.Name, e.WorkDir, e.Account}, e.Nodes...) {
			if len(s) > schemas.MaxStringLen || !utf8.ValidString(s) {
				t.Errorf("%s: %d bytes, valid %v after sanitize", tc.name, len(s), utf8.ValidString(s))
			}
		}
	}
}

// TestSourceCountsAlteredStrings: a job name longer than the wire carries is
// cut, counted once for each message that carries it, and not again on a
// listing that publishes nothing.
func TestSourceCountsAlteredStrings(t *testing.T) {
	name := strings.Repeat("n", schemas.MaxStringLen+10)
	listing := []byte(`{"jobs": [{"job_id": 9, "job_state": "PENDING", "submit_time": 1795304113, "name": "` + name + `", "user_name": "alice"}]}`)
	clock := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	rec := newRecorder(t, testCluster)
	cfg := Config{Cluster: testCluster, StateFile: filepath.Join(t.TempDir(), "state.json")}
	src, err := New(cfg, rec, testLogger(t), prometheus.NewRegistry(), func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		clock = clock.Add(30 * time.Second)
		if err := src.apply(context.Background(), listing, clock); err != nil {
			t.Fatal(err)
		}
	}
	evs := rec.jobEvents("9")
	if len(evs) != 1 || evs[0].Name != name[:schemas.MaxStringLen] {
		t.Fatalf("job 9: %d events, name of %d bytes; want one SUBMIT with the name cut to %d", len(evs), len(evs[0].Name), schemas.MaxStringLen)
	}
	if got := testutil.ToFloat64(src.m.altered.WithLabelValues("job_name", alteredTruncated)); got != 1 {
		t.Errorf("heliostat_slurm_strings_altered_total{field=job_name,change=truncated} = %v; want 1", got)
	}
}
