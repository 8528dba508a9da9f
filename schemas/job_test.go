package schemas_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

// jobBatch is one job's life on a two-node Slurm allocation: submitted,
// re-prioritized, started, failed.
func jobBatch() *schemas.JobEventBatch {
	base := schemas.JobEvent{
		JobID: "4242_3", ArrayJobID: "4242", ArrayTaskID: 3, Name: "bert-large", User: "alice", UID: 1001,
		Group: "nlp", Account: "research", Partition: "batch", QOS: "normal", ExitCode: schemas.Unknown,
		Priority: 100, SubmitMillis: 1_700_000_000_000, EligibleMillis: 1_700_000_000_000, TimeLimitS: 86400,
		NodeCount: 2, CPUs: 32, GPUs: 16, GPUType: "h100", MemReqBytes: 512 << 30,
		CommandHash: "9f86d081884c7d65", WorkDir: "/home/alice/bert",
	}
	sub := base
	sub.Type, sub.State, sub.EventMillis = schemas.JobSubmit, schemas.StatePending, base.SubmitMillis
	upd := sub
	upd.Type, upd.EventMillis, upd.Priority = schemas.JobUpdate, base.SubmitMillis+5_000, 500
	start := upd
	start.Type, start.State, start.StartMillis, start.EventMillis = schemas.JobStart, schemas.StateRunning, base.SubmitMillis+60_000, base.SubmitMillis+60_000
	start.Nodes = []string{"gpu1", "gpu2"}
	end := start
	end.Type, end.State, end.ExitCode = schemas.JobEnd, schemas.StateFailed, 137
	end.EndMillis, end.EventMillis = base.SubmitMillis+3_600_000, base.SubmitMillis+3_600_000
	return &schemas.JobEventBatch{Cluster: "eos", Source: schemas.SourceSlurm, Events: []schemas.JobEvent{sub, upd, start, end}}
}

func allocBatch() *schemas.AllocBatch {
	return &schemas.AllocBatch{Cluster: "eos", Allocs: []schemas.Alloc{
		{Host: "gpu1", GPUIndex: 0, JobID: "4242_3", User: "alice", StartMillis: 1_700_000_060_000, Source: schemas.AllocScontrol},
		{Host: "gpu1", GPUIndex: 0, JobID: "4242_3", User: "alice", StartMillis: 1_700_000_060_000, EndMillis: 1_700_003_600_000, Source: schemas.AllocScontrol},
		{Host: "dgx-017", GPUIndex: schemas.Unknown, GPUUUID: "GPU-7f3a", MIGUUID: "MIG-01", JobID: "77", StartMillis: 5, Source: schemas.AllocCgroup},
	}}
}

func TestJobEnumsString(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{schemas.JobSubmit.String(), "SUBMIT"},
		{schemas.JobEnd.String(), "END"},
		{schemas.JobEventType(9).String(), "job_event_type(9)"},
		{schemas.StateOutOfMemory.String(), "OUT_OF_MEMORY"},
		{schemas.JobState(0).String(), "job_state(0)"},
		{schemas.SourceSim.String(), "sim"},
		{schemas.AllocEnviron.String(), "environ"},
		{schemas.AllocSource(42).String(), "alloc_source(42)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("String() = %q; want %q", tt.got, tt.want)
		}
	}
	for s := schemas.StatePending; s <= schemas.StateOutOfMemory; s++ {
		got, ok := schemas.ParseJobState(s.String())
		if !ok || got != s {
			t.Errorf("ParseJobState(%q) = %v, %v; want %v", s.String(), got, ok, s)
		}
		if want := s >= schemas.StateCompleted; s.Final() != want {
			t.Errorf("%v.Final() = %v; want %v", s, s.Final(), want)
		}
	}
	if _, ok := schemas.ParseJobState("running"); ok {
		t.Error(`ParseJobState("running") ok; want false (names are upper case)`)
	}
}

func TestJobEventBatchRoundTripReuse(t *testing.T) {
	msg, err := schemas.AppendJobEventBatch(nil, jobBatch())
	if err != nil {
		t.Fatal(err)
	}
	// Decoding into a batch that held more events must not leave any behind.
	b := &schemas.JobEventBatch{Events: make([]schemas.JobEvent, 9)}
	if err := schemas.DecodeJobEventBatch(msg, b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b, jobBatch()) {
		t.Errorf("round trip = %+v; want %+v", b, jobBatch())
	}
}

func TestAppendJobEventBatchRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*schemas.JobEventBatch)
		want   string
	}{
		{"no source", func(b *schemas.JobEventBatch) { b.Source = 0 }, "source 0"},
		{"empty job id", func(b *schemas.JobEventBatch) { b.Events[1].JobID = "" }, "events[1]: job id is empty"},
		{"unknown state", func(b *schemas.JobEventBatch) { b.Events[0].State = 77 }, "state 77"},
		{"unknown type", func(b *schemas.JobEventBatch) { b.Events[2].Type = 0 }, "type 0"},
		{"bad utf8", func(b *schemas.JobEventBatch) { b.Events[0].User = "\xff" }, "user: not valid UTF-8"},
		{"long node", func(b *schemas.JobEventBatch) { b.Events[2].Nodes[1] = strings.Repeat("n", 2000) }, "node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := jobBatch()
			tt.mutate(b)
			dst := []byte("keep")
			out, err := schemas.AppendJobEventBatch(dst, b)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("AppendJobEventBatch error = %v; want one containing %q", err, tt.want)
			}
			if string(out) != "keep" {
				t.Errorf("AppendJobEventBatch returned %q on error; want dst unchanged", out)
			}
		})
	}
}

func TestDecodeJobEventBatchErrors(t *testing.T) {
	good, err := schemas.AppendJobEventBatch(nil, jobBatch())
	if err != nil {
		t.Fatal(err)
	}
	hdr := wire{'H', 'S', 'J', 1}
	tests := []struct {
		name  string
		msg   []byte
		field string
		kind  string
	}{
		{"samples kind", []byte{'H', 'S', 'G', 1}, "header.kind", schemas.ErrKindKind},
		{"version 2", []byte{'H', 'S', 'J', 2}, "header.version", schemas.ErrKindVersion},
		{"source 0", hdr.str("c").uv(0), "source", schemas.ErrKindUnknownEnum},
		{"lying count", hdr.str("c").uv(1).uv(1000), "event count", schemas.ErrKindTruncated},
		{"truncated", good[:len(good)-3], "events[3].work_dir", schemas.ErrKindTruncated},
		{"trailing", append(append([]byte{}, good...), 0), "end", schemas.ErrKindTrailing},
		{"empty job id", hdr.str("c").uv(1).uv(1).uv(1).sv(0).str("").raw(make([]byte, 40)...), "events[0].job_id", schemas.ErrKindRange},
		{"state 99", hdr.str("c").uv(1).uv(1).uv(1).sv(0).str("1").str("").sv(-1).str("").str("").sv(-1).str("").str("").str("").str("").uv(99).raw(make([]byte, 30)...), "events[0].state", schemas.ErrKindUnknownEnum},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b schemas.JobEventBatch
			err := schemas.DecodeJobEventBatch(tt.msg, &b)
			var de *schemas.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("DecodeJobEventBatch error = %v; want a *DecodeError", err)
			}
			if de.Field != tt.field || de.Kind != tt.kind {
				t.Errorf("DecodeJobEventBatch error = %v; want field %q kind %q", err, tt.field, tt.kind)
			}
		})
	}
}

func TestAllocBatchRoundTripAndErrors(t *testing.T) {
	msg, err := schemas.AppendAllocBatch(nil, allocBatch())
	if err != nil {
		t.Fatal(err)
	}
	var b schemas.AllocBatch
	if err := schemas.DecodeAllocBatch(msg, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&b, allocBatch()) {
		t.Errorf("round trip = %+v; want %+v", b, allocBatch())
	}
	bad := allocBatch()
	bad.Allocs[2].Source = 0
	if _, err := schemas.AppendAllocBatch(nil, bad); err == nil || !strings.Contains(err.Error(), "allocs[2].source") {
		t.Errorf("AppendAllocBatch(source 0) error = %v; want one naming allocs[2].source", err)
	}
	hdr := wire{'H', 'S', 'A', 1}
	var de *schemas.DecodeError
	err = schemas.DecodeAllocBatch(hdr.str("c").uv(1).str("h").sv(0).str("").str("").str("j").str("").sv(0).sv(0).uv(7), &b)
	if !errors.As(err, &de) || de.Field != "allocs[0].source" || de.Kind != schemas.ErrKindUnknownEnum {
		t.Errorf("DecodeAllocBatch(source 7) = %v; want unknown_enum at allocs[0].source", err)
	}
}

// TestJobEventBatchShortest: events with every field at its shortest (29
// bytes each) decode, one or many. Before, the decoder bounded the count at
// one event per 30 bytes and refused them as truncated.
func TestJobEventBatchShortest(t *testing.T) {
	for _, n := range []int{1, 2, 29, 1000} {
		b := &schemas.JobEventBatch{Source: schemas.SourceSim, Events: make([]schemas.JobEvent, n)}
		for i := range b.Events {
			b.Events[i] = schemas.JobEvent{Type: schemas.JobSubmit, JobID: "1", State: schemas.StatePending}
		}
		msg, err := schemas.AppendJobEventBatch(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		var got schemas.JobEventBatch
		if err := schemas.DecodeJobEventBatch(msg, &got); err != nil || !reflect.DeepEqual(&got, b) {
			t.Errorf("DecodeJobEventBatch(%d shortest events, %d bytes) = %v; want them back", n, len(msg), err)
		}
	}
}

// FuzzEncodeJobEventBatch: what AppendJobEventBatch encodes, the decoder
// takes back as it was (the decoder's bounds refuse no valid message).
func FuzzEncodeJobEventBatch(f *testing.F) {
	f.Add(uint16(1), "1", "", int64(0), int64(0), int64(0), uint8(1), uint8(1))
	f.Add(uint16(300), "job", "node1", int64(-1), int64(1_700_000_000_000), int64(1<<40), uint8(4), uint8(3))
	f.Fuzz(func(t *testing.T, n uint16, id, node string, num, ms, big int64, typ, state uint8) {
		e := schemas.JobEvent{Type: schemas.JobEventType(typ), EventMillis: ms, JobID: id, ArrayTaskID: num, UID: num,
			State: schemas.JobState(state), ExitCode: num, Priority: big, SubmitMillis: ms, TimeLimitS: num,
			NodeCount: num, CPUs: big, GPUs: num, MemReqBytes: big}
		if node != "" {
			e.Nodes = []string{node}
		}
		b := &schemas.JobEventBatch{Cluster: node, Source: schemas.SourceSlurm, Events: make([]schemas.JobEvent, 1+int(n)%2000)}
		for i := range b.Events {
			b.Events[i] = e
		}
		msg, err := schemas.AppendJobEventBatch(nil, b)
		if err != nil {
			return
		}
		var got schemas.JobEventBatch
		if err := schemas.DecodeJobEventBatch(msg, &got); err != nil || !reflect.DeepEqual(&got, b) {
			t.Fatalf("DecodeJobEventBatch(AppendJobEventBatch(%d × %+v)) = %v; want them back", len(b.Events), e, err)
		}
	})
}

func FuzzDecodeJobEventBatch(f *testing.F) {
	good, err := schemas.AppendJobEventBatch(nil, jobBatch())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:40])
	f.Add([]byte{'H', 'S', 'J', 1, 0, 1, 0})
	f.Fuzz(func(t *testing.T, msg []byte) {
		var b schemas.JobEventBatch
		err := schemas.DecodeJobEventBatch(msg, &b)
		if err != nil {
			var de *schemas.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			return
		}
		// What decodes must re-encode to the same bytes.
		out, err := schemas.AppendJobEventBatch(nil, &b)
		if err != nil {
			t.Fatalf("re-encode decoded batch: %v", err)
		}
		var again schemas.JobEventBatch
		if err := schemas.DecodeJobEventBatch(out, &again); err != nil || !reflect.DeepEqual(&again, &b) {
			t.Fatalf("decode(encode(decoded)) = %+v, %v; want %+v", again, err, b)
		}
	})
}

func FuzzDecodeAllocBatch(f *testing.F) {
	good, err := schemas.AppendAllocBatch(nil, allocBatch())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:20])
	f.Fuzz(func(t *testing.T, msg []byte) {
		var b schemas.AllocBatch
		err := schemas.DecodeAllocBatch(msg, &b)
		if err != nil {
			var de *schemas.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			return
		}
		out, err := schemas.AppendAllocBatch(nil, &b)
		if err != nil {
			t.Fatalf("re-encode decoded batch: %v", err)
		}
		var again schemas.AllocBatch
		if err := schemas.DecodeAllocBatch(out, &again); err != nil || !reflect.DeepEqual(&again, &b) {
			t.Fatalf("decode(encode(decoded)) = %+v, %v; want %+v", again, err, b)
		}
	})
}
