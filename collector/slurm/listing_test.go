package slurm

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas"
)

// sqJob is one record of a squeue --json listing, in the shape Slurm 22.05
// writes, for tests that make their own listings. Times are Unix seconds.
type sqJob struct {
	id       int64
	arrayID  int64  // 0 outside an array
	task     int64  // array task id; -1 for none (array_task_id null)
	tasks    string // array_task_string of a pending array
	state    string
	submit   int64
	start    int64
	nodes    string
	gres     []string       // gres_detail, while running
	restarts int64          // restart_cnt; -1 leaves it out
	noID     bool           // leave job_id out
	set      map[string]any // fields set last, over the ones above
}

// job returns a plain job's record: id, state, submit time and restart count.
func job(id int64, state string, submit, restarts int64) sqJob {
	return sqJob{id: id, task: -1, state: state, submit: submit, restarts: restarts}
}

// with returns j with field k of its record set to v.
func (j sqJob) with(k string, v any) sqJob {
	set := maps.Clone(j.set)
	if set == nil {
		set = map[string]any{}
	}
	set[k] = v
	j.set = set
	return j
}

// on returns j running on one node since start, holding GPU 0 there.
func (j sqJob) on(node string, start int64) sqJob {
	j.nodes, j.start, j.gres = node, start, []string{"gpu:1(IDX:0)"}
	return j
}

func (j sqJob) record() map[string]any {
	m := map[string]any{
		"job_state": j.state, "submit_time": j.submit, "start_time": j.start, "end_time": j.start + 3600,
		"nodes": j.nodes, "node_count": 1, "tres_per_node": "gres:gpu:1", "gres_detail": j.gres,
		"user_name": "alice", "user_id": 1000, "partition": "batch", "name": "train", "time_limit": 60,
		"array_job_id": j.arrayID, "array_task_string": j.tasks, "array_task_id": nil,
	}
	if j.gres == nil {
		m["gres_detail"] = []string{}
	}
	if !j.noID {
		m["job_id"] = j.id
	}
	if j.task >= 0 {
		m["array_task_id"] = j.task
	}
	if j.restarts >= 0 {
		m["restart_cnt"] = j.restarts
	}
	maps.Copy(m, j.set)
	return m
}

// listing returns a squeue --json document holding jobs.
func listing(t testing.TB, jobs ...sqJob) []byte {
	t.Helper()
	recs := make([]map[string]any, len(jobs))
	for i, j := range jobs {
		recs[i] = j.record()
	}
	b, err := json.Marshal(map[string]any{"meta": map[string]any{"plugin": map[string]any{"type": "openapi/v0.0.38"}}, "errors": []any{}, "jobs": recs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// describe renders events for comparison in tests, times relative to base
// in milliseconds: "END PREEMPTED at +45000 end +45000".
func describe(evs []schemas.JobEvent, base time.Time) string {
	rel := func(ms int64) string {
		if ms == 0 {
			return "-"
		}
		return fmt.Sprintf("%+d", ms-base.UnixMilli())
	}
	s := make([]string, len(evs))
	for i, e := range evs {
		s[i] = fmt.Sprintf("%v %v at %s end %s", e.Type, e.State, rel(e.EventMillis), rel(e.EndMillis))
	}
	return strings.Join(s, "; ")
}
