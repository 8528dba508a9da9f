package slurmfmt

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestGPURequest: a job's GPUs from whichever request field names them, in
// Slurm 22.05's record (plain numbers) and 23.11's ({set, infinite,
// number}); errors name the field.
func TestGPURequest(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		count     int64
		typ       string
		field     string
		err       string
	}{
		{"22.05 per socket", `{"tres_per_socket": "gres:gpu:2", "sockets_per_node": 2, "node_count": 2}`, 8, "", "tres_per_socket", ""},
		{"23.11 per socket", `{"tres_per_socket": "gres/gpu:h100:2", "sockets_per_node": {"set": true, "infinite": false, "number": 2}, "node_count": {"set": true, "infinite": false, "number": 1}}`, 4, "h100", "tres_per_socket", ""},
		{"per socket, sockets unset", `{"tres_per_socket": "gres:gpu:2", "sockets_per_node": {"set": false, "infinite": false, "number": 0}}`, 2, "", "tres_per_socket", ""},
		{"per node before per socket", `{"tres_per_node": "gres:gpu:1", "tres_per_socket": "gres:gpu:2", "sockets_per_node": 2, "node_count": 3}`, 3, "", "tres_per_node", ""},
		{"per task", `{"tres_per_task": "gres:gpu:a100:1", "tasks": 4}`, 4, "a100", "tres_per_task", ""},
		{"none", `{"tres_per_node": "gres:tmpdisk:10G"}`, 0, "", "", ""},
		{"bad", `{"tres_per_socket": "gres:gpu:x:y"}`, 0, "", "tres_per_socket", "tres_per_socket: "},
		{"too many", `{"tres_per_task": "gres:gpu:1", "tasks": 2000000}`, 0, "", "tres_per_task", "out of range"},
		{"nodes beyond int64 when multiplied", `{"tres_per_socket": "gres:gpu:2", "sockets_per_node": 4, "node_count": 4611686018427387904}`, 0, "", "tres_per_socket", "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var j Job
			if err := json.Unmarshal([]byte(tc.doc), &j); err != nil {
				t.Fatal(err)
			}
			g, field, ok, err := j.GPURequest()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || field != tc.field {
					t.Fatalf("GPURequest() = %+v, %q, %v; want an error containing %q in %s", g, field, err, tc.err, tc.field)
				}
				return
			}
			if err != nil || g.Count != tc.count || g.Type != tc.typ || field != tc.field || ok != (tc.count > 0) || g.ByType[tc.typ] != tc.count {
				t.Errorf("GPURequest() = %+v, %q, %v, %v; want %d GPUs of type %q from %q", g, field, ok, err, tc.count, tc.typ, tc.field)
			}
		})
	}
}
