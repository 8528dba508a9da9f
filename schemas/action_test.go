package schemas_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

func int64p(v int64) *int64 { return &v }

// encodeActions encodes b or fails the test.
func encodeActions(t testing.TB, b *schemas.ActionBatch) []byte {
	t.Helper()
	msg, err := schemas.AppendActionBatch(nil, b)
	if err != nil {
		t.Fatalf("AppendActionBatch: %v", err)
	}
	return msg
}

// normActions is normSamples for action batches.
func normActions(b *schemas.ActionBatch) schemas.ActionBatch {
	c := *b
	if len(c.Actions) == 0 {
		c.Actions = nil
	}
	return c
}

// minAction is the action that minimal() appends by hand.
var minAction = schemas.Action{ID: "a", Kind: "set_priority", Outcome: "planned"}

// minimal appends minAction's encoding field by field: the shortest action
// there is (16 bytes).
func (w wire) minimal() wire {
	return w.str("a").str("").uv(1).str("").str("").raw(0).raw(0).str("").str("").uv(0).raw(0).uv(1).str("").sv(0).sv(0)
}

// TestActionBatchLayout builds one message by hand from the documented layout
// and checks that the encoder writes exactly it and the decoder reads it back:
// the enum numbering and field order are pinned here as well as in the golden
// files.
func TestActionBatchLayout(t *testing.T) {
	b := &schemas.ActionBatch{Cluster: "eos", Actions: []schemas.Action{
		{ID: "id1", Adapter: "slurm", Kind: "set_priority", Target: "42", Partition: "batch", Value: int64p(-3), Previous: int64p(300),
			Reason: "r", Basis: "{}", ModelVersion: 300, DryRun: true, Outcome: "planned", Error: "", DecidedAtMillis: baseTS, RecordedAtMillis: 1},
		{ID: "id2", Adapter: "sim", Kind: "power_down", Target: "n1", Outcome: "applied", DecidedAtMillis: 1},
		{ID: "id3", Adapter: "sim", Kind: "power_up", Target: "n2", Outcome: "skipped", Error: "dry run"},
		{ID: "id4", Adapter: "sim", Kind: "power_up", Target: "n3", Outcome: "failed", Error: "e"},
	}}
	want := actionHeader().str("eos").uv(4).
		str("id1").str("slurm").uv(1).str("42").str("batch").raw(1).sv(-3).raw(1).sv(300).str("r").str("{}").uv(300).raw(1).uv(1).str("").sv(baseTS).sv(1).
		str("id2").str("sim").uv(2).str("n1").str("").raw(0).raw(0).str("").str("").uv(0).raw(0).uv(2).str("").sv(1).sv(0).
		str("id3").str("sim").uv(3).str("n2").str("").raw(0).raw(0).str("").str("").uv(0).raw(0).uv(3).str("dry run").sv(0).sv(0).
		str("id4").str("sim").uv(3).str("n3").str("").raw(0).raw(0).str("").str("").uv(0).raw(0).uv(4).str("e").sv(0).sv(0)
	if got := encodeActions(t, b); !bytes.Equal(got, want) {
		t.Fatalf("AppendActionBatch = % x; want % x", got, []byte(want))
	}
	var got schemas.ActionBatch
	if err := schemas.DecodeActionBatch(want, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, b) {
		t.Errorf("DecodeActionBatch(hand-built) = %+v; want %+v", got, *b)
	}
	if got := encodeActions(t, &schemas.ActionBatch{Actions: []schemas.Action{minAction}}); !bytes.Equal(got, actionHeader().str("").uv(1).minimal()) {
		t.Errorf("AppendActionBatch(minAction) = % x; want % x", got, []byte(actionHeader().str("").uv(1).minimal()))
	}
}

func TestActionBatchRoundTrip(t *testing.T) {
	longBasis := `{"x":"` + strings.Repeat("é", (schemas.MaxActionTextLen-8)/2) + `"}`
	tests := []struct {
		name string
		b    *schemas.ActionBatch
	}{
		{"fixture", actionsBatch()},
		{"empty batch", &schemas.ActionBatch{Cluster: "eos"}},
		{"empty batch, empty cluster", &schemas.ActionBatch{}},
		{"minimal action", &schemas.ActionBatch{Actions: []schemas.Action{minAction}}},
		{"nil value and previous", &schemas.ActionBatch{Cluster: "c", Actions: []schemas.Action{
			{ID: "1", Adapter: "sim", Kind: "power_down", Target: "n1", Outcome: "applied"},
		}}},
		{"value set, previous unknown", &schemas.ActionBatch{Cluster: "c", Actions: []schemas.Action{
			{ID: "1", Kind: "set_priority", Target: "9", Value: int64p(1), Outcome: "planned"},
		}}},
		{"previous set, value nil", &schemas.ActionBatch{Cluster: "c", Actions: []schemas.Action{
			{ID: "1", Kind: "set_priority", Target: "9", Previous: int64p(0), Outcome: "failed", Error: "gone"},
		}}},
		{"zero and negative values", &schemas.ActionBatch{Cluster: "c", Actions: []schemas.Action{
			{ID: "1", Kind: "set_priority", Value: int64p(0), Previous: int64p(-1), Outcome: "applied"},
			{ID: "2", Kind: "set_priority", Value: int64p(math.MinInt64), Previous: int64p(math.MaxInt64), Outcome: "applied"},
		}}},
		{"dry run", &schemas.ActionBatch{Cluster: "c", Actions: []schemas.Action{
			{ID: "1", Kind: "power_up", Target: "n", DryRun: true, Outcome: "skipped", Error: "dry run"},
		}}},
		{"extreme times and model version", &schemas.ActionBatch{Cluster: "c", Actions: []schemas.Action{
			{ID: "1", Kind: "power_up", Outcome: "planned", ModelVersion: math.MaxUint64, DecidedAtMillis: 0, RecordedAtMillis: schemas.MaxTimeMillis},
		}}},
		{"longest strings and texts", &schemas.ActionBatch{Cluster: strings.Repeat("c", schemas.MaxStringLen), Actions: []schemas.Action{{
			ID: strings.Repeat("i", schemas.MaxStringLen), Adapter: strings.Repeat("a", schemas.MaxStringLen), Kind: "set_priority",
			Target: strings.Repeat("t", schemas.MaxStringLen), Partition: strings.Repeat("ü", schemas.MaxStringLen/2),
			Value: int64p(1), Reason: strings.Repeat("r", schemas.MaxActionTextLen), Basis: longBasis,
			Outcome: "failed", Error: strings.Repeat("€", schemas.MaxActionTextLen/3),
		}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := encodeActions(t, tt.b)
			// Decode into a batch that held more actions, with pointers of its
			// own: nothing of it may leak into the result.
			got := actionsBatch()
			kept := got.Actions[0].Value
			if err := schemas.DecodeActionBatch(msg, got); err != nil {
				t.Fatalf("DecodeActionBatch: %v", err)
			}
			if g, w := normActions(got), normActions(tt.b); !reflect.DeepEqual(g, w) {
				t.Errorf("DecodeActionBatch(AppendActionBatch(b)) = %+v; want %+v", g, w)
			}
			if *kept != 9000 {
				t.Errorf("DecodeActionBatch wrote through an old Value pointer: now %d", *kept)
			}
			if again := encodeActions(t, got); !bytes.Equal(again, msg) {
				t.Errorf("re-encoding differs: % x; want % x", short(again), short(msg))
			}
		})
	}
}

// TestActionBatchMaxCount round-trips MaxActionsPerMessage of the shortest
// actions: the decoder's size check must let the largest count through.
func TestActionBatchMaxCount(t *testing.T) {
	b := &schemas.ActionBatch{Cluster: "eos", Actions: make([]schemas.Action, schemas.MaxActionsPerMessage)}
	for i := range b.Actions {
		b.Actions[i] = minAction
	}
	msg := encodeActions(t, b)
	var got schemas.ActionBatch
	if err := schemas.DecodeActionBatch(msg, &got); err != nil {
		t.Fatalf("DecodeActionBatch(%d bytes): %v", len(msg), err)
	}
	if !reflect.DeepEqual(&got, b) {
		t.Error("DecodeActionBatch(AppendActionBatch(b)) differs from b")
	}
}

func TestAppendActionBatchRejects(t *testing.T) {
	long := strings.Repeat("x", schemas.MaxStringLen+1)
	longText := strings.Repeat("x", schemas.MaxActionTextLen+1)
	tests := []struct {
		name   string
		mutate func(b *schemas.ActionBatch)
		want   string // in the error text
	}{
		{"cluster too long", func(b *schemas.ActionBatch) { b.Cluster = long }, "cluster: 1025 bytes exceeds 1024"},
		{"cluster not UTF-8", func(b *schemas.ActionBatch) { b.Cluster = "\xff" }, "cluster: not valid UTF-8"},
		{"too many actions", func(b *schemas.ActionBatch) {
			b.Actions = make([]schemas.Action, schemas.MaxActionsPerMessage+1)
		}, "16385 actions exceeds 16384"},
		{"empty id", func(b *schemas.ActionBatch) { b.Actions[1].ID = "" }, "actions[1].action_id is empty"},
		{"id too long", func(b *schemas.ActionBatch) { b.Actions[0].ID = long }, "actions[0].action_id: 1025 bytes exceeds 1024"},
		{"id not UTF-8", func(b *schemas.ActionBatch) { b.Actions[0].ID = "1-\xc3" }, "actions[0].action_id: not valid UTF-8"},
		{"adapter too long", func(b *schemas.ActionBatch) { b.Actions[2].Adapter = long }, "actions[2].adapter: 1025 bytes"},
		{"adapter not UTF-8", func(b *schemas.ActionBatch) { b.Actions[2].Adapter = "\xfe" }, "actions[2].adapter: not valid UTF-8"},
		{"empty kind", func(b *schemas.ActionBatch) { b.Actions[3].Kind = "" }, `actions[3].kind "" is unknown`},
		{"unknown kind", func(b *schemas.ActionBatch) { b.Actions[3].Kind = "drain" }, `actions[3].kind "drain" is unknown`},
		{"kind in upper case", func(b *schemas.ActionBatch) { b.Actions[0].Kind = "SET_PRIORITY" }, `actions[0].kind "SET_PRIORITY" is unknown`},
		{"target too long", func(b *schemas.ActionBatch) { b.Actions[1].Target = long }, "actions[1].target: 1025 bytes"},
		{"target not UTF-8", func(b *schemas.ActionBatch) { b.Actions[1].Target = "\x80" }, "actions[1].target: not valid UTF-8"},
		{"partition too long", func(b *schemas.ActionBatch) { b.Actions[4].Partition = long }, "actions[4].partition_name: 1025 bytes"},
		{"partition not UTF-8", func(b *schemas.ActionBatch) { b.Actions[4].Partition = "d\xe9bug" }, "actions[4].partition_name: not valid UTF-8"},
		{"reason too long", func(b *schemas.ActionBatch) { b.Actions[0].Reason = longText }, "actions[0].reason: 16385 bytes exceeds 16384"},
		{"reason not UTF-8", func(b *schemas.ActionBatch) { b.Actions[0].Reason = "\xff" }, "actions[0].reason: not valid UTF-8"},
		{"basis too long", func(b *schemas.ActionBatch) { b.Actions[2].Basis = longText }, "actions[2].basis: 16385 bytes exceeds 16384"},
		{"basis not UTF-8", func(b *schemas.ActionBatch) { b.Actions[2].Basis = "{\"a\":\"\xff\"}" }, "actions[2].basis: not valid UTF-8"},
		{"empty outcome", func(b *schemas.ActionBatch) { b.Actions[1].Outcome = "" }, `actions[1].outcome "" is unknown`},
		{"unknown outcome", func(b *schemas.ActionBatch) { b.Actions[4].Outcome = "done" }, `actions[4].outcome "done" is unknown`},
		{"error too long", func(b *schemas.ActionBatch) { b.Actions[3].Error = longText }, "actions[3].error: 16385 bytes exceeds 16384"},
		{"error not UTF-8", func(b *schemas.ActionBatch) { b.Actions[3].Error = "\xc0\xaf" }, "actions[3].error: not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := actionsBatch()
			tt.mutate(b)
			dst := []byte("keep")
			out, err := schemas.AppendActionBatch(dst, b)
			if err == nil {
				t.Fatalf("AppendActionBatch(%s) error = nil; want one containing %q", tt.name, tt.want)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "schemas: encode action batch: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("AppendActionBatch(%s) error = %q; want one starting with \"schemas: encode action batch: \" and containing %q", tt.name, msg, tt.want)
			}
			if string(out) != "keep" {
				t.Errorf("AppendActionBatch(%s) returned %q on error; want dst unchanged", tt.name, out)
			}
		})
	}
}

func TestDecodeActionBatchErrors(t *testing.T) {
	const (
		truncated   = schemas.ErrKindTruncated
		badMagic    = schemas.ErrKindMagic
		wrongKind   = schemas.ErrKindKind
		version     = schemas.ErrKindVersion
		outRange    = schemas.ErrKindRange
		badUTF8     = schemas.ErrKindUTF8
		trailing    = schemas.ErrKindTrailing
		badVarint   = schemas.ErrKindVarint
		unknownEnum = schemas.ErrKindUnknownEnum
	)
	hdr := actionHeader()
	c := hdr.str("eos")
	pad := make([]byte, 40) // room after a fault, so that the count check passes
	one := c.uv(1)
	// One action up to (not including) each field.
	toAdapter := one.str("a")
	toKind := toAdapter.str("slurm")
	toTarget := toKind.uv(1)
	toValue := toTarget.str("42").str("batch")
	toPrevious := toValue.raw(1).sv(-7)
	toReason := toPrevious.raw(0)
	toBasis := toReason.str("why")
	toModel := toBasis.str("{}")
	toDry := toModel.uv(3)
	toOutcome := toDry.raw(1)
	toError := toOutcome.uv(2)
	toDecided := toError.str("")
	toRecorded := toDecided.sv(baseTS)
	// Three good actions, then the fourth up to its outcome.
	fourth := c.uv(4).minimal().minimal().minimal().str("d").str("").uv(2).str("n").str("").raw(0).raw(0).str("").str("").uv(0).raw(0)
	valid := encodeActions(t, actionsBatch())
	events := encodeEvents(t, eventsBatch())
	long := strings.Repeat("x", schemas.MaxStringLen+1)
	longText := strings.Repeat("x", schemas.MaxActionTextLen+1)
	overflow := append(bytes.Repeat([]byte{0xff}, 9), 0x02)

	tests := []decodeErrorCase{
		{"empty", nil, "header", truncated, 0},
		{"short header", []byte("HSX"), "header", truncated, 0},
		{"bad magic", []byte("hSX\x01"), "header", badMagic, 0},
		{"event batch", events, "header.kind", wrongKind, 0},
		{"alloc kind", []byte("HSA\x01"), "header.kind", wrongKind, 0},
		{"version 0", []byte("HSX\x00"), "header.version", version, 0},
		{"version 2", []byte("HSX\x02"), "header.version", version, 0},
		{"header only", hdr, "cluster", truncated, 4},
		{"cluster truncated", hdr.uv(3).text("eo"), "cluster", truncated, 5},
		{"cluster not UTF-8", hdr.str("e\xff"), "cluster", badUTF8, 5},
		{"cluster over MaxStringLen", hdr.str(long).uv(0), "cluster", outRange, 4},
		{"cluster length not minimal", hdr.raw(0x83, 0x00).text("eos").uv(0), "cluster", badVarint, 4},
		{"no count", c, "action count", truncated, len(c)},
		{"count overflows 64 bits", c.raw(overflow...), "action count", badVarint, len(c)},
		{"count not minimal", c.raw(0x80, 0x00), "action count", badVarint, len(c)},
		{"count over MaxActionsPerMessage", c.uv(schemas.MaxActionsPerMessage + 1).raw(pad...), "action count", outRange, len(c)},
		// The size check runs after the count is read, so the offset is past it.
		{"count cannot fit", c.uv(2).raw(make([]byte, 29)...), "action count", truncated, len(c) + 1},
		{"huge count cannot fit", c.uv(schemas.MaxActionsPerMessage).minimal(), "action count", truncated, len(c) + 3},
		{"empty action id", one.str("").raw(pad...), "actions[0].action_id", outRange, len(one)},
		{"action id over MaxStringLen", one.str(long).raw(pad...), "actions[0].action_id", outRange, len(one)},
		{"action id not UTF-8", one.str("\xc3(").raw(pad...), "actions[0].action_id", badUTF8, len(one) + 1},
		{"adapter truncated", toAdapter.uv(20).text("slurm").raw(make([]byte, 10)...), "actions[0].adapter", truncated, len(toAdapter) + 1},
		{"kind 0", toKind.uv(0).raw(pad...), "actions[0].kind", unknownEnum, len(toKind)},
		{"kind 4", toKind.uv(4).raw(pad...), "actions[0].kind", unknownEnum, len(toKind)},
		{"kind over 8 bits", toKind.uv(1<<8 | 1).raw(pad...), "actions[0].kind", unknownEnum, len(toKind)},
		{"kind not minimal", toKind.raw(0x81, 0x00).raw(pad...), "actions[0].kind", badVarint, len(toKind)},
		{"target over MaxStringLen", toTarget.str(long).raw(pad...), "actions[0].target", outRange, len(toTarget)},
		{"partition not UTF-8", toTarget.str("42").str("\xed\xa0\x80").raw(pad...), "actions[0].partition_name", badUTF8, len(toTarget.str("42")) + 1},
		{"value presence 2", toValue.raw(2).raw(pad...), "actions[0].value", outRange, len(toValue)},
		{"value presence 0xff", toValue.raw(0xff).raw(pad...), "actions[0].value", outRange, len(toValue)},
		{"value truncated", toValue.raw(1, 0x80), "actions[0].value", truncated, len(toValue) + 1},
		{"value overflows 64 bits", toValue.raw(1).raw(overflow...).raw(pad...), "actions[0].value", badVarint, len(toValue) + 1},
		{"value not minimal", toValue.raw(1, 0x80, 0x80, 0x00).raw(pad...), "actions[0].value", badVarint, len(toValue) + 1},
		{"previous presence 7", toPrevious.raw(7).raw(pad...), "actions[0].previous", outRange, len(toPrevious)},
		{"previous missing", toPrevious, "actions[0].previous", truncated, len(toPrevious)},
		{"reason over MaxActionTextLen", toReason.str(longText).raw(pad...), "actions[0].reason", outRange, len(toReason)},
		{"reason longer than the message", toReason.uv(schemas.MaxActionTextLen).text("short"), "actions[0].reason", truncated, len(toReason) + 3},
		{"basis not UTF-8", toBasis.str("{\"a\":\"\xff\"}").raw(pad...), "actions[0].basis", badUTF8, len(toBasis) + 1},
		{"basis over MaxActionTextLen", toBasis.str(longText).raw(pad...), "actions[0].basis", outRange, len(toBasis)},
		{"model version overflows 64 bits", toModel.raw(overflow...).raw(pad...), "actions[0].model_version", badVarint, len(toModel)},
		{"model version not minimal", toModel.raw(0x83, 0x00).raw(pad...), "actions[0].model_version", badVarint, len(toModel)},
		{"dry run 2", toDry.raw(2).raw(pad...), "actions[0].dry_run", outRange, len(toDry)},
		{"dry run 0x80", toDry.raw(0x80).raw(pad...), "actions[0].dry_run", outRange, len(toDry)},
		{"outcome 0", toOutcome.uv(0).raw(pad...), "actions[0].outcome", unknownEnum, len(toOutcome)},
		{"outcome 5", toOutcome.uv(5).raw(pad...), "actions[0].outcome", unknownEnum, len(toOutcome)},
		{"outcome of fourth action 9", fourth.uv(9).str("").sv(0).sv(0), "actions[3].outcome", unknownEnum, len(fourth)},
		{"error over MaxActionTextLen", toError.str(longText).raw(pad...), "actions[0].error", outRange, len(toError)},
		{"error not UTF-8", toError.str("\xf8\x88\x80\x80\x80").raw(pad...), "actions[0].error", badUTF8, len(toError) + 1},
		{"decided at not minimal", toDecided.raw(0xff, 0x00).raw(pad...), "actions[0].decided_at", badVarint, len(toDecided)},
		{"recorded at truncated", toRecorded.raw(0x80), "actions[0].recorded_at", truncated, len(toRecorded)},
		{"recorded at missing", toRecorded, "actions[0].recorded_at", truncated, len(toRecorded)},
		{"pad after a full action", toRecorded.sv(0).raw(pad...), "end", trailing, len(toRecorded) + 1},
		{"trailing byte", wire(valid).raw(0), "end", trailing, len(valid)},
		{"trailing action", wire(valid).minimal(), "end", trailing, len(valid)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b schemas.ActionBatch
			err := schemas.DecodeActionBatch(tt.msg, &b)
			checkDecodeError(t, "DecodeActionBatch", "action batch", tt, err)
		})
	}
}

// TestDecodeActionBatchPrefixes cuts a valid message at every byte: each
// prefix must be refused as truncated, at an offset within the prefix.
func TestDecodeActionBatchPrefixes(t *testing.T) {
	for _, b := range []*schemas.ActionBatch{actionsBatch(), {Cluster: "eos"}} {
		msg := encodeActions(t, b)
		for n := range len(msg) {
			var got schemas.ActionBatch
			err := schemas.DecodeActionBatch(msg[:n], &got)
			var de *schemas.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("DecodeActionBatch(first %d of %d bytes) error = %v (%T); want a *schemas.DecodeError", n, len(msg), err, err)
			}
			if de.Kind != schemas.ErrKindTruncated || de.Field == "" || de.Offset < 0 || de.Offset > n {
				t.Errorf("DecodeActionBatch(first %d of %d bytes) = %v; want truncated at a named field within the prefix", n, len(msg), err)
			}
		}
	}
}

func FuzzDecodeActionBatch(f *testing.F) {
	for _, c := range goldenCases() {
		if c.actions != nil {
			f.Add(c.encode(f))
		}
	}
	c := actionHeader().str("eos")
	for _, msg := range [][]byte{
		nil,
		[]byte("HSX\x01"),
		[]byte("HSA\x01"),
		c.uv(schemas.MaxActionsPerMessage),
		c.uv(1).minimal(),
		c.uv(2).minimal().minimal(),
		c.uv(1).str("a").str("").uv(4).str("").str("").raw(0).raw(0).str("").str("").uv(0).raw(0).uv(1).str("").sv(0).sv(0),
		c.uv(1).str("a").str("").uv(1).str("").str("").raw(1).sv(-1).raw(2).str("").str("").uv(0).raw(0).uv(1).str("").sv(0).sv(0),
		c.uv(1).str("a").str("").uv(1).str("").str("").raw(0).raw(0).str("").str("").uv(0).raw(3).uv(1).str("").sv(0).sv(0),
		// A non-minimal count, which the decoder must refuse.
		c.raw(0x81, 0x00).minimal(),
	} {
		f.Add([]byte(msg))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var b schemas.ActionBatch
		err := schemas.DecodeActionBatch(msg, &b)
		if err != nil {
			var de *schemas.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("DecodeActionBatch(%q) error = %v (%T); want a *schemas.DecodeError", msg, err, err)
			}
			if de.Offset < 0 || de.Offset > len(msg) || de.Field == "" || de.Kind == "" || de.Message != "action batch" {
				t.Fatalf("DecodeActionBatch(%q) = %#v; want a field, a kind and an offset within the message", msg, de)
			}
			return
		}
		// The format has one encoding per batch: what decodes re-encodes to
		// the very same bytes.
		enc, err := schemas.AppendActionBatch(nil, &b)
		if err != nil {
			t.Fatalf("AppendActionBatch(DecodeActionBatch(%q)): %v; the encoder must accept what the decoder accepts", msg, err)
		}
		if !bytes.Equal(enc, msg) {
			t.Fatalf("AppendActionBatch(DecodeActionBatch(%q)) = %q; want the message back", msg, enc)
		}
		// Decode into a dirty batch: reuse must not leak old actions.
		again := actionsBatch()
		if err := schemas.DecodeActionBatch(enc, again); err != nil {
			t.Fatalf("DecodeActionBatch(AppendActionBatch(DecodeActionBatch(%q))): %v", msg, err)
		}
		if g, w := normActions(again), normActions(&b); !reflect.DeepEqual(g, w) {
			t.Fatalf("round trip of %q = %+v; want %+v", msg, g, w)
		}
	})
}
