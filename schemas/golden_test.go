package schemas_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current encoder")

// goldenCase is a message whose encoding is pinned in testdata/<name>.golden.
// Exactly one of samples, events, jobs, allocs and actions is set.
type goldenCase struct {
	name    string
	samples *schemas.SampleBatch
	events  *schemas.EventBatch
	jobs    *schemas.JobEventBatch
	allocs  *schemas.AllocBatch
	actions *schemas.ActionBatch
}

func goldenCases() []goldenCase {
	return []goldenCase{
		{name: "h100_8gpu_3ticks", samples: h100Batch(3)},
		{name: "absent_metrics", samples: absentBatch()},
		{name: "mig", samples: migBatch()},
		{name: "empty", samples: &schemas.SampleBatch{}},
		{name: "timestamp_range_ends", samples: rangeEndsTSBatch()},
		{name: "events_each_type", events: eventsBatch()},
		{name: "events_empty", events: &schemas.EventBatch{Cluster: "eos", Host: "dgx-h100-017"}},
		{name: "job_lifecycle", jobs: jobBatch()},
		{name: "allocs_open_closed", allocs: allocBatch()},
		{name: "actions_plan_and_outcome", actions: actionsBatch()},
		{name: "actions_empty", actions: &schemas.ActionBatch{Cluster: "eos"}},
	}
}

func (c goldenCase) encode(t testing.TB) []byte {
	var (
		b   []byte
		err error
	)
	switch {
	case c.samples != nil:
		return encodeSamples(t, c.samples)
	case c.events != nil:
		return encodeEvents(t, c.events)
	case c.jobs != nil:
		b, err = schemas.AppendJobEventBatch(nil, c.jobs)
	case c.actions != nil:
		b, err = schemas.AppendActionBatch(nil, c.actions)
	default:
		b, err = schemas.AppendAllocBatch(nil, c.allocs)
	}
	if err != nil {
		t.Fatalf("encode %s: %v", c.name, err)
	}
	return b
}

// TestGolden pins the wire format: a change to these bytes breaks every
// consumer that has not been upgraded, so it must be deliberate (go test
// -update) and reviewed as a diff of testdata/.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join("testdata", c.name+".golden")
			got := c.encode(t)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (run go test -update to create it): %v", err)
			}
			if !bytes.Equal(got, want) {
				i := firstDiff(got, want)
				t.Errorf("encoding of %s differs from %s at byte %d of %d (got %d bytes):\ngot  % x\nwant % x",
					c.name, path, i, len(want), len(got), window(got, i), window(want, i))
			}

			// Decode the golden bytes, not the fresh encoding: old messages must
			// still read the same.
			if c.samples != nil {
				var b schemas.SampleBatch
				if err := schemas.DecodeSampleBatch(want, &b); err != nil {
					t.Fatalf("DecodeSampleBatch(%s): %v", path, err)
				}
				if got, want := normSamples(&b), normSamples(c.samples); !reflect.DeepEqual(got, want) {
					t.Errorf("DecodeSampleBatch(%s) = %+v; want %+v", path, got, want)
				}
				return
			}
			switch {
			case c.jobs != nil:
				var b schemas.JobEventBatch
				if err := schemas.DecodeJobEventBatch(want, &b); err != nil {
					t.Fatalf("DecodeJobEventBatch(%s): %v", path, err)
				}
				if !reflect.DeepEqual(&b, c.jobs) {
					t.Errorf("DecodeJobEventBatch(%s) = %+v; want %+v", path, b, *c.jobs)
				}
				return
			case c.allocs != nil:
				var b schemas.AllocBatch
				if err := schemas.DecodeAllocBatch(want, &b); err != nil {
					t.Fatalf("DecodeAllocBatch(%s): %v", path, err)
				}
				if !reflect.DeepEqual(&b, c.allocs) {
					t.Errorf("DecodeAllocBatch(%s) = %+v; want %+v", path, b, *c.allocs)
				}
				return
			case c.actions != nil:
				var b schemas.ActionBatch
				if err := schemas.DecodeActionBatch(want, &b); err != nil {
					t.Fatalf("DecodeActionBatch(%s): %v", path, err)
				}
				if !reflect.DeepEqual(&b, c.actions) {
					t.Errorf("DecodeActionBatch(%s) = %+v; want %+v", path, b, *c.actions)
				}
				return
			}
			var b schemas.EventBatch
			if err := schemas.DecodeEventBatch(want, &b); err != nil {
				t.Fatalf("DecodeEventBatch(%s): %v", path, err)
			}
			if got, want := normEvents(&b), normEvents(c.events); !reflect.DeepEqual(got, want) {
				t.Errorf("DecodeEventBatch(%s) = %+v; want %+v", path, got, want)
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// window returns up to 16 bytes of b around offset i.
func window(b []byte, i int) []byte {
	lo, hi := max(i-8, 0), min(i+8, len(b))
	if lo > hi {
		return nil
	}
	return b[lo:hi]
}
