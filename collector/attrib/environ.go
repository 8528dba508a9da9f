package attrib

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/heliostat-dev/heliostat/schemas"
)

// Environ is what a process's /proc/PID/environ says about its Slurm job.
// Fields are "" (nil) when the variable is not set.
type Environ struct {
	// JobID is SLURM_JOB_ID (or the older SLURM_JOBID), canonical digits.
	JobID string
	// ArrayJobID and ArrayTaskID are SLURM_ARRAY_JOB_ID and
	// SLURM_ARRAY_TASK_ID, both set or both "".
	ArrayJobID, ArrayTaskID string
	// User is SLURM_JOB_USER, the job owner's user name.
	User string
	// CUDAVisibleDevices is CUDA_VISIBLE_DEVICES split at commas: device
	// indices, GPU-… or MIG-… UUIDs, as the job's launcher set them. Under
	// Slurm's device cgroup the indices are renumbered from 0 inside the
	// job, so they are not the host's indices.
	CUDAVisibleDevices []string
}

// HeliostatJobID returns the job id as heliostat spells it: "<array>_<task>"
// for an array task, else JobID.
func (e Environ) HeliostatJobID() string {
	if e.ArrayJobID != "" {
		return e.ArrayJobID + "_" + e.ArrayTaskID
	}
	return e.JobID
}

// Reasons an environ is malformed, the values of the reason label of
// heliostat_attrib_malformed_environ_total.
const (
	// environBadID: a job, array job or task id that is not a number
	// (an empty SLURM_JOB_ID= included).
	environBadID = "bad_id"
	// environIncompleteArray: SLURM_ARRAY_TASK_ID without
	// SLURM_ARRAY_JOB_ID or the reverse, or an array job without
	// SLURM_JOB_ID (a user who set SLURM_ARRAY_TASK_ID by hand).
	environIncompleteArray = "incomplete_array"
	// environBadUser: a SLURM_JOB_USER that is not UTF-8 or too long.
	environBadUser = "bad_user"
)

var environReasons = [...]string{environBadID, environIncompleteArray, environBadUser}

// environError is a malformed environ; reason is one of the environ*
// reasons.
type environError struct {
	reason string
	err    error
}

func (e *environError) Error() string { return e.err.Error() }
func (e *environError) Unwrap() error { return e.err }

func malformed(reason, format string, args ...any) error {
	return &environError{reason: reason, err: fmt.Errorf(format, args...)}
}

// environReason returns the reason of a malformed environ error, "" when err
// is no such error.
func environReason(err error) string {
	if e, ok := errors.AsType[*environError](err); ok {
		return e.reason
	}
	return ""
}

// ParseEnviron parses the contents of /proc/PID/environ: NUL-separated
// KEY=VALUE entries, the first of a repeated key winning as it does for
// getenv. Entries without "=" are skipped: a program may put anything in its
// environment. Errors name the variable and the entry number (from 1): a job,
// array or task id that is not a number, an array id without its task id, a
// user name that is not UTF-8 or too long.
func ParseEnviron(data []byte) (Environ, error) {
	var (
		e     Environ
		oldID string         // SLURM_JOBID, used when SLURM_JOB_ID is not set
		seen  map[string]int // entry number of each variable read
	)
	for n := 1; len(data) > 0; n++ {
		var entry []byte
		entry, data, _ = bytes.Cut(data, []byte{0})
		k, v, ok := bytes.Cut(entry, []byte{'='})
		if !ok {
			continue
		}
		var dst *string
		switch string(k) {
		case "SLURM_JOB_ID":
			dst = &e.JobID
		case "SLURM_JOBID":
			dst = &oldID
		case "SLURM_ARRAY_JOB_ID":
			dst = &e.ArrayJobID
		case "SLURM_ARRAY_TASK_ID":
			dst = &e.ArrayTaskID
		case "SLURM_JOB_USER", "CUDA_VISIBLE_DEVICES":
		default:
			continue
		}
		key := string(k)
		if _, dup := seen[key]; dup {
			continue
		}
		if seen == nil {
			seen = make(map[string]int, 6)
		}
		seen[key] = n
		switch key {
		case "SLURM_JOB_USER":
			if !utf8.Valid(v) || len(v) > schemas.MaxStringLen {
				return Environ{}, malformed(environBadUser, "attrib: environ entry %d: SLURM_JOB_USER %q is not a valid user name", n, clip(v))
			}
			e.User = string(v)
		case "CUDA_VISIBLE_DEVICES":
			e.CUDAVisibleDevices = splitDevices(string(v))
		default:
			id, err := parseJobNumber(string(v))
			if err != nil {
				return Environ{}, malformed(environBadID, "attrib: environ entry %d: %s: %w", n, key, err)
			}
			*dst = id
		}
	}
	if e.JobID == "" {
		e.JobID = oldID
	}
	if (e.ArrayJobID == "") != (e.ArrayTaskID == "") {
		have, missing := "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"
		if e.ArrayJobID == "" {
			have, missing = missing, have
		}
		return Environ{}, malformed(environIncompleteArray, "attrib: environ entry %d: %s without %s", seen[have], have, missing)
	}
	if e.ArrayJobID != "" && e.JobID == "" {
		return Environ{}, malformed(environIncompleteArray, "attrib: environ entry %d: SLURM_ARRAY_JOB_ID without SLURM_JOB_ID", seen["SLURM_ARRAY_JOB_ID"])
	}
	return e, nil
}

// splitDevices splits CUDA_VISIBLE_DEVICES at commas, dropping empty items;
// an empty value (no device visible) gives an empty, non-nil slice.
func splitDevices(v string) []string {
	out := []string{}
	for d := range strings.SplitSeq(v, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}
