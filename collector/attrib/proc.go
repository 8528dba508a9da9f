package attrib

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/heliostat-dev/heliostat/schemas"
)

// ErrVanished means a process ended between the driver listing it and its
// /proc files being read. It is normal on a busy node; Resolve returns it
// wrapped and callers check it with errors.Is.
var ErrVanished = errors.New("attrib: process vanished")

// Size bounds of the /proc files read. environ is bounded by the kernel's
// argument limit (a quarter of the stack limit, often 2 MiB); cgroup and
// status are small.
const (
	maxCgroupBytes  = 64 << 10
	maxEnvironBytes = 8 << 20
	maxStatusBytes  = 64 << 10
	// maxCachedUsers bounds the uid → name cache; it is emptied when full.
	maxCachedUsers = 4096
)

// Process is a process's Slurm job, as Resolve found it.
type Process struct {
	PID uint32
	// JobID is the heliostat job id ("1234", array task "1234_7"); "" when
	// the process is in no Slurm job.
	JobID string
	// User is the job owner's name; "" when unknown.
	User string
	// Source is AllocCgroup when the cgroup named the job, AllocEnviron
	// when only the environment did; 0 when JobID is "".
	Source schemas.AllocSource
	// CUDAVisibleDevices is the process's CUDA_VISIBLE_DEVICES (see
	// Environ); nil when unset or unreadable.
	CUDAVisibleDevices []string
	// EnvironErr is why the process's environ could not be parsed when the
	// cgroup named the job all the same: the environ was then ignored, as
	// an unreadable one is. nil otherwise.
	EnvironErr error
}

// LookupUser maps a uid to a user name.
type LookupUser func(uid int64) (string, error)

// LookupSystemUser looks uid up in the system's user database (os/user).
func LookupSystemUser(uid int64) (string, error) {
	u, err := user.LookupId(strconv.FormatInt(uid, 10))
	if err != nil {
		return "", fmt.Errorf("attrib: look up uid %d: %w", uid, err)
	}
	return u.Username, nil
}

// Resolver finds the Slurm job of a process from the /proc files under a
// root. It is not safe for concurrent use (it caches user names).
type Resolver struct {
	root   string
	lookup LookupUser
	users  map[int64]string // "" caches a failed lookup
}

// NewResolver returns a Resolver reading root (normally /proc; the host's
// /proc mounted elsewhere when the collector runs in a container: the driver
// lists host PIDs). lookup maps uids to names when the environment does not
// name the job's user; nil means no lookups.
func NewResolver(root string, lookup LookupUser) *Resolver {
	return &Resolver{root: root, lookup: lookup, users: make(map[int64]string)}
}

// Resolve returns the Slurm job of process pid. The cgroup is preferred: it
// is where Slurm puts every process of a job, and a process cannot leave it.
// The environment is read too, for the array task and the user name, and is
// the fallback when the cgroup names no job (Slurm without cgroup task
// plugin, or a cgroup namespace hiding the path). An environ the collector
// may not read (not running as root) counts as unset, and so does a
// malformed one (an id that is not a number, SLURM_ARRAY_TASK_ID set by hand
// without SLURM_ARRAY_JOB_ID) when the cgroup names the job: Process.EnvironErr
// says why. Without a job in the cgroup a malformed environ is an error.
//
// The user is SLURM_JOB_USER, else the job owner's uid from the cgroup path,
// else the process's uid from /proc/PID/status, mapped to a name by the
// lookup; "" when none of these works.
//
// A process that is gone gives an error wrapping ErrVanished. A process in
// no Slurm job gives a Process with JobID "" and no error.
func (r *Resolver) Resolve(pid uint32) (Process, error) {
	p := Process{PID: pid}
	data, err := r.read(pid, "cgroup", maxCgroupBytes)
	if err != nil {
		return p, err
	}
	cg, err := ParseCgroup(data)
	if err != nil {
		return p, fmt.Errorf("attrib: pid %d: %w", pid, err)
	}
	var env Environ
	data, err = r.read(pid, "environ", maxEnvironBytes)
	switch {
	case err == nil:
		if env, err = ParseEnviron(data); err != nil {
			err = fmt.Errorf("attrib: pid %d: %w", pid, err)
			if cg.JobID == "" {
				return p, err
			}
			p.EnvironErr = err
		}
	case errors.Is(err, fs.ErrPermission):
	default:
		return p, err
	}
	p.CUDAVisibleDevices = env.CUDAVisibleDevices
	// The environment describes the process's job only if it names the
	// same job as the cgroup: a process started from one job's shell and
	// moved into another's cgroup keeps the first job's variables.
	envJob := cg.JobID == "" || env.JobID == cg.JobID
	switch {
	case cg.JobID != "" && envJob:
		p.JobID, p.Source = env.HeliostatJobID(), schemas.AllocCgroup
	case cg.JobID != "":
		p.JobID, p.Source = cg.JobID, schemas.AllocCgroup
	case env.JobID != "":
		p.JobID, p.Source = env.HeliostatJobID(), schemas.AllocEnviron
	default:
		return p, nil
	}
	switch {
	case envJob && env.User != "":
		p.User = env.User
	case cg.UID != schemas.Unknown:
		p.User = r.userName(cg.UID)
	default:
		// The process is in a job: its uid is the job's, but for setuid
		// programs. Failing to read it leaves the user unknown.
		if data, err := r.read(pid, "status", maxStatusBytes); err == nil {
			if uid, err := ParseStatusUID(data); err == nil {
				p.User = r.userName(uid)
			}
		}
	}
	return p, nil
}

// userName returns the cached or looked-up name of uid, "" when unknown.
func (r *Resolver) userName(uid int64) string {
	if r.lookup == nil {
		return ""
	}
	if name, ok := r.users[uid]; ok {
		return name
	}
	name, err := r.lookup(uid)
	if err != nil || len(name) > schemas.MaxStringLen {
		name = ""
	}
	if len(r.users) >= maxCachedUsers {
		clear(r.users)
	}
	r.users[uid] = name
	return name
}

// read returns the contents of root/pid/name, at most max bytes. A missing
// file or process gives an error wrapping ErrVanished.
func (r *Resolver) read(pid uint32, name string, max int64) ([]byte, error) {
	path := filepath.Join(r.root, strconv.FormatUint(uint64(pid), 10), name)
	f, err := os.Open(path)
	if err != nil {
		return nil, r.readErr(pid, name, err)
	}
	defer f.Close()
	// /proc files report size 0: read until EOF, one byte past the bound
	// to tell a file at the bound from a longer one.
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, r.readErr(pid, name, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("attrib: pid %d: %s is longer than %d bytes", pid, name, max)
	}
	return data, nil
}

func (r *Resolver) readErr(pid uint32, name string, err error) error {
	// ESRCH: the process exited while its file was open.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%w: pid %d: %s: %w", ErrVanished, pid, name, err)
	}
	return fmt.Errorf("attrib: pid %d: read %s: %w", pid, name, err)
}
