package slurm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/heliostat-dev/heliostat/internal/slurmfmt"
	"github.com/heliostat-dev/heliostat/schemas"
)

// squeueResponse is the part of `squeue --json` that the source reads (Slurm
// 22.05, OpenAPI v0.0.38, and the later shapes slurmfmt.Job reads).
type squeueResponse struct {
	Meta struct {
		Plugin struct {
			Type string `json:"type"`
		} `json:"plugin"`
	} `json:"meta"`
	Errors []json.RawMessage `json:"errors"`
	Jobs   []squeueJob       `json:"jobs"`
}

// squeueJob is one job record of `squeue --json`: what slurmfmt.Job reads,
// and the restart count, which only the source needs.
type squeueJob struct {
	slurmfmt.Job
	// RestartCnt is how many times Slurm requeued the job (restart_cnt;
	// unset when absent). A requeue also resets the submit time, so that
	// this count is what tells a requeued job from a newer job under a
	// reused id.
	RestartCnt slurmfmt.Int `json:"restart_cnt"`
}

// decodeSqueue decodes the output of `squeue --json`. An error means the whole
// document is unusable; errors Slurm itself reports in "errors" are one too.
func decodeSqueue(b []byte) (*squeueResponse, error) {
	var r squeueResponse
	if err := decodeJSON(b, &r, "squeue --json"); err != nil {
		return nil, err
	}
	if len(r.Errors) > 0 {
		return nil, fmt.Errorf("squeue --json reports errors: %s", joinRaw(r.Errors, 200))
	}
	if r.Jobs == nil && !bytes.Contains(b, []byte(`"jobs"`)) {
		return nil, errors.New("decode squeue --json: no \"jobs\" list")
	}
	return &r, nil
}

// decodeJSON decodes the output of a command into v; a syntax error names
// the byte offset.
func decodeJSON(b []byte, v any, command string) error {
	if err := json.Unmarshal(b, v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("decode %s at offset %d: %w", command, se.Offset, err)
		}
		return fmt.Errorf("decode %s: %w", command, err)
	}
	return nil
}

func joinRaw(rs []json.RawMessage, max int) string {
	var sb strings.Builder
	for i, r := range rs {
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.Write(r)
		if sb.Len() > max {
			return sb.String()[:max] + "…"
		}
	}
	return sb.String()
}

// stateKind says where a Slurm state leaves a job.
type stateKind uint8

const (
	kindPending stateKind = iota + 1 // not started (or requeued and waiting again)
	kindRunning                      // holds its nodes
	kindFinal                        // ended
)

// normalizeState maps a Slurm state name, long ("CANCELLED", also
// "CANCELLED by 0" as sacct prints it) or short ("CA"), to a JobState and
// where it leaves the job.
func normalizeState(s string) (schemas.JobState, stateKind, error) {
	base, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	base = strings.TrimSuffix(base, "+") // sacct marks a state with more to it with '+'
	switch base {
	case "PENDING", "PD", "REQUEUED", "RQ", "REQUEUE_FED", "RF", "REQUEUE_HOLD", "RH", "RESV_DEL_HOLD", "RD":
		return schemas.StatePending, kindPending, nil
	case "RUNNING", "R", "SUSPENDED", "S", "STOPPED", "ST", "COMPLETING", "CG", "CONFIGURING", "CF",
		"RESIZING", "RS", "SIGNALING", "SI", "STAGE_OUT", "SO":
		return schemas.StateRunning, kindRunning, nil
	case "COMPLETED", "CD":
		return schemas.StateCompleted, kindFinal, nil
	case "FAILED", "F", "SPECIAL_EXIT", "SE":
		return schemas.StateFailed, kindFinal, nil
	case "CANCELLED", "CA", "REVOKED", "RV":
		return schemas.StateCancelled, kindFinal, nil
	case "TIMEOUT", "TO", "DEADLINE", "DL":
		return schemas.StateTimeout, kindFinal, nil
	case "NODE_FAIL", "NF", "BOOT_FAIL", "BF":
		return schemas.StateNodeFail, kindFinal, nil
	case "PREEMPTED", "PR":
		return schemas.StatePreempted, kindFinal, nil
	case "OUT_OF_MEMORY", "OOM":
		return schemas.StateOutOfMemory, kindFinal, nil
	}
	return 0, 0, fmt.Errorf("unknown job state %q", s)
}

// requeuedState is the state in which a run that Slurm requeued ends when no
// record of Slurm's gives a final state for it: a run requeued on request
// (scontrol requeue, which the accounting records as REQUEUED), or one the
// source saw requeued only in squeue, which does not say why. The wire
// format has no REQUEUED; a run stopped and put back in the queue is
// closest to a cancelled one (both count as cancelled in the analytics, as
// PREEMPTED does). Preempted and node-failed runs keep the PREEMPTED and
// NODE_FAIL that the completion log and the accounting give them.
const requeuedState = schemas.StateCancelled

// normalizeEndState maps the state of an ended run, as the job-completion log
// and the accounting record it, to a final JobState. A run that Slurm
// requeued is recorded with a waiting state: REQUEUED in the accounting, and
// in the log the state the job was left in (Slurm 22.05 writes PENDING); it
// ends as requeuedState. A running state is an error.
func normalizeEndState(s string) (schemas.JobState, error) {
	state, kind, err := normalizeState(s)
	switch {
	case err != nil:
		return 0, err
	case kind == kindPending:
		return requeuedState, nil
	case kind != kindFinal:
		return 0, fmt.Errorf("%q is not a final state", s)
	}
	return state, nil
}

// expandArrayTasks expands a pending array's array_task_string, "0-2",
// "1,3-7:2" or "0-99%4" (at most 4 at once), into task ids, in the order
// given (Slurm writes them in ascending order).
//
// Slurm shortens the list to SLURM_BITSTR_LEN bytes (64 unless the variable
// is set; the source sets 0, for the full list) and ends it with "...",
// which may cut the last item: "1,4,9,16,28...". Such a list gives its items
// before the last comma, and complete is false: tasks above those are not
// known from it.
func expandArrayTasks(s string) (tasks []int64, complete bool, err error) {
	s, _, _ = strings.Cut(s, "%")
	head, cut := strings.CutSuffix(s, "...")
	if cut {
		i := strings.LastIndexByte(head, ',')
		if i < 0 {
			return nil, false, nil // not even one task in full
		}
		head = head[:i]
	}
	if head == "" {
		return nil, false, errors.New("empty array task list")
	}
	var out []int64
	for _, item := range strings.Split(head, ",") {
		rng, stepStr, hasStep := strings.Cut(item, ":")
		step := int64(1)
		if hasStep {
			n, err := strconv.ParseInt(stepStr, 10, 64)
			if err != nil || n <= 0 {
				return nil, false, fmt.Errorf("array task list %q: bad step %q", s, stepStr)
			}
			step = n
		}
		lo, hi, isRange := strings.Cut(rng, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b, err2 := strconv.ParseInt(hi, 10, 64)
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, false, fmt.Errorf("array task list %q: bad range %q", s, rng)
		}
		if (b-a)/step+int64(len(out)) >= maxArrayTasks {
			return nil, false, fmt.Errorf("array task list %q: more than %d tasks", s, maxArrayTasks)
		}
		for k := int64(0); k <= (b-a)/step; k++ { // a+k*step <= b: no overflow near MaxInt64
			out = append(out, a+k*step)
		}
	}
	return out, !cut, nil
}

// maxArrayTasks bounds the expansion of one pending array into tasks (Slurm's
// MaxArraySize defaults to 1001). Tasks of a larger array are reported when
// each gets its own record.
const maxArrayTasks = 1 << 17
