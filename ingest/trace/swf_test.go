package trace_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/heliostat-dev/heliostat/ingest/trace"
)

func readSWFFile(t *testing.T, path string) *trace.Trace {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := trace.ReadSWF(f)
	if err != nil {
		t.Fatalf("ReadSWF(%s) error: %v", path, err)
	}
	return tr
}

func TestReadSWFHeader(t *testing.T) {
	for _, tc := range []struct {
		file       string
		maxProcs   int
		timeZone   string
		jobs       int
		firstStart time.Time // Submit of the first job
	}{
		// MaxProcs wins over MaxNodes; a "; UnixStartTime" after the first job is a comment.
		{swfFixture(t, "header.swf"), 128, "Europe/Stockholm", 8, time.Unix(1_000_000_000, 0).UTC()},
		// MaxProcs -1 (unknown) falls back to MaxNodes.
		{swfFixture(t, "maxnodes.swf"), 240, "", 1, time.Unix(0, 0).UTC()},
		// No header: times from 0, machine size unknown; CRLF and no final newline.
		{swfFixture(t, "nostart.swf"), 0, "", 2, time.Unix(0, 0).UTC()},
		{swfFixture(t, "empty.swf"), 0, "", 0, time.Time{}},
	} {
		tr := readSWFFile(t, tc.file)
		if tr.Format != "swf" || tr.MaxProcs != tc.maxProcs || tr.TimeZone != tc.timeZone || len(tr.Jobs) != tc.jobs {
			t.Errorf("ReadSWF(%s) = format %q, MaxProcs %d, TimeZone %q, %d jobs; want swf, %d, %q, %d",
				tc.file, tr.Format, tr.MaxProcs, tr.TimeZone, len(tr.Jobs), tc.maxProcs, tc.timeZone, tc.jobs)
		}
		if len(tr.Jobs) > 0 && !tr.Jobs[0].Submit.Equal(tc.firstStart) {
			t.Errorf("ReadSWF(%s): first Submit = %v; want %v", tc.file, tr.Jobs[0].Submit, tc.firstStart)
		}
		checkRejects(t, tc.file, tr, nil)
	}
}

func TestReadSWFJobs(t *testing.T) {
	base := time.Unix(1_000_000_000, 0).UTC()
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	sec := func(s int) time.Duration { return time.Duration(s) * time.Second }
	// Jobs 5 to 8 differ only in line, id, times and state.
	same := func(line int, id string, submit int, state string) trace.Job {
		return trace.Job{Line: line, ID: id, User: "8", Group: "1", Executable: "4", Queue: "1/1", State: state,
			Submit: at(submit), Start: at(submit + 1), End: at(submit + 3), Run: sec(2), Wait: sec(1), ReqTime: sec(60),
			Procs: 1, ReqProcs: 1, GPUs: -1, Nodes: -1, ReqMem: -1}
	}
	want := []trace.Job{
		{Line: 10, ID: "1", User: "7", Group: "2", Executable: "3", Queue: "1", State: "COMPLETED",
			Submit: at(0), Start: at(10), End: at(110), Run: sec(100), Wait: sec(10), ReqTime: sec(3600),
			Procs: 4, ReqProcs: 4, GPUs: -1, Nodes: -1, ReqMem: 2048},
		// Wait and run unknown: no start, no end; unknown queue in partition 2.
		{Line: 11, ID: "2", User: "7", Group: "2", Executable: "", Queue: "/2", State: "CANCELLED",
			Submit: at(60), Run: -1, Wait: -1, ReqTime: sec(600), Procs: 8, ReqProcs: 8, GPUs: -1, Nodes: -1, ReqMem: -1},
		{Line: 12, ID: "3", Queue: "2/1", State: "FAILED",
			Submit: at(120), Start: at(120), End: at(150), Run: sec(30), Wait: 0, ReqTime: -1,
			Procs: 16, ReqProcs: -1, GPUs: -1, Nodes: -1, ReqMem: -1},
		// Status 3 (last partial execution) completed; run unknown: a start, no end.
		{Line: 14, ID: "4", User: "8", Group: "1", Executable: "4", Queue: "1/1", State: "COMPLETED",
			Submit: at(180), Start: at(185), Run: -1, Wait: sec(5), ReqTime: sec(60),
			Procs: 1, ReqProcs: 1, GPUs: -1, Nodes: -1, ReqMem: -1},
		same(15, "5", 240, "FAILED"), // tab-separated; status 4
		same(16, "6", 300, ""),       // status 2: outcome not known yet
		same(17, "7", 360, ""),       // status -1
		same(20, "8", 420, ""),       // status 9: not defined
	}
	checkJobs(t, "header.swf", readSWFFile(t, swfFixture(t, "header.swf")).Jobs, want)
}

func TestReadSWFRejects(t *testing.T) {
	tr := readSWFFile(t, swfFixture(t, "bad.swf"))
	checkRejects(t, "bad.swf", tr, []reject{
		{3, "bad_field_count"}, // 17 fields
		{4, "bad_field_count"}, // 19 fields
		{5, "bad_number"},      // wait "1x"
		{6, "bad_number"},      // average CPU time "abc"
		{7, "negative_submit"}, // -1: unknown, but Submit must be known
		{8, "negative_submit"}, // -20
		{9, "negative_value"},  // wait -2
		{10, "negative_value"}, // average CPU time -0.5
		{11, "out_of_range"},   // run time beyond time.Duration
		{12, "out_of_range"},   // requested time beyond int64
		{14, "bad_number"},     // allocated processors "4.0"
	})
	var ids []string
	for _, j := range tr.Jobs {
		ids = append(ids, j.ID)
	}
	if got := strings.Join(ids, ","); got != "1,12" { // 12 has a decimal average CPU time: fine
		t.Errorf("ReadSWF(bad.swf) kept jobs %s; want 1,12", got)
	}
}

// TestReadSWFOutOfRange: a requested time or processor count job_events
// cannot store in 32 bits, or a job number too long for a job id, rejects its line as
// out_of_range or bad_string, naming the field, instead of being stored
// as unknown.
func TestReadSWFOutOfRange(t *testing.T) {
	const good = "2 0 10 10 4 -1 -1 4 60 -1 1 3 -1 -1 1 -1 -1 -1\n"
	for _, tc := range []struct {
		line, reason, field string
	}{
		{"1 0 10 937 5000000000 -1 -1 -1 60 -1 1 3 -1 -1 1 -1 -1 -1", "out_of_range", "field 5 (allocated processors)"},
		{"1 0 10 937 4 -1 -1 4294967297 60 -1 1 3 -1 -1 1 -1 -1 -1", "out_of_range", "field 8 (requested processors)"},
		{"1 0 10 937 4 -1 -1 4 4294967296 -1 1 3 -1 -1 1 -1 -1 -1", "out_of_range", "field 9 (requested time)"},
		{strings.Repeat("0", 1005) + "1 0 10 937 4 -1 -1 4 60 -1 1 3 -1 -1 1 -1 -1 -1", "bad_string", "field 1 (job number)"},
	} {
		tr, err := trace.ReadSWF(strings.NewReader(tc.line + "\n" + good))
		if err != nil {
			t.Fatalf("ReadSWF(%.60q) error: %v", tc.line, err)
		}
		checkRejects(t, tc.field, tr, []reject{{1, tc.reason}})
		if len(tr.Errors) == 1 && !strings.HasPrefix(tr.Errors[0].Detail, tc.field) {
			t.Errorf("ReadSWF(%.60q): detail %q; want it to name %s", tc.line, tr.Errors[0].Detail, tc.field)
		}
		if len(tr.Jobs) != 1 || tr.Jobs[0].ID != "2" {
			t.Errorf("ReadSWF(%.60q): jobs %+v; want job 2 only", tc.line, tr.Jobs)
		}
	}
	// The largest accepted.
	in := "1 0 10 10 4294967295 -1 -1 4294967295 4294967295 -1 1 3 -1 -1 1 -1 -1 -1\n"
	if tr, err := trace.ReadSWF(strings.NewReader(in)); err != nil || len(tr.Jobs) != 1 || tr.Jobs[0].Procs != 4294967295 {
		t.Errorf("ReadSWF(%q) = %+v, %v; want the job", in, tr, err)
	}
}

func TestReadSWFManyRejects(t *testing.T) {
	var b strings.Builder
	b.WriteString("; UnixStartTime: 100\n")
	for range 250 {
		b.WriteString("1 2 3\n")
	}
	b.WriteString(strings.Repeat("9", 70_000) + " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n") // line 252
	b.WriteString(";" + strings.Repeat(" note", 20_000) + "\n")                         // line 253: a long comment is no reject
	b.WriteString("1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0")                                // line 254, kept
	tr, err := trace.ReadSWF(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("ReadSWF error: %v", err)
	}
	checkCounts(t, "many", tr)
	if tr.Rejected != 251 || tr.Reasons["bad_field_count"] != 250 || tr.Reasons["line_too_long"] != 1 {
		t.Errorf("ReadSWF: Rejected %d, Reasons %v; want 251: 250 bad_field_count, 1 line_too_long", tr.Rejected, tr.Reasons)
	}
	if tr.Errors[0].Line != 2 || tr.Errors[99].Line != 101 {
		t.Errorf("ReadSWF: kept errors from line %d to %d; want 2 to 101", tr.Errors[0].Line, tr.Errors[99].Line)
	}
	if len(tr.Jobs) != 1 || tr.Jobs[0].Line != 254 || tr.Jobs[0].Submit.Unix() != 100 {
		t.Errorf("ReadSWF: jobs %+v; want one, line 254, Submit 100", tr.Jobs)
	}
}

func TestReadSWFBadHeader(t *testing.T) {
	for _, in := range []string{
		"; UnixStartTime: soon\n",
		"; UnixStartTime: -5\n",
		"; UnixStartTime: 999999999999999\n",
		"; MaxProcs: many\n",
		"; MaxNodes: -3\n",
		"; MaxNodes: 99999999999999999999\n",
		"; MaxProcs: 4294967296\n",          // more than a job event holds
		"; MaxProcs: 9223372036854775807\n", // would overflow a capacity sweep
		"; MaxNodes: 4294967296 (all of them)\n",
	} {
		tr, err := trace.ReadSWF(strings.NewReader("; Version: 2.2\n" + in + "1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"))
		field, _, _ := strings.Cut(strings.TrimPrefix(in, "; "), ":")
		if !errors.Is(err, trace.ErrBadHeader) || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), field) {
			t.Errorf("ReadSWF(%q) = %v, %v; want ErrBadHeader naming line 2 and %s", in, tr, err, field)
		}
	}
	// Headers the reader does not use, or empty ones, are not errors; nor
	// is the largest machine a job event can describe.
	for _, in := range []string{"; MaxProcs: 4294967295\n", "; MaxProcs:\n", "; Note: anything: at all\n", ";\n", "; StartTime: Sun Jul 28\n"} {
		if _, err := trace.ReadSWF(strings.NewReader(in)); err != nil {
			t.Errorf("ReadSWF(%q) error: %v", in, err)
		}
	}
}

func TestReadSWFReadError(t *testing.T) {
	boom := errors.New("disk on fire")
	r := io.MultiReader(strings.NewReader("; MaxProcs: 4\n1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n2 0 0"), iotest.ErrReader(boom))
	tr, err := trace.ReadSWF(r)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("ReadSWF(failing reader) = %v, %v; want an error wrapping %v that names line 3", tr, err, boom)
	}
}

// swfFixture copies testdata/NAME.in to a temporary file called NAME and returns
// its path. The fixtures are kept under a different extension so that nothing
// in the tree looks like a copy of the shared SWF traces.
func swfFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".in"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
