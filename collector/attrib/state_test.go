package attrib

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

func TestStateRoundTrip(t *testing.T) {
	st := State{
		Open: []Interval{
			{GPU: gpu0, JobID: "1", User: "alice", Source: schemas.AllocCgroup, Start: at(0), LastSeen: at(3), Misses: 1},
			{GPU: migA, JobID: "900_3", Source: schemas.AllocEnviron, Start: at(2), LastSeen: at(2)},
		},
		Pending: []schemas.Alloc{
			alloc(gpu1, "2", "bob", schemas.AllocCgroup, 0, 4),
			alloc(migB, "3", "", schemas.AllocEnviron, 1, -1),
		},
	}
	path := filepath.Join(t.TempDir(), "a.json")
	if err := SaveState(path, st); err != nil {
		t.Fatalf("SaveState() = %v", err)
	}
	got, err := LoadState(path)
	if err != nil {
		t.Fatalf("LoadState() = %v", err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("LoadState() = %+v\nwant %+v", got, st)
	}
	// Saving again replaces the file and leaves no temporary behind.
	if err := SaveState(path, State{}); err != nil {
		t.Fatalf("SaveState() = %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after two saves; want 1", len(entries))
	}
	if got, err := LoadState(path); err != nil || len(got.Open)+len(got.Pending) != 0 {
		t.Errorf("LoadState() after saving an empty state = %+v, %v; want empty", got, err)
	}
}

func TestLoadStateMissing(t *testing.T) {
	got, err := LoadState(filepath.Join(t.TempDir(), "none.json"))
	if err != nil || got.Open != nil || got.Pending != nil {
		t.Errorf("LoadState(missing) = %+v, %v; want empty, nil", got, err)
	}
}

func TestSaveStateUnwritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A path below a regular file cannot be created, even by root.
	if err := SaveState(filepath.Join(file, "state.json"), State{}); err == nil {
		t.Errorf("SaveState below a file = nil; want an error")
	}
}

func TestDecodeStateErrors(t *testing.T) {
	const open = `{"gpu_index":0,"gpu_uuid":"GPU-0","job_id":"1","source":1,"start_ms":1000,"last_seen_ms":2000}`
	tests := []struct {
		in, wantErr string
	}{
		{`{"version":1,"open":[` + open + `],"pending":[]}`, ""},
		{``, "decode"},
		{`{"version":2}`, "version 2, want 1"},
		{`{"version":1,"extra":1}`, "unknown field"},
		{`{"version":1,"open":[{"gpu_uuid":"GPU-0","source":1,"start_ms":1,"last_seen_ms":1}]}`, "open[0].job_id: empty"},
		{`{"version":1,"open":[` + open + `,{"gpu_index":-1,"job_id":"1","source":1,"start_ms":1,"last_seen_ms":1}]}`, "open[1].gpu_index: -1"},
		{`{"version":1,"open":[{"job_id":"1","source":3,"start_ms":1,"last_seen_ms":1}]}`, "open[0].source: 3"},
		{`{"version":1,"open":[{"job_id":"1","source":1,"start_ms":0}]}`, "open[0].start_ms"},
		{`{"version":1,"open":[{"job_id":"1","source":1,"start_ms":5,"last_seen_ms":4}]}`, "open[0].last_seen_ms"},
		{`{"version":1,"open":[{"job_id":"1","source":1,"start_ms":5,"last_seen_ms":5,"misses":-1}]}`, "open[0].misses"},
		{`{"version":1,"open":[{"job_id":"1","source":1,"start_ms":5,"last_seen_ms":5,"end_ms":6}]}`, "open[0].host"},
		{`{"version":1,"pending":[{"job_id":"1","source":1,"start_ms":5,"end_ms":4}]}`, "pending[0].end_ms"},
		{`{"version":1,"pending":[{"job_id":"1","source":1,"start_ms":5,"misses":1}]}`, "pending[0].last_seen_ms"},
		{`{"version":1,"pending":[{"job_id":"1","user":"\udc00x","source":1,"start_ms":5}]}`, ""},
		{`{"version":1,"pending":[{"job_id":"` + strings.Repeat("j", 1025) + `","source":1,"start_ms":5}]}`, "pending[0].job_id: not UTF-8"},
	}
	for _, tt := range tests {
		_, err := DecodeState([]byte(tt.in))
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("DecodeState(%.80q) = %v; want nil", tt.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("DecodeState(%.80q) error = %v; want one containing %q", tt.in, err, tt.wantErr)
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	data, err := EncodeState(State{
		Open:    []Interval{{GPU: gpu0, JobID: "1", Source: schemas.AllocCgroup, Start: at(0), LastSeen: at(1)}},
		Pending: []schemas.Alloc{alloc(gpu1, "2", "bob", schemas.AllocEnviron, 0, 3)},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := DecodeState(data)
		if err != nil {
			return
		}
		again, err := EncodeState(st)
		if err != nil {
			t.Fatalf("EncodeState(DecodeState(%q)) = %v", data, err)
		}
		st2, err := DecodeState(again)
		if err != nil {
			t.Fatalf("DecodeState of a re-encoded state = %v", err)
		}
		if !reflect.DeepEqual(st, st2) {
			t.Errorf("state changed on re-encoding: %+v; then %+v", st, st2)
		}
	})
}
