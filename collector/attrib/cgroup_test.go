package attrib

import (
	"strconv"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

func TestParseCgroup(t *testing.T) {
	const unknown = schemas.Unknown
	tests := []struct {
		in      string
		want    Cgroup
		wantErr string
	}{
		{in: "", want: Cgroup{UID: unknown}},
		{in: "0::/\n", want: Cgroup{UID: unknown}},
		{in: "0::/slurm/uid_1000/job_1234/step_0/task_0\n", want: Cgroup{JobID: "1234", UID: 1000}},
		{in: "4:cpuset:/slurm_gpu1/uid_0/job_77/step_batch", want: Cgroup{JobID: "77", UID: 0}},
		{in: "0::/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0\n", want: Cgroup{JobID: "1234", UID: unknown}},
		{in: "0::/system.slice/slurmstepd.scope/job_0001234/step_extern\n", want: Cgroup{JobID: "1234", UID: unknown}},
		{
			in: "12:memory:/slurm/uid_5/job_9/step_0\n11:devices:/slurm/uid_5/job_9/step_0\n" +
				"2:cpu,cpuacct:/\n1:name=systemd:/system.slice/slurmd.service\n",
			want: Cgroup{JobID: "9", UID: 5},
		},
		// A later line without the uid keeps the earlier line's.
		{in: "3:devices:/slurm/uid_5/job_9\n0::/system.slice/slurmstepd.scope/job_9/step_0\n", want: Cgroup{JobID: "9", UID: 5}},
		// job_ outside a slurm component is not Slurm's.
		{in: "0::/user.slice/job_55/x\n", want: Cgroup{UID: unknown}},
		{in: "0::/system.slice/slurmd.service\n", want: Cgroup{UID: unknown}},
		{in: "0::/slurm/uid_1000\n", want: Cgroup{UID: unknown}},
		// A path may hold colons.
		{in: "0::/slurm/uid_1/job_2/a:b\n", want: Cgroup{JobID: "2", UID: 1}},
		{in: "\n\n0::/slurm/job_3\n\n", want: Cgroup{JobID: "3", UID: unknown}},

		{in: "garbage\n", wantErr: `cgroup line 1: "garbage" is not hierarchy-ID:controllers:path`},
		{in: "0::/\n1:cpu\n", wantErr: "cgroup line 2:"},
		{in: "x::/\n", wantErr: `cgroup line 1: hierarchy ID "x" is not a number`},
		{in: "0::slurm/job_1\n", wantErr: `cgroup line 1: path "slurm/job_1" is not absolute`},
		{in: "0::/slurm/uid_1/job_\n", wantErr: `cgroup line 1: path component "job_": job id "" is not`},
		{in: "0::/slurm/uid_1/job_99999999999\n", wantErr: "is not a 32-bit unsigned number"},
		{in: "0::/slurm/uid_x/job_1\n", wantErr: `cgroup line 1: path component "uid_x": uid is not a number`},
		{in: "1:a:/slurm/job_1\n2:b:/slurm/job_2\n", wantErr: "cgroup line 2: job 2, but line 1 names job 1"},
		{in: "0::/slurm/job_" + strings.Repeat("9", 200), wantErr: "..."},
	}
	for _, tt := range tests {
		got, err := ParseCgroup([]byte(tt.in))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseCgroup(%q) error = %v; want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseCgroup(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func FuzzParseCgroup(f *testing.F) {
	for _, s := range []string{
		"0::/\n",
		"12:memory:/slurm/uid_1000/job_1234/step_0/task_0\n1:name=systemd:/system.slice/slurmd.service\n",
		"0::/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0\n",
		"4:cpuset:/slurm_gpu1/uid_0/job_77/step_batch",
		"1:a:/slurm/job_1\n2:b:/slurm/job_2\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cg, err := ParseCgroup(data)
		if err != nil {
			if len(err.Error()) > 400 {
				t.Errorf("error of %d bytes: %.100s", len(err.Error()), err)
			}
			return
		}
		if cg.JobID != "" {
			if n, err := strconv.ParseUint(cg.JobID, 10, 32); err != nil || strconv.FormatUint(n, 10) != cg.JobID {
				t.Errorf("ParseCgroup(%q) job id %q is not canonical", data, cg.JobID)
			}
		}
		if cg.UID < schemas.Unknown || cg.UID > 1<<32-1 {
			t.Errorf("ParseCgroup(%q) uid %d out of range", data, cg.UID)
		}
	})
}
