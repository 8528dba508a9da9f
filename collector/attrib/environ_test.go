package attrib

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func env(entries ...string) string { return strings.Join(entries, "\x00") + "\x00" }

func TestParseEnviron(t *testing.T) {
	tests := []struct {
		in      string
		want    Environ
		wantErr string
	}{
		{in: "", want: Environ{}},
		{in: env("PATH=/bin", "HOME=/root"), want: Environ{}},
		{in: env("SLURM_JOB_ID=1234", "SLURM_JOB_USER=alice"), want: Environ{JobID: "1234", User: "alice"}},
		// No trailing NUL, and entries without "=".
		{in: "junk\x00SLURM_JOB_ID=7\x00\x00x", want: Environ{JobID: "7"}},
		{in: env("SLURM_JOBID=12"), want: Environ{JobID: "12"}},
		{in: env("SLURM_JOBID=12", "SLURM_JOB_ID=13"), want: Environ{JobID: "13"}},
		// The first of a repeated variable wins, as for getenv.
		{in: env("SLURM_JOB_ID=1", "SLURM_JOB_ID=2"), want: Environ{JobID: "1"}},
		{in: env("SLURM_JOB_ID=1", "SLURM_JOB_ID=bad"), want: Environ{JobID: "1"}},
		{
			in:   env("SLURM_ARRAY_TASK_ID=7", "SLURM_JOB_ID=1240", "SLURM_ARRAY_JOB_ID=1234"),
			want: Environ{JobID: "1240", ArrayJobID: "1234", ArrayTaskID: "7"},
		},
		{in: env("CUDA_VISIBLE_DEVICES=0,1"), want: Environ{CUDAVisibleDevices: []string{"0", "1"}}},
		{in: env("CUDA_VISIBLE_DEVICES= GPU-a , ,MIG-b"), want: Environ{CUDAVisibleDevices: []string{"GPU-a", "MIG-b"}}},
		{in: env("CUDA_VISIBLE_DEVICES="), want: Environ{CUDAVisibleDevices: []string{}}},
		{in: env("SLURM_JOB_ID=0012"), want: Environ{JobID: "12"}},

		{in: env("A=1", "SLURM_JOB_ID=12a"), wantErr: `environ entry 2: SLURM_JOB_ID: job id "12a" is not`},
		{in: env("SLURM_JOB_ID="), wantErr: "environ entry 1: SLURM_JOB_ID"},
		{in: env("SLURM_JOB_ID=-1"), wantErr: "environ entry 1: SLURM_JOB_ID"},
		{in: env("SLURM_JOB_ID=1", "SLURM_ARRAY_TASK_ID=x"), wantErr: "environ entry 2: SLURM_ARRAY_TASK_ID"},
		{in: env("SLURM_JOB_ID=1", "SLURM_ARRAY_JOB_ID=1"), wantErr: "environ entry 2: SLURM_ARRAY_JOB_ID without SLURM_ARRAY_TASK_ID"},
		{in: env("SLURM_JOB_ID=1", "B=2", "SLURM_ARRAY_TASK_ID=1"), wantErr: "environ entry 3: SLURM_ARRAY_TASK_ID without SLURM_ARRAY_JOB_ID"},
		{in: env("SLURM_ARRAY_JOB_ID=1", "SLURM_ARRAY_TASK_ID=1"), wantErr: "environ entry 1: SLURM_ARRAY_JOB_ID without SLURM_JOB_ID"},
		{in: env("SLURM_JOB_USER=\xff"), wantErr: "environ entry 1: SLURM_JOB_USER"},
	}
	for _, tt := range tests {
		got, err := ParseEnviron([]byte(tt.in))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseEnviron(%q) error = %v; want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseEnviron(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestHeliostatJobID(t *testing.T) {
	tests := []struct {
		e    Environ
		want string
	}{
		{Environ{}, ""},
		{Environ{JobID: "5"}, "5"},
		{Environ{JobID: "1240", ArrayJobID: "1234", ArrayTaskID: "7"}, "1234_7"},
	}
	for _, tt := range tests {
		if got := tt.e.HeliostatJobID(); got != tt.want {
			t.Errorf("%+v.HeliostatJobID() = %q; want %q", tt.e, got, tt.want)
		}
	}
}

func FuzzParseEnviron(f *testing.F) {
	f.Add([]byte(env("SLURM_JOB_ID=1234", "SLURM_JOB_USER=alice", "CUDA_VISIBLE_DEVICES=0,1")))
	f.Add([]byte(env("SLURM_ARRAY_TASK_ID=7", "SLURM_JOB_ID=1240", "SLURM_ARRAY_JOB_ID=1234")))
	f.Add([]byte("junk\x00SLURM_JOBID=7"))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEnviron(data)
		if err != nil {
			if environReason(err) == "" {
				t.Errorf("ParseEnviron(%q) error %v has no reason for the metric", data, err)
			}
			return
		}
		for _, id := range []string{e.JobID, e.ArrayJobID, e.ArrayTaskID} {
			if id == "" {
				continue
			}
			if n, err := strconv.ParseUint(id, 10, 32); err != nil || strconv.FormatUint(n, 10) != id {
				t.Errorf("ParseEnviron(%q): id %q is not canonical", data, id)
			}
		}
		if (e.ArrayJobID == "") != (e.ArrayTaskID == "") || e.ArrayJobID != "" && e.JobID == "" {
			t.Errorf("ParseEnviron(%q) = %+v: partial array", data, e)
		}
		if id := e.HeliostatJobID(); (id == "") != (e.JobID == "") {
			t.Errorf("ParseEnviron(%q): HeliostatJobID %q with JobID %q", data, id, e.JobID)
		}
	})
}
