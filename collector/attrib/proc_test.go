package attrib

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

// testUsers is the user database of the fixture trees; uid 1000 is unknown
// to it.
func testUsers(calls *int) LookupUser {
	names := map[int64]string{0: "root", 1001: "carol", 1002: "bob", 1003: "dave", 1004: "erin"}
	return func(uid int64) (string, error) {
		if calls != nil {
			*calls++
		}
		if n, ok := names[uid]; ok {
			return n, nil
		}
		return "", fmt.Errorf("unknown uid %d", uid)
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name    string
		root    string
		pid     uint32
		want    Process
		wantErr string // substring; "" for none
		vanish  bool
		// wantEnviron: the reason of the environ ignored for the
		// cgroup's job (Process.EnvironErr), or of wantErr.
		wantEnviron string
	}{
		{
			name: "cgroup v1, user from environ, CUDA_VISIBLE_DEVICES",
			root: "testdata/proc-v1", pid: 1234,
			want: Process{PID: 1234, JobID: "1234", User: "alice", Source: schemas.AllocCgroup, CUDAVisibleDevices: []string{"0", "1"}},
		},
		{
			name: "cgroup v1 of a second slurmd, batch step, user from the cgroup's uid",
			root: "testdata/proc-v1", pid: 2001,
			want: Process{PID: 2001, JobID: "77", User: "root", Source: schemas.AllocCgroup},
		},
		{
			name: "not in a Slurm job",
			root: "testdata/proc-v1", pid: 3000,
			want: Process{PID: 3000, CUDAVisibleDevices: []string{"0"}},
		},
		{
			name: "array task: cgroup names the task's own job id",
			root: "testdata/proc-v1", pid: 4000,
			want: Process{PID: 4000, JobID: "1234_7", User: "bob", Source: schemas.AllocCgroup},
		},
		{
			name: "malformed job id in the cgroup",
			root: "testdata/proc-v1", pid: 5000,
			wantErr: `pid 5000: attrib: cgroup line 1: path component "job_12x4"`,
		},
		{
			name: "cgroup lines naming two jobs",
			root: "testdata/proc-v1", pid: 5100,
			wantErr: "cgroup line 2: job 1235, but line 1 names job 1234",
		},
		{
			name: "malformed SLURM_JOB_ID in the environment: the cgroup's job",
			root: "testdata/proc-v1", pid: 5200,
			want:        Process{PID: 5200, JobID: "1234", Source: schemas.AllocCgroup},
			wantEnviron: environBadID,
		},
		{
			name: "vanished",
			root: "testdata/proc-v1", pid: 9999,
			vanish: true,
		},
		{
			name: "cgroup v2, user from status",
			root: "testdata/proc-v2", pid: 1234,
			want: Process{PID: 1234, JobID: "1234", User: "carol", Source: schemas.AllocCgroup},
		},
		{
			name: "environ only (cgroup namespace hides the path)",
			root: "testdata/proc-v2", pid: 1300,
			want: Process{PID: 1300, JobID: "555", User: "dave", Source: schemas.AllocEnviron,
				CUDAVisibleDevices: []string{"GPU-6ad9e0bd-1234-5678-9abc-def012345678", "MIG-0f3b2a10-aaaa-bbbb-cccc-0123456789ab"}},
		},
		{
			name: "environ only, array task, no visible devices",
			root: "testdata/proc-v2", pid: 1400,
			want: Process{PID: 1400, JobID: "900_3", User: "erin", Source: schemas.AllocEnviron, CUDAVisibleDevices: []string{}},
		},
		{
			name: "cgroup and environ disagree: the cgroup wins, the environ's user is not the job's",
			root: "testdata/proc-v2", pid: 1500,
			want: Process{PID: 1500, JobID: "1234", User: "carol", Source: schemas.AllocCgroup},
		},
		{
			name: "status missing: user unknown",
			root: "testdata/proc-v2", pid: 1600,
			want: Process{PID: 1600, JobID: "1234", Source: schemas.AllocCgroup},
		},
		{
			name: "SLURM_ARRAY_TASK_ID set by hand in a job: the cgroup's job, user from status",
			root: "testdata/proc-v2", pid: 1800,
			want:        Process{PID: 1800, JobID: "1234", User: "carol", Source: schemas.AllocCgroup},
			wantEnviron: environIncompleteArray,
		},
		{
			name: "empty SLURM_JOB_ID: the cgroup's job",
			root: "testdata/proc-v2", pid: 1810,
			want:        Process{PID: 1810, JobID: "1234", User: "carol", Source: schemas.AllocCgroup},
			wantEnviron: environBadID,
		},
		{
			name: "malformed environ and no job in the cgroup",
			root: "testdata/proc-v2", pid: 1820,
			wantErr:     "pid 1820: attrib: environ entry 3: SLURM_ARRAY_TASK_ID without SLURM_ARRAY_JOB_ID",
			wantEnviron: environIncompleteArray,
		},
		{
			name: "container cgroup",
			root: "testdata/proc-v2", pid: 1700,
			want: Process{PID: 1700},
		},
		{
			name: "no such proc root",
			root: "testdata/nonexistent", pid: 1,
			vanish: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewResolver(tt.root, testUsers(nil))
			got, err := r.Resolve(tt.pid)
			if errors.Is(err, ErrVanished) != tt.vanish {
				t.Fatalf("Resolve(%d) error = %v; want vanished %v", tt.pid, err, tt.vanish)
			}
			if tt.vanish {
				return
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve(%d) error = %v; want one containing %q", tt.pid, err, tt.wantErr)
				}
				if r := environReason(err); r != tt.wantEnviron {
					t.Errorf("environReason(%v) = %q; want %q", err, r, tt.wantEnviron)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%d) error = %v", tt.pid, err)
			}
			if r := environReason(got.EnvironErr); r != tt.wantEnviron || (r != "") != (got.EnvironErr != nil) {
				t.Errorf("Resolve(%d).EnvironErr = %v (reason %q); want reason %q", tt.pid, got.EnvironErr, r, tt.wantEnviron)
			}
			got.EnvironErr = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Resolve(%d) = %+v; want %+v", tt.pid, got, tt.want)
			}
		})
	}
}

func TestResolveCachesUsers(t *testing.T) {
	calls := 0
	r := NewResolver("testdata/proc-v2", testUsers(&calls))
	for range 3 {
		for _, pid := range []uint32{1234, 1500} {
			if p, err := r.Resolve(pid); err != nil || p.User != "carol" {
				t.Fatalf("Resolve(%d) = %+v, %v; want user carol", pid, p, err)
			}
		}
	}
	if calls != 1 {
		t.Errorf("lookups = %d; want 1", calls)
	}
}

func TestResolveWithoutLookup(t *testing.T) {
	r := NewResolver("testdata/proc-v1", nil)
	p, err := r.Resolve(2001)
	if err != nil || p.JobID != "77" || p.User != "" {
		t.Errorf("Resolve(2001) = %+v, %v; want job 77, no user", p, err)
	}
}

// TestResolveRealProc reads this test's own process from the host's /proc:
// real /proc files report size 0 and must still be read whole.
func TestResolveRealProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/cgroup"); err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	pid := uint32(os.Getpid())
	r := NewResolver("/proc", LookupSystemUser)
	p, err := r.Resolve(pid)
	if err != nil {
		t.Fatalf("Resolve(self) = %v", err)
	}
	if p.PID != pid {
		t.Errorf("Resolve(self).PID = %d; want %d", p.PID, pid)
	}
	if (p.JobID == "") != (p.Source == 0) {
		t.Errorf("Resolve(self) = %+v: job and source disagree", p)
	}
	// No PID reaches 2^32-1 (pid_max is at most 2^22).
	if _, err := r.Resolve(1<<32 - 1); !errors.Is(err, ErrVanished) {
		t.Errorf("Resolve(2^32-1) error = %v; want ErrVanished", err)
	}
}
