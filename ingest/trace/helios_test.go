package trace_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/heliostat-dev/heliostat/ingest/trace"
	"github.com/heliostat-dev/heliostat/schemas"
)

func readHeliosFile(t *testing.T, path string, loc *time.Location) *trace.Trace {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := trace.ReadHelios(f, loc)
	if err != nil {
		t.Fatalf("ReadHelios(%s) error: %v", path, err)
	}
	return tr
}

func utc(s string) time.Time {
	v, err := time.Parse("2006-01-02 15:04:05", s)
	if err != nil {
		panic(err) // test data
	}
	return v
}

// The jobs of full.csv and shuffled.csv, which hold the same rows.
var fullJobs = []trace.Job{
	{Line: 2, ID: "101", User: "uA", Executable: "train-a", Queue: "vcX", State: "COMPLETED",
		Submit: utc("2020-09-01 00:00:00"), Start: utc("2020-09-01 00:01:00"), End: utc("2020-09-01 01:01:00"),
		Run: time.Hour, Wait: time.Minute, ReqTime: -1, Procs: 48, ReqProcs: -1, GPUs: 8, Nodes: 1, ReqMem: -1},
	{Line: 3, ID: "102", User: "uB", Queue: "vcY", State: "FAILED",
		Submit: utc("2020-09-01 00:00:30"), Start: utc("2020-09-01 00:00:30"), End: utc("2020-09-01 00:00:40"),
		Run: 10 * time.Second, Wait: 0, ReqTime: -1, Procs: 4, ReqProcs: -1, GPUs: 0, Nodes: 1, ReqMem: -1},
	// Never started: no start, end, run or wait.
	{Line: 4, ID: "103", User: "uA", Executable: "train-a", Queue: "vcX", State: "CANCELLED",
		Submit: utc("2020-09-01 00:02:00"), Run: -1, Wait: -1, ReqTime: -1, Procs: 96, ReqProcs: -1, GPUs: 16, Nodes: 2, ReqMem: -1},
	// No duration or queue: run and wait from the times; "timeout" upper-cased.
	{Line: 5, ID: "104", User: "uC", Executable: "eval", Queue: "vcY", State: "TIMEOUT",
		Submit: utc("2020-09-01 00:03:00"), Start: utc("2020-09-01 00:03:10"), End: utc("2020-09-01 00:13:10"),
		Run: 10 * time.Minute, Wait: 10 * time.Second, ReqTime: -1, Procs: 6, ReqProcs: -1, GPUs: 1, Nodes: 1, ReqMem: -1},
}

func TestReadHeliosColumns(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []trace.Job
	}{
		{"testdata/full.csv", fullJobs},
		// Columns in reverse order, plus one the reader does not know.
		{"testdata/shuffled.csv", fullJobs},
		// The columns of the Venus slice: no cpu_num, start, end or queue.
		// Decimal duration and GPU count; Slurm's "CANCELLED by <uid>".
		{"testdata/venus_like.csv", []trace.Job{
			{Line: 2, ID: "765563", User: "uH3om", Queue: "vcvGl", State: "CANCELLED", Submit: utc("2020-09-01 01:37:15"),
				Run: 24 * time.Second, Wait: -1, ReqTime: -1, Procs: -1, ReqProcs: -1, GPUs: 128, Nodes: 16, ReqMem: -1},
			{Line: 3, ID: "765565", User: "uJjMX", Queue: "vcvGl", State: "CANCELLED", Submit: utc("2020-09-01 01:37:22"),
				Run: 46520 * time.Second, Wait: -1, ReqTime: -1, Procs: -1, ReqProcs: -1, GPUs: 16, Nodes: 2, ReqMem: -1},
			{Line: 4, ID: "765566", User: "uH3om", Queue: "vcvGl", State: "NODE_FAIL", Submit: utc("2020-09-01 01:37:47"),
				Run: 500 * time.Millisecond, Wait: -1, ReqTime: -1, Procs: -1, ReqProcs: -1, GPUs: 8, Nodes: 1, ReqMem: -1},
		}},
	} {
		tr := readHeliosFile(t, tc.file, nil)
		if tr.Format != "helios" {
			t.Errorf("ReadHelios(%s).Format = %q; want helios", tc.file, tr.Format)
		}
		checkJobs(t, tc.file, tr.Jobs, tc.want)
		checkRejects(t, tc.file, tr, nil)
	}
}

func TestReadHeliosMinimal(t *testing.T) {
	// Only the required columns, a name column, a quoted cell with a comma.
	in := "submit_time,Job_ID,name\n2020-01-02 03:04:05,7,\"a,b\"\n"
	tr, err := trace.ReadHelios(strings.NewReader(in), nil)
	if err != nil {
		t.Fatalf("ReadHelios(%q) error: %v", in, err)
	}
	checkJobs(t, "minimal", tr.Jobs, []trace.Job{{Line: 2, ID: "7", Executable: "a,b", Submit: utc("2020-01-02 03:04:05"),
		Run: -1, Wait: -1, ReqTime: -1, Procs: -1, ReqProcs: -1, GPUs: -1, Nodes: -1, ReqMem: -1}})
}

func TestReadHeliosLocation(t *testing.T) {
	loc := time.FixedZone("CST", 8*3600)
	tr := readHeliosFile(t, "testdata/full.csv", loc)
	j := tr.Jobs[0]
	if want := time.Date(2020, 9, 1, 0, 0, 0, 0, loc); !j.Submit.Equal(want) || j.Submit.Location() != loc {
		t.Errorf("ReadHelios(full.csv, CST): Submit = %v; want %v", j.Submit, want)
	}
	if want := time.Date(2020, 8, 31, 17, 1, 0, 0, time.UTC); !j.End.Equal(want) {
		t.Errorf("ReadHelios(full.csv, CST): End = %v; want %v", j.End, want)
	}
}

func TestReadHeliosHeaderErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error // nil: any error
	}{
		{"", trace.ErrMissingColumn},
		{"user,submit_time\nu,2020-01-01 00:00:00\n", trace.ErrMissingColumn},
		{"job_id,user\n1,u\n", trace.ErrMissingColumn},
		{"job_id,submit_time,jobname,name\n", nil}, // two name columns: which one?
		{"job_id,\"submit_time\n", nil},            // malformed header
	} {
		if tr, err := trace.ReadHelios(strings.NewReader(tc.in), nil); err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("ReadHelios(%q) = %v, %v; want error %v", tc.in, tr, err, tc.want)
		}
	}
	// A header and nothing else is an empty trace.
	tr, err := trace.ReadHelios(strings.NewReader("job_id,submit_time\n"), nil)
	if err != nil || len(tr.Jobs) != 0 || tr.Rejected != 0 {
		t.Errorf("ReadHelios(header only) = %+v, %v; want no jobs, no error", tr, err)
	}
}

func TestReadHeliosRejects(t *testing.T) {
	const header = "job_id,state,submit_time,start_time,end_time,duration,queue,gpu_num\n"
	for _, tc := range []struct {
		row    string // line 2
		reason string
	}{
		{"1,COMPLETED,2020-01-01 00:00:00,,,5\n", "bad_field_count"},
		{"1,COMPLETED,2020-01-01 00:00:00,,,5,,,9\n", "bad_field_count"},
		{"1,COMP\"LETED,2020-01-01 00:00:00,,,5,,\n", "bad_csv"},
		{",COMPLETED,2020-01-01 00:00:00,,,5,,\n", "missing_job_id"},
		{"1,COMPLETED, ,,,5,,\n", "missing_submit"},
		{"1,COMPLETED,2020/01/01 00:00:00,,,5,,\n", "bad_time"},
		{"1,COMPLETED,2020-01-01T00:00:00,,,5,,\n", "bad_time"},
		{"1,COMPLETED,2020-13-01 00:00:00,,,5,,\n", "bad_time"},
		{"1,COMPLETED,0001-01-01 00:00:00,,,5,,\n", "bad_time"},
		{"1,COMPLETED,2020-01-01 00:00:00,yesterday,,5,,\n", "bad_time"},
		{"1,COMPLETED,2020-01-01 00:00:00,,2020-01-01,5,,\n", "bad_time"},
		{"1,COMPLETED,2020-01-01 00:00:00,,,five,,\n", "bad_number"},
		{"1,COMPLETED,2020-01-01 00:00:00,,,NaN,,\n", "bad_number"},
		{"1,COMPLETED,2020-01-01 00:00:00,,,-5,,\n", "negative_value"},
		{"1,COMPLETED,2020-01-01 00:00:00,,,1e30,,\n", "out_of_range"},
		{"1,COMPLETED,2020-01-01 00:00:00,,,5,-0.5,\n", "negative_value"},
		{"1,COMPLETED,2020-01-01 00:00:00,,,5,,1.5\n", "bad_number"},
		{"1,COMPLETED,2020-01-01 00:00:00,,,5,,-8\n", "negative_value"},
		{"1,COMPLETED,2020-01-01 00:00:00,,,5,,1e300\n", "out_of_range"},
		{"1,COMPLETED,2020-01-01 00:00:00,2020-01-01 00:10:00,2020-01-01 00:09:00,,,\n", "negative_value"},
		{"1,COMPLETED,2020-01-01 00:00:00,2019-12-31 23:59:00,,,,\n", "negative_value"},
		// Times out of order with the duration or queue given, which used to
		// be taken: the job's END was lost and it stayed RUNNING or PENDING.
		{"1,COMPLETED,2020-01-02 00:00:00,2020-01-02 00:00:00,2020-01-01 00:00:00,10,,\n", "negative_value"},
		{"1,COMPLETED,2020-01-02 00:00:00,,2020-01-01 00:00:00,,,\n", "negative_value"},
		{"1,COMPLETED,2020-01-02 00:00:00,,2020-01-01 00:00:00,10,,\n", "negative_value"},
		{"1,COMPLETED,2020-01-02 00:00:00,,2020-01-02 00:00:30,,60,\n", "negative_value"},
		{"1,COMPLETED,2020-01-02 00:00:00,2020-01-01 23:00:00,,10,0,\n", "negative_value"},
		// What job_events stores in 32 bits.
		{"1,COMPLETED,2020-01-01 00:00:00,,,5,,4294967296\n", "out_of_range"},
		{"1,COMPLETED,2020-01-01 00:00:00,,,5,,4294967296.0\n", "out_of_range"},
		{"1\xff,COMPLETED,2020-01-01 00:00:00,,,5,,\n", "bad_string"},
		{strings.Repeat("9", 1005) + ",COMPLETED,2020-01-01 00:00:00,,,5,,\n", "bad_string"},
		{"1,COMPLETED\xc3,2020-01-01 00:00:00,,,5,,\n", "bad_string"},
	} {
		// The bad row sits between two good ones; the last is on line 3.
		in := header + tc.row + "2,COMPLETED,2020-01-01 00:00:00,,,7.25,1.0,8.0\n"
		tr, err := trace.ReadHelios(strings.NewReader(in), nil)
		if err != nil {
			t.Errorf("ReadHelios(%q) error: %v", tc.row, err)
			continue
		}
		checkRejects(t, tc.row, tr, []reject{{2, tc.reason}})
		if len(tr.Jobs) != 1 || tr.Jobs[0].ID != "2" || tr.Jobs[0].Line != 3 || tr.Jobs[0].Run != 7250*time.Millisecond ||
			tr.Jobs[0].Wait != time.Second || tr.Jobs[0].GPUs != 8 || !tr.Jobs[0].Start.Equal(utc("2020-01-01 00:00:01")) {
			t.Errorf("ReadHelios(%q): jobs %+v; want job 2 of line 3, 7.25s run, 1s wait, 8 GPUs", tc.row, tr.Jobs)
		}
	}
}

// TestReadHeliosOrderDetail: a row whose times are out of order is named
// with the two times and where each came from.
func TestReadHeliosOrderDetail(t *testing.T) {
	const header = "job_id,submit_time,start_time,end_time,duration,queue\n"
	for _, tc := range []struct{ row, want string }{
		{"1,2020-01-02 00:00:00,2020-01-02 00:00:00,2020-01-01 00:00:00,10,", "end_time 2020-01-01 00:00:00 before start_time 2020-01-02 00:00:00"},
		{"1,2020-01-02 00:00:00,,2020-01-01 00:00:00,10,", "end_time 2020-01-01 00:00:00 before submit_time 2020-01-02 00:00:00"},
		{"1,2020-01-02 00:00:00,,2020-01-02 00:00:30,,60", "end_time 2020-01-02 00:00:30 before submit_time + queue 2020-01-02 00:01:00"},
		{"1,2020-01-02 00:00:00,2020-01-01 23:00:00,,10,0", "start_time 2020-01-01 23:00:00 before submit_time 2020-01-02 00:00:00"},
	} {
		tr, err := trace.ReadHelios(strings.NewReader(header+tc.row+"\n"), nil)
		if err != nil || len(tr.Errors) != 1 || tr.Errors[0].Detail != tc.want {
			t.Errorf("ReadHelios(%q) = %+v, %v; want one reject %q", tc.row, tr, err, tc.want)
		}
	}
}

// TestReadHeliosBadStrings: a string cell that a job event cannot hold (not
// UTF-8, over schemas.MaxStringLen bytes) rejects its row, named, instead of
// stopping the import at the encoder.
func TestReadHeliosBadStrings(t *testing.T) {
	const header = "job_id,user,vc,job_name,state,submit_time,duration\n"
	long := strings.Repeat("a", schemas.MaxStringLen+1)
	for _, tc := range []struct {
		row, field string
	}{
		{"1,u\xff\xfe,v,n,COMPLETED,2020-09-01 01:37:15,24", "user"},
		{"1,u,v\xc3,n,COMPLETED,2020-09-01 01:37:15,24", "vc"},
		{"1,u,v,\xed\xa0\x80,COMPLETED,2020-09-01 01:37:15,24", "job_name"}, // a UTF-16 surrogate
		{"1,u,v," + long + ",COMPLETED,2020-09-01 01:37:15,24", "job_name"},
		{"1,u," + long + ",n,COMPLETED,2020-09-01 01:37:15,24", "vc"},
		{"1,u,v,n,COMPLETED\x80,2020-09-01 01:37:15,24", "state"},
		{strings.Repeat("7", 1005) + ",u,v,n,COMPLETED,2020-09-01 01:37:15,24", "job_id"},
	} {
		in := header + tc.row + "\n2,u,v,n,COMPLETED,2020-09-01 01:37:15,24\n"
		tr, err := trace.ReadHelios(strings.NewReader(in), nil)
		if err != nil {
			t.Fatalf("ReadHelios(%.60q) error: %v", tc.row, err)
		}
		checkRejects(t, tc.field, tr, []reject{{2, "bad_string"}})
		if len(tr.Errors) == 1 && !strings.HasPrefix(tr.Errors[0].Detail, tc.field+" ") {
			t.Errorf("ReadHelios(%.60q): detail %q; want it to name %s", tc.row, tr.Errors[0].Detail, tc.field)
		}
		if len(tr.Jobs) != 1 || tr.Jobs[0].ID != "2" {
			t.Errorf("ReadHelios(%.60q): jobs %+v; want job 2 only", tc.row, tr.Jobs)
		}
	}
	// The longest accepted: a 1004-byte id and 1024-byte strings.
	id, name := strings.Repeat("7", 1004), strings.Repeat("ü", schemas.MaxStringLen/2)
	in := header + id + ",u,v," + name + ",COMPLETED,2020-09-01 01:37:15,24\n"
	tr, err := trace.ReadHelios(strings.NewReader(in), nil)
	if err != nil || len(tr.Jobs) != 1 || tr.Jobs[0].ID != id || tr.Jobs[0].Executable != name {
		t.Errorf("ReadHelios(longest strings) = %+v, %v; want the job", tr, err)
	}
}

func TestReadHeliosMultilineRow(t *testing.T) {
	// A quoted cell spanning lines: the next row's line number is still right.
	in := "job_id,name,submit_time\n1,\"two\nlines\",2020-01-01 00:00:00\n2,x,bad\n3,y,2020-01-01 00:00:00\n"
	tr, err := trace.ReadHelios(strings.NewReader(in), nil)
	if err != nil {
		t.Fatalf("ReadHelios error: %v", err)
	}
	checkRejects(t, "multiline", tr, []reject{{4, "bad_time"}})
	if len(tr.Jobs) != 2 || tr.Jobs[0].Line != 2 || tr.Jobs[1].Line != 5 {
		t.Errorf("ReadHelios: jobs %+v; want lines 2 and 5", tr.Jobs)
	}
}

// TestReadHeliosUnclosedQuote: a quote left open takes the rest of the file
// into its cell; every line it swallowed is rejected and counted, not only
// the one it opened on.
func TestReadHeliosUnclosedQuote(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []reject
		jobs     int
	}{
		{"to the end", "job_id,name,submit_time\n1,a,2020-01-01 00:00:00\n2,\"oops,2020-01-01 00:00:01\n3,c,2020-01-01 00:00:02\n4,d,2020-01-01 00:00:03\n",
			[]reject{{3, "bad_csv"}, {4, "bad_csv"}, {5, "bad_csv"}}, 1},
		{"without a last newline", "job_id,name,submit_time\n1,\"oops,2020-01-01 00:00:01\n2,c,2020-01-01 00:00:02",
			[]reject{{2, "bad_csv"}, {3, "bad_csv"}}, 0},
		{"closed badly on a later line", "job_id,name,submit_time\n1,\"oops,2020-01-01 00:00:01\n2,\"c\"x,2020-01-01 00:00:02\n3,d,2020-01-01 00:00:03\n",
			[]reject{{2, "bad_csv"}, {3, "bad_csv"}}, 1},
	} {
		tr, err := trace.ReadHelios(strings.NewReader(tc.in), nil)
		if err != nil {
			t.Fatalf("%s: ReadHelios error: %v", tc.name, err)
		}
		checkRejects(t, tc.name, tr, tc.want)
		if len(tr.Jobs) != tc.jobs || tr.Rejected != len(tc.want) {
			t.Errorf("%s: %d jobs, %d rejected; want %d, %d", tc.name, len(tr.Jobs), tr.Rejected, tc.jobs, len(tc.want))
		}
	}
}

func TestReadHeliosReadError(t *testing.T) {
	boom := errors.New("disk on fire")
	r := io.MultiReader(strings.NewReader("job_id,submit_time\n1,2020-01-01 00:00:00\n"), iotest.ErrReader(boom))
	tr, err := trace.ReadHelios(r, nil)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("ReadHelios(failing reader) = %v, %v; want an error wrapping %v that names line 2", tr, err, boom)
	}
}

// TestReadHeliosBOM: a byte-order mark before the header is dropped, also
// before a quoted first cell, which a CSV reader would take for a bare quote.
func TestReadHeliosBOM(t *testing.T) {
	for _, in := range []string{
		"\uFEFFjob_id,submit_time\n1,2020-01-01 00:00:00\n",
		"\uFEFF\"job_id\",\"submit_time\"\n1,2020-01-01 00:00:00\n",
		"\uFEFF\"Job_ID\",submit_time\r\n\"1\",\"2020-01-01 00:00:00\"\r\n",
	} {
		tr, err := trace.ReadHelios(strings.NewReader(in), nil)
		if err != nil {
			t.Errorf("ReadHelios(%q) error: %v", in, err)
			continue
		}
		checkRejects(t, fmt.Sprintf("%q", in), tr, nil)
		if len(tr.Jobs) != 1 || tr.Jobs[0].ID != "1" || tr.Jobs[0].Line != 2 || !tr.Jobs[0].Submit.Equal(utc("2020-01-01 00:00:00")) {
			t.Errorf("ReadHelios(%q) jobs %+v; want job 1 on line 2", in, tr.Jobs)
		}
	}
}
