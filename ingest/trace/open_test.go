package trace_test

import (
	"errors"
	"io/fs"
	"reflect"
	"testing"

	"github.com/heliostat-dev/heliostat/ingest/trace"
)

func TestOpen(t *testing.T) {
	plainSWF := readSWFFile(t, swfFixture(t, "header.swf"))
	plainCSV := readHeliosFile(t, "testdata/venus_like.csv", nil)
	for _, tc := range []struct {
		path, format string
		want         *trace.Trace // nil: want an error
		err          error        // with want nil: the error it wraps
	}{
		{swfFixture(t, "header.swf"), "", plainSWF, nil},
		{swfFixture(t, "header.swf.gz"), "", plainSWF, nil},
		{swfFixture(t, "header.swf.gz"), "swf", plainSWF, nil},
		{swfFixture(t, "gzipped-anyway.swf"), "", plainSWF, nil}, // gzip found by its magic number
		{"testdata/venus_like.csv", "", plainCSV, nil},
		{"testdata/venus_like.csv.gz", "", plainCSV, nil},
		{"testdata/venus_like.csv.gz", "helios", plainCSV, nil},
		{swfFixture(t, "empty.swf"), "", &trace.Trace{Format: "swf", Reasons: map[string]int{}}, nil},
		{"testdata/empty.csv", "", nil, trace.ErrMissingColumn},
		{swfFixture(t, "header.swf"), "helios", nil, trace.ErrMissingColumn}, // the wrong reader
		{swfFixture(t, "header.swf"), "slurm", nil, trace.ErrUnknownFormat},
		{"testdata/trace.json", "", nil, trace.ErrUnknownFormat},
		{"testdata/no-such-file.swf", "", nil, fs.ErrNotExist},
		{"testdata/full.csv", "swf", &trace.Trace{Format: "swf", Rejected: 5, Reasons: map[string]int{"bad_field_count": 5}}, nil},
	} {
		got, err := trace.Open(tc.path, tc.format)
		if tc.want == nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("Open(%q, %q) error = %v; want %v", tc.path, tc.format, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%q, %q) error: %v", tc.path, tc.format, err)
			continue
		}
		if got.Errors = nil; !reflect.DeepEqual(got, withoutErrors(tc.want)) {
			t.Errorf("Open(%q, %q) = %+v; want %+v", tc.path, tc.format, got, tc.want)
		}
	}
}

func withoutErrors(tr *trace.Trace) *trace.Trace {
	c := *tr
	c.Errors = nil
	return &c
}
