package slurmadapter

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/actuator/adapter"
)

// errFailed stands for a plain error in the tables: the action failed.
var errFailed = errors.New("failed")

// class names what priorityResult's error makes of the action.
func class(err error) error {
	for _, e := range []error{adapter.ErrPartial, adapter.ErrHeld, adapter.ErrUnknownJob} {
		if errors.Is(err, e) {
			return e
		}
	}
	if err != nil {
		return errFailed
	}
	return nil
}

// TestPriorityResultFixtures reads scontrol's answers captured from a real
// Slurm 22.05 (TestCaptureUpdateReplies) and checks what SetPriority makes
// of each: the tasks the priority was set on and those left out.
func TestPriorityResultFixtures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		want    error
		applied []string // tasks of the lines that say "No error"
		leftOut []string // tasks of the other lines; "(null)" for that line
	}{
		{"array-some-held", adapter.ErrPartial, []string{"0-1,3"}, []string{"2"}},
		{"array-all-held", adapter.ErrHeld, nil, []string{"0-3"}},
		{"array-held-rest-cancelled", adapter.ErrHeld, nil, []string{"2", "(null)"}},
		// Slurm sets a running task's priority too: "No error" for 1.
		{"array-ended-running-held", adapter.ErrPartial, []string{"1-2"}, []string{"0", "3"}},
		{"array-running-only", adapter.ErrPartial, []string{"1"}, []string{"0", "2-3"}},
		{"array-long-lists", adapter.ErrPartial, []string{"0,2,4,6,8,10,12,14,16,18,20,..."}, []string{"1,3,5,7,9,11,13,15,17,19,21,..."}},
		{"job-held", adapter.ErrHeld, nil, []string{""}},
		{"job-unknown", adapter.ErrUnknownJob, nil, []string{""}},
		{"task-held", adapter.ErrHeld, nil, []string{"2"}},
		{"task-ended", adapter.ErrUnknownJob, nil, []string{"0"}},
		{"task-unknown", adapter.ErrUnknownJob, nil, []string{"9"}},
	} {
		b, err := os.ReadFile("testdata/scontrol-update/" + tc.name + ".txt")
		if err != nil {
			t.Fatal(err)
		}
		replies, err := parseUpdateReply(string(b))
		if err != nil {
			t.Errorf("parseUpdateReply(%s) = %v", tc.name, err)
			continue
		}
		var applied, leftOut []string
		for _, r := range replies {
			switch {
			case r.Job == "":
				leftOut = append(leftOut, "(null)")
			case r.applied():
				applied = append(applied, r.Tasks)
			default:
				leftOut = append(leftOut, r.Tasks)
			}
		}
		if !reflect.DeepEqual(applied, tc.applied) || !reflect.DeepEqual(leftOut, tc.leftOut) {
			t.Errorf("parseUpdateReply(%s): applied %q, left out %q; want %q, %q", tc.name, applied, leftOut, tc.applied, tc.leftOut)
		}
		err = priorityResult(replies[0].Job, 4242, replies)
		t.Logf("%s: %v", tc.name, err)
		if class(err) != tc.want {
			t.Errorf("priorityResult(%s) = %v; want %v", tc.name, err, tc.want)
		}
		// The audit record names every task left out.
		for _, r := range replies {
			if r.Job != "" && !r.applied() && !strings.Contains(err.Error(), r.String()+": "+r.Msg) {
				t.Errorf("priorityResult(%s) = %q; want it to name %s: %s", tc.name, err, r, r.Msg)
			}
		}
	}
}

func TestParseUpdateReply(t *testing.T) {
	held := "Job is in held state, pending scheduler release"
	for _, tc := range []struct {
		in   string
		want []taskReply
		err  bool
	}{
		{"17_0-1,3: No error\n17_2: " + held + "\n", []taskReply{{"17", "0-1,3", "No error"}, {"17", "2", held}}, false},
		{"17_0-1,3: No error\r\n17_2: " + held + "\r\n", []taskReply{{"17", "0-1,3", "No error"}, {"17", "2", held}}, false},
		{"scontrol: error: Slurm said something\n17_2: " + held, []taskReply{{"17", "2", held}}, false},
		{"(null): No error\n", []taskReply{{"", "", "No error"}}, false},
		{"17: Access/permission denied", []taskReply{{"17", "", "Access/permission denied"}}, false},
		{held + " for job 19\n", []taskReply{{"19", "", held}}, false},
		{"Invalid job id specified for job 999999_1", []taskReply{{"999999", "1", "Invalid job id specified"}}, false},
		{"Access/permission denied for job 17+1", []taskReply{{"17+1", "", "Access/permission denied"}}, false},
		{"17_0-1,...: No error", []taskReply{{"17", "0-1,...", "No error"}}, false},
		{"17_0-...: No error", []taskReply{{"17", "0-...", "No error"}}, false},
		{"17_10-2...: No error", []taskReply{{"17", "10-2...", "No error"}}, false},
		{"17_2: a: b", []taskReply{{"17", "2", "a: b"}}, false},
		{"", nil, true},
		{"\n\n", nil, true},
		{"scontrol: error: Unable to contact slurm controller (connect failure)\n", nil, true},
		{"17_2: " + held + "\nsomething else", nil, true},
		{"17_a: No error", nil, true},
		{"17_: No error", nil, true},
		{"_2: No error", nil, true},
		{"17_2:", nil, true},
		{"17_2: ", nil, true},
		{"17_2-: No error", nil, true},
		{"17_,2: No error", nil, true},
		{"17_....: No error", nil, true},
		{"1234567890123_1: No error", nil, true},
		{"Job is in held state for job ", nil, true},
		{"Job is in held state for job x", nil, true},
		{"for job 17", nil, true},
	} {
		got, err := parseUpdateReply(tc.in)
		if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseUpdateReply(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, ErrRecord) {
			t.Errorf("parseUpdateReply(%q) error %v does not wrap ErrRecord", tc.in, err)
		}
	}
}

func TestPriorityResult(t *testing.T) {
	held := "Job is in held state, pending scheduler release"
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"17_0-1,3: No error\n17_2: " + held, adapter.ErrPartial},
		// Applied to some, refused to others for another reason: applied,
		// the refusal named.
		{"17_0-1: No error\n17_2-3: Access/permission denied", adapter.ErrPartial},
		{"17_0: Job has already finished\n17_1-3: No error", adapter.ErrPartial},
		{"17_0-3: No error", nil},
		{"17_0-3: No error\n(null): No error", nil},
		{"17_0: Job has already finished\n17_1-3: " + held, adapter.ErrHeld},
		{"17_0: Job has already finished\n17_1-3: Job is no longer pending execution", adapter.ErrUnknownJob},
		{"17_0: Access/permission denied\n17_1-3: " + held, errFailed},
		{"Access/permission denied for job 17", errFailed},
		{"(null): No error", errFailed},
	} {
		replies, err := parseUpdateReply(tc.in)
		if err != nil {
			t.Fatalf("parseUpdateReply(%q) = %v", tc.in, err)
		}
		err = priorityResult("17", 4242, replies)
		if class(err) != tc.want {
			t.Errorf("priorityResult(%q) = %v; want %v", tc.in, err, tc.want)
		}
		if errors.Is(err, adapter.ErrPartial) && (errors.Is(err, adapter.ErrHeld) || !strings.Contains(err.Error(), "priority 4242 of job 17 set on 17_")) {
			t.Errorf("priorityResult(%q) = %q; want the tasks it was set on named, and not ErrHeld", tc.in, err)
		}
	}
}

func FuzzParseUpdateReply(f *testing.F) {
	for _, name := range updateCases {
		b, err := os.ReadFile("testdata/scontrol-update/" + name + ".txt")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("scontrol: error: x\n17_0-1,...: No error\n(null): Access/permission denied\n")
	f.Add("Access/permission denied for job 17+1")
	f.Fuzz(func(t *testing.T, s string) {
		replies, err := parseUpdateReply(s)
		if err != nil {
			if errKind(err) == "other" {
				t.Errorf("parseUpdateReply error of no kind: %v", err)
			}
			return
		}
		if len(replies) == 0 {
			t.Fatalf("parseUpdateReply(%q) = no replies, no error", s)
		}
		applied := false
		for _, r := range replies {
			if r.Msg == "" || strings.Contains(r.Msg, "\n") || r.Job == "" && r.Tasks != "" || !strings.Contains(s, r.String()) {
				t.Errorf("parseUpdateReply(%q) accepted %+v", s, r)
			}
			applied = applied || r.Job != "" && r.applied()
		}
		err = priorityResult("17", 1, replies)
		if applied != (err == nil || errors.Is(err, adapter.ErrPartial)) {
			t.Errorf("priorityResult(%q) = %v; want applied %v", s, err, applied)
		}
	})
}
