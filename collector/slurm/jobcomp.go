package slurm

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/heliostat-dev/heliostat/internal/slurmfmt"
	"github.com/heliostat-dev/heliostat/schemas"
)

// jobCompTime is how jobcomp/filetxt writes times: local time of slurmctld,
// no zone.
const jobCompTime = "2006-01-02T15:04:05"

// knownJobCompKey reports whether k is a key jobcomp/filetxt writes (Slurm
// 20.02 to 23.x).
func knownJobCompKey(k string) bool {
	switch k {
	case "JobId", "UserId", "GroupId", "Name", "JobState", "Partition", "TimeLimit", "StartTime", "EndTime",
		"NodeList", "NodeCnt", "ProcCnt", "WorkDir", "ReservationName", "Tres", "Account", "QOS", "WcKey",
		"Cluster", "SubmitTime", "EligibleTime", "ArrayJobId", "ArrayTaskId", "HetJobId", "HetJobOffset",
		"PackJobId", "PackJobOffset", "DerivedExitCode", "ExitCode":
		return true
	}
	return false
}

// jobCompFreeText reports whether the value of key k is the user's own text.
func jobCompFreeText(k string) bool { return k == "Name" || k == "WorkDir" }

// parseJobCompFields splits one job-completion line, "JobId=9 UserId=root(0)
// Name=my job JobState=CANCELLED …", into its fields. Values are not quoted:
// a word without "Key=" (Key starting with an upper-case letter) continues
// the previous value, so names with spaces survive. Within a job name or
// working directory only a known key starts the next field, so a
// name such as "sweep Lr=0.1" stays whole; elsewhere any such key does, so
// a field a later Slurm adds is read as a field of its own.
func parseJobCompFields(line string) (map[string]string, error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return nil, fmt.Errorf("no Key=value fields")
	}
	fields := make(map[string]string, 24)
	last := ""
	for _, word := range strings.Split(line, " ") {
		k, v, ok := strings.Cut(word, "=")
		if ok && isJobCompKey(k) && (!jobCompFreeText(last) || knownJobCompKey(k)) {
			if _, dup := fields[k]; dup {
				return nil, fmt.Errorf("field %s appears twice", k)
			}
			fields[k], last = v, k
			continue
		}
		if last == "" {
			return nil, fmt.Errorf("text %q before the first Key=value", word)
		}
		fields[last] += " " + word
	}
	return fields, nil
}

func isJobCompKey(k string) bool {
	if k == "" || k[0] < 'A' || k[0] > 'Z' {
		return false
	}
	for i := 1; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// parseJobCompLine parses one line of the jobcomp/filetxt log into an
// observation of an ended job. Times are read in loc. Errors name the field.
func parseJobCompLine(line string, loc *time.Location) (*observation, error) {
	f, err := parseJobCompFields(line)
	if err != nil {
		return nil, err
	}
	req := func(k string) (string, error) {
		v, ok := f[k]
		if !ok {
			return "", fmt.Errorf("field %s is missing", k)
		}
		return v, nil
	}
	ev := schemas.JobEvent{
		ArrayTaskID: schemas.Unknown, Priority: schemas.Unknown, TimeLimitS: schemas.Unknown,
		NodeCount: schemas.Unknown, CPUs: schemas.Unknown, GPUs: schemas.Unknown, MemReqBytes: schemas.Unknown,
		UID: schemas.Unknown, ExitCode: schemas.Unknown,
	}
	id, err := req("JobId")
	if err != nil {
		return nil, err
	}
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return nil, fmt.Errorf("field JobId: %q is not a job id", id)
	}
	ev.JobID = id
	if a, ok := f["ArrayJobId"]; ok {
		t, ok := f["ArrayTaskId"]
		if !ok {
			return nil, fmt.Errorf("field ArrayTaskId is missing beside ArrayJobId")
		}
		if _, err := strconv.ParseUint(a, 10, 64); err != nil {
			return nil, fmt.Errorf("field ArrayJobId: %q is not a job id", a)
		}
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("field ArrayTaskId: %q is not a task id", t)
		}
		ev.ArrayJobID, ev.ArrayTaskID, ev.JobID = a, n, a+"_"+t
	}
	u, err := req("UserId")
	if err != nil {
		return nil, err
	}
	if ev.User, ev.UID, err = parseNameID(u); err != nil {
		return nil, fmt.Errorf("field UserId: %w", err)
	}
	if g, ok := f["GroupId"]; ok {
		if ev.Group, _, err = parseNameID(g); err != nil {
			return nil, fmt.Errorf("field GroupId: %w", err)
		}
	}
	ev.Name, ev.Partition, ev.Account, ev.QOS, ev.WorkDir = f["Name"], f["Partition"], f["Account"], f["QOS"], f["WorkDir"]
	st, err := req("JobState")
	if err != nil {
		return nil, err
	}
	// A requeued run has a line too, with the state the job was left in
	// (PENDING in Slurm 22.05) or the final state of the run (PREEMPTED,
	// NODE_FAIL).
	state, err := normalizeEndState(st)
	if err != nil {
		return nil, fmt.Errorf("field JobState: %w", err)
	}
	ev.State = state
	for _, t := range []struct {
		key      string
		dst      *int64
		required bool
	}{
		{"SubmitTime", &ev.SubmitMillis, true},
		{"EligibleTime", &ev.EligibleMillis, false},
		{"StartTime", &ev.StartMillis, true},
		{"EndTime", &ev.EndMillis, true},
	} {
		v, ok := f[t.key]
		if !ok {
			if t.required {
				return nil, fmt.Errorf("field %s is missing", t.key)
			}
			continue
		}
		if v == "Unknown" || v == "None" || v == "" {
			continue
		}
		tm, err := time.ParseInLocation(jobCompTime, v, loc)
		if err != nil {
			return nil, fmt.Errorf("field %s: %q is not a time like %s", t.key, v, jobCompTime)
		}
		*t.dst = tm.UnixMilli()
		if p := schemas.TimeProblem(*t.dst); p != "" {
			return nil, fmt.Errorf("field %s: %q: %s", t.key, v, p)
		}
	}
	if ev.SubmitMillis == 0 || ev.EndMillis == 0 {
		return nil, fmt.Errorf("fields SubmitTime and EndTime must be known")
	}
	if tl, ok := f["TimeLimit"]; ok && tl != "UNLIMITED" && tl != "Partition_Limit" {
		n, err := strconv.ParseInt(tl, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("field TimeLimit: %q is not minutes", tl)
		}
		ev.TimeLimitS = n * 60
	}
	nodes := f["NodeList"]
	if nodes != "(null)" && nodes != "None assigned" {
		if ev.Nodes, err = slurmfmt.ExpandHostlist(nodes); err != nil {
			return nil, fmt.Errorf("field NodeList: %w", err)
		}
	}
	for _, c := range []struct {
		key string
		dst *int64
	}{{"NodeCnt", &ev.NodeCount}, {"ProcCnt", &ev.CPUs}} {
		if v, ok := f[c.key]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("field %s: %q is not a count", c.key, v)
			}
			*c.dst = n
		}
	}
	if tres, ok := f["Tres"]; ok {
		if m, ok := tresValue(tres, "mem"); ok {
			if ev.MemReqBytes, err = parseMem(m); err != nil {
				return nil, fmt.Errorf("field Tres: %w", err)
			}
		}
		if g, ok := tresValue(tres, "gres/gpu"); ok {
			if ev.GPUs, err = strconv.ParseInt(g, 10, 64); err != nil || ev.GPUs < 0 {
				return nil, fmt.Errorf("field Tres: gres/gpu=%q is not a count", g)
			}
		}
	}
	if ec, ok := f["ExitCode"]; ok {
		code, sig, found := strings.Cut(ec, ":")
		c, err1 := strconv.ParseInt(code, 10, 64)
		s, err2 := strconv.ParseInt(sig, 10, 64)
		if !found || err1 != nil || err2 != nil || c < 0 || s < 0 {
			return nil, fmt.Errorf("field ExitCode: %q is not exit:signal", ec)
		}
		ev.ExitCode = c
		if s != 0 {
			ev.ExitCode = 128 + s
		}
	}
	o := &observation{ev: ev, kind: kindFinal, started: len(ev.Nodes) > 0 && ev.StartMillis != 0, restarts: schemas.Unknown}
	if !o.started {
		// As from squeue: a job holds nodes only once it runs. Slurm sets
		// StartTime to the cancel time of a job that never ran, and a record
		// with nodes but no start time cannot say when they were held.
		o.ev.StartMillis, o.ev.Nodes = 0, nil
	}
	return o, nil
}

// parseNameID parses "root(0)" into the name and the number.
func parseNameID(s string) (string, int64, error) {
	name, rest, ok := strings.Cut(s, "(")
	idStr, closed := strings.CutSuffix(rest, ")")
	if !ok || !closed {
		return "", 0, fmt.Errorf("%q is not name(id)", s)
	}
	id, err := strconv.ParseInt(idStr, 10, 64)
	if err != nil || id < 0 {
		return "", 0, fmt.Errorf("%q is not name(id)", s)
	}
	return name, id, nil
}
