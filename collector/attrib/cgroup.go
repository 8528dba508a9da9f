package attrib

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/heliostat-dev/heliostat/schemas"
)

// Cgroup is what a process's /proc/PID/cgroup says about its Slurm job.
type Cgroup struct {
	// JobID is the Slurm job id (digits only, no leading zeros) of the job
	// cgroup the process is in; "" when it is in none. An array task's
	// cgroup names its own job id, not "<array>_<task>".
	JobID string
	// UID is the job owner's uid from Slurm's cgroup v1 path
	// (/slurm/uid_<uid>/job_<id>/...); schemas.Unknown when the path has
	// none, as cgroup v2 paths do not.
	UID int64
}

// ParseCgroup parses the contents of /proc/PID/cgroup: cgroup v1 lines
// "hierarchy-ID:controllers:path" and the cgroup v2 line "0::path". A process
// is in a Slurm job when a path has a component starting with "slurm" (slurm's
// cgroup v1 root "/slurm" or "/slurm_<node>", cgroup v2's
// "slurmstepd.scope") followed by a "job_<id>" component, for example
//
//	/slurm/uid_1000/job_1234/step_0/task_0
//	/slurm_gpu1/uid_0/job_77/step_batch
//	/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0
//
// A "job_" component elsewhere (not below a slurm component) is not Slurm's
// and is ignored. Errors name the line: a malformed line, a malformed job id
// below a slurm component, or two lines naming different jobs.
func ParseCgroup(data []byte) (Cgroup, error) {
	cg := Cgroup{UID: schemas.Unknown}
	jobLine := 0
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		id, rest, ok1 := strings.Cut(string(line), ":")
		_, path, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return Cgroup{}, fmt.Errorf("attrib: cgroup line %d: %q is not hierarchy-ID:controllers:path", n, clip(line))
		}
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return Cgroup{}, fmt.Errorf("attrib: cgroup line %d: hierarchy ID %q is not a number", n, clip([]byte(id)))
		}
		if !strings.HasPrefix(path, "/") {
			return Cgroup{}, fmt.Errorf("attrib: cgroup line %d: path %q is not absolute", n, clip([]byte(path)))
		}
		job, uid, err := slurmJob(path)
		if err != nil {
			return Cgroup{}, fmt.Errorf("attrib: cgroup line %d: %w", n, err)
		}
		if job == "" {
			continue
		}
		if cg.JobID != "" && cg.JobID != job {
			return Cgroup{}, fmt.Errorf("attrib: cgroup line %d: job %s, but line %d names job %s", n, job, jobLine, cg.JobID)
		}
		if cg.JobID == "" {
			jobLine = n
		}
		cg.JobID = job
		if uid != schemas.Unknown {
			cg.UID = uid
		}
	}
	return cg, nil
}

// slurmJob returns the job id and owner uid (schemas.Unknown when absent) a
// cgroup path names below a slurm component; "" when it names none.
func slurmJob(path string) (job string, uid int64, err error) {
	uid = schemas.Unknown
	inSlurm := false
	for c := range strings.SplitSeq(path, "/") {
		switch {
		case strings.HasPrefix(c, "slurm"):
			inSlurm = true
		case !inSlurm:
		case strings.HasPrefix(c, "uid_"):
			u, err := strconv.ParseUint(c[len("uid_"):], 10, 32)
			if err != nil {
				return "", schemas.Unknown, fmt.Errorf("path component %q: uid is not a number", clip([]byte(c)))
			}
			uid = int64(u)
		case strings.HasPrefix(c, "job_"):
			id, err := parseJobNumber(c[len("job_"):])
			if err != nil {
				return "", schemas.Unknown, fmt.Errorf("path component %q: %w", clip([]byte(c)), err)
			}
			return id, uid, nil
		}
	}
	return "", schemas.Unknown, nil
}

// parseJobNumber checks a Slurm job or task number (a 32-bit unsigned decimal)
// and returns it in canonical form.
func parseJobNumber(s string) (string, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return "", fmt.Errorf("job id %q is not a 32-bit unsigned number", clip([]byte(s)))
	}
	return strconv.FormatUint(n, 10), nil
}

// clip shortens b for an error message, so that a huge line cannot make a
// huge error.
func clip(b []byte) string {
	const max = 64
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
