package schemas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// kindActionBatch is the header kind byte of an ActionBatch ('A' is taken by
// AllocBatch).
const kindActionBatch = 'X'

// Limits of an ActionBatch, so that a corrupt length or count cannot make the
// decoder allocate without bound.
const (
	// MaxActionsPerMessage bounds the actions of one ActionBatch.
	MaxActionsPerMessage = 1 << 14
	// MaxActionTextLen bounds an action's Reason, Basis and Error, in bytes.
	// Its other strings are bounded by MaxStringLen.
	MaxActionTextLen = 16 << 10
)

// Action is one audited actuator action as the actions table holds it.
type Action struct {
	ID               string // action id
	Adapter          string // "slurm", "sim"
	Kind             string // "set_priority", "power_down", "power_up"
	Target           string // job id or node name
	Partition        string
	Value            *int64 // new priority; nil for power actions
	Previous         *int64 // priority it replaces; nil when unknown
	Reason           string
	Basis            string // JSON text
	ModelVersion     uint64
	DryRun           bool
	Outcome          string // "planned", "applied", "skipped", "failed"
	Error            string
	DecidedAtMillis  int64 // Unix ms
	RecordedAtMillis int64 // Unix ms; 0 when not recorded yet
}

// ActionBatch is one Kafka message on TopicActions: one cluster's actions of one write.
type ActionBatch struct {
	Cluster string
	Actions []Action
}

// Action kinds and outcomes travel as numbers; the index is the wire value and
// is part of the format (0 is never valid). Go code keeps the strings of the
// actions table, so that the actuator can copy its audit records straight in.
var (
	actionKindNames    = [...]string{1: "set_priority", 2: "power_down", 3: "power_up"}
	actionOutcomeNames = [...]string{1: "planned", 2: "applied", 3: "skipped", 4: "failed"}
)

// actionEnum returns the wire number of name in names, or 0 when it is not
// there.
func actionEnum(names []string, name string) uint64 {
	for i := 1; i < len(names); i++ {
		if names[i] == name {
			return uint64(i)
		}
	}
	return 0
}

// Action batch wire format, version 1 (after the header 'H' 'S' 'X' 1):
// cluster string, action count uvarint, then per action in the order of the
// Action fields: action id, adapter strings, kind uvarint (1 set_priority,
// 2 power_down, 3 power_up), target, partition strings, value and previous
// (each a presence byte, 0 for nil or 1, then a varint when 1), reason, basis
// texts, model version uvarint, dry run byte (0 or 1), outcome uvarint
// (1 planned, 2 applied, 3 skipped, 4 failed), error text, decided at and
// recorded at varints (Unix ms). Strings and texts are a uvarint byte length
// and UTF-8 bytes; a string holds at most MaxStringLen bytes, a text at most
// MaxActionTextLen. The action id is never empty. Unlike the other messages,
// every varint must be minimal (no 0x80 0x00 for 0), so that a message decodes
// only from the bytes its encoding gives back.

// AppendActionBatch appends the encoding of b to dst. On error it returns dst
// as it was.
func AppendActionBatch(dst []byte, b *ActionBatch) ([]byte, error) {
	out, err := appendActionBatch(dst, b)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func appendActionBatch(dst []byte, b *ActionBatch) ([]byte, error) {
	if p := actionTextProblem(b.Cluster, MaxStringLen); p != "" {
		return dst, fmt.Errorf("schemas: encode action batch: cluster: %s", p)
	}
	if len(b.Actions) > MaxActionsPerMessage {
		return dst, fmt.Errorf("schemas: encode action batch: %d actions exceeds %d", len(b.Actions), MaxActionsPerMessage)
	}
	dst = appendHeader(dst, kindActionBatch)
	dst = appendString(dst, b.Cluster)
	dst = binary.AppendUvarint(dst, uint64(len(b.Actions)))
	for i := range b.Actions {
		a := &b.Actions[i]
		kind, outcome, err := a.check()
		if err != nil {
			return dst, fmt.Errorf("schemas: encode action batch: actions[%d].%v", i, err)
		}
		dst = appendString(dst, a.ID)
		dst = appendString(dst, a.Adapter)
		dst = binary.AppendUvarint(dst, kind)
		dst = appendString(dst, a.Target)
		dst = appendString(dst, a.Partition)
		dst = appendNullable(dst, a.Value)
		dst = appendNullable(dst, a.Previous)
		dst = appendString(dst, a.Reason)
		dst = appendString(dst, a.Basis)
		dst = binary.AppendUvarint(dst, a.ModelVersion)
		dst = append(dst, b2byte(a.DryRun))
		dst = binary.AppendUvarint(dst, outcome)
		dst = appendString(dst, a.Error)
		dst = binary.AppendVarint(dst, a.DecidedAtMillis)
		dst = binary.AppendVarint(dst, a.RecordedAtMillis)
	}
	return dst, nil
}

// check returns a's kind and outcome wire numbers, or an error that starts
// with the field's name (the caller puts "actions[i]." before it).
func (a *Action) check() (kind, outcome uint64, err error) {
	if a.ID == "" {
		return 0, 0, errors.New("action_id is empty")
	}
	if kind = actionEnum(actionKindNames[:], a.Kind); kind == 0 {
		return 0, 0, fmt.Errorf("kind %q is unknown", a.Kind)
	}
	if outcome = actionEnum(actionOutcomeNames[:], a.Outcome); outcome == 0 {
		return 0, 0, fmt.Errorf("outcome %q is unknown", a.Outcome)
	}
	for _, f := range [...]struct {
		name, v string
		max     int
	}{
		{"action_id", a.ID, MaxStringLen}, {"adapter", a.Adapter, MaxStringLen},
		{"target", a.Target, MaxStringLen}, {"partition_name", a.Partition, MaxStringLen},
		{"reason", a.Reason, MaxActionTextLen}, {"basis", a.Basis, MaxActionTextLen},
		{"error", a.Error, MaxActionTextLen},
	} {
		if p := actionTextProblem(f.v, f.max); p != "" {
			return 0, 0, fmt.Errorf("%s: %s", f.name, p)
		}
	}
	for _, f := range [...]struct {
		name string
		ms   int64
	}{{"decided_at", a.DecidedAtMillis}, {"recorded_at", a.RecordedAtMillis}} {
		if p := TimeProblem(f.ms); p != "" {
			return 0, 0, fmt.Errorf("%s: %s", f.name, p)
		}
	}
	return kind, outcome, nil
}

// actionTextProblem says what keeps s from the wire, or "".
func actionTextProblem(s string, max int) string {
	if len(s) > max {
		return fmt.Sprintf("%d bytes exceeds %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	return ""
}

func appendNullable(dst []byte, v *int64) []byte {
	if v == nil {
		return append(dst, 0)
	}
	return binary.AppendVarint(append(dst, 1), *v)
}

func b2byte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// actionMinLen is the fewest bytes one action takes: fifteen fields of at
// least one byte each.
const actionMinLen = 15

// DecodeActionBatch decodes msg into b, reusing b's action slice (but never
// the integers its Value and Previous point at). On error the error is a
// *DecodeError.
func DecodeActionBatch(msg []byte, b *ActionBatch) error {
	b.Cluster, b.Actions = "", b.Actions[:0]
	r := reader{b: msg, msg: "action batch"}
	if err := r.header(kindActionBatch); err != nil {
		return err
	}
	var err error
	if b.Cluster, err = r.minString("cluster", -1, MaxStringLen); err != nil {
		return err
	}
	start := r.off
	n, err := r.minUvarint("action count", -1)
	if err != nil {
		return err
	}
	if n > MaxActionsPerMessage {
		r.off = start
		return r.fail("action count", -1, ErrKindRange, fmt.Sprintf("%d exceeds %d", n, MaxActionsPerMessage))
	}
	if left := uint64(len(msg) - r.off); n > left/actionMinLen {
		return r.fail("action count", -1, ErrKindTruncated, fmt.Sprintf("%d actions cannot fit in %d bytes", n, left))
	}
	for i := 0; i < int(n); i++ {
		var a Action
		if err := r.action(i, &a); err != nil {
			return err
		}
		b.Actions = append(b.Actions, a)
	}
	return r.end()
}

func (r *reader) action(i int, a *Action) error {
	start := r.off
	var err error
	if a.ID, err = r.minString("actions[%d].action_id", i, MaxStringLen); err != nil {
		return err
	}
	if a.ID == "" {
		r.off = start
		return r.fail("actions[%d].action_id", i, ErrKindRange, "action id is empty")
	}
	if a.Adapter, err = r.minString("actions[%d].adapter", i, MaxStringLen); err != nil {
		return err
	}
	if a.Kind, err = r.minEnum("actions[%d].kind", i, actionKindNames[:]); err != nil {
		return err
	}
	if a.Target, err = r.minString("actions[%d].target", i, MaxStringLen); err != nil {
		return err
	}
	if a.Partition, err = r.minString("actions[%d].partition_name", i, MaxStringLen); err != nil {
		return err
	}
	if a.Value, err = r.nullable("actions[%d].value", i); err != nil {
		return err
	}
	if a.Previous, err = r.nullable("actions[%d].previous", i); err != nil {
		return err
	}
	if a.Reason, err = r.minString("actions[%d].reason", i, MaxActionTextLen); err != nil {
		return err
	}
	if a.Basis, err = r.minString("actions[%d].basis", i, MaxActionTextLen); err != nil {
		return err
	}
	if a.ModelVersion, err = r.minUvarint("actions[%d].model_version", i); err != nil {
		return err
	}
	dry, err := r.flag("actions[%d].dry_run", i)
	if err != nil {
		return err
	}
	a.DryRun = dry == 1
	if a.Outcome, err = r.minEnum("actions[%d].outcome", i, actionOutcomeNames[:]); err != nil {
		return err
	}
	if a.Error, err = r.minString("actions[%d].error", i, MaxActionTextLen); err != nil {
		return err
	}
	for _, f := range [...]struct {
		name string
		dst  *int64
	}{{"actions[%d].decided_at", &a.DecidedAtMillis}, {"actions[%d].recorded_at", &a.RecordedAtMillis}} {
		start := r.off
		if *f.dst, err = r.minVarint(f.name, i); err != nil {
			return err
		}
		if p := TimeProblem(*f.dst); p != "" {
			r.off = start
			return r.fail(f.name, i, ErrKindRange, p)
		}
	}
	return nil
}

// minUvarint is uvarint that also refuses a non-minimal encoding.
func (r *reader) minUvarint(field string, idx int) (uint64, error) {
	start := r.off
	v, err := r.uvarint(field, idx)
	if err != nil {
		return 0, err
	}
	return v, r.minimal(start, field, idx)
}

// minVarint is varint that also refuses a non-minimal encoding.
func (r *reader) minVarint(field string, idx int) (int64, error) {
	start := r.off
	v, err := r.varint(field, idx)
	if err != nil {
		return 0, err
	}
	return v, r.minimal(start, field, idx)
}

// minimal checks the varint just read from start: one of more than one byte
// whose last byte is 0 could have been shorter. On failure the offset goes
// back to start.
func (r *reader) minimal(start int, field string, idx int) error {
	if r.off-start > 1 && r.b[r.off-1] == 0 {
		r.off = start
		return r.fail(field, idx, ErrKindVarint, "varint is not minimal")
	}
	return nil
}

// minString reads a string of at most max bytes whose length is a minimal
// uvarint.
func (r *reader) minString(field string, idx int, max uint64) (string, error) {
	start := r.off
	n, err := r.minUvarint(field, idx)
	if err != nil {
		return "", err
	}
	if n > max {
		r.off = start
		return "", r.fail(field, idx, ErrKindRange, fmt.Sprintf("%d bytes exceeds %d", n, max))
	}
	return r.stringBody(field, idx, n)
}

// minEnum reads a minimal uvarint that must index a name in names (0 never
// does) and returns the name.
func (r *reader) minEnum(field string, idx int, names []string) (string, error) {
	start := r.off
	v, err := r.minUvarint(field, idx)
	if err != nil {
		return "", err
	}
	if v == 0 || v >= uint64(len(names)) {
		r.off = start
		return "", r.fail(field, idx, ErrKindUnknownEnum, fmt.Sprintf("value %d", v))
	}
	return names[v], nil
}

// flag reads one byte that must be 0 or 1.
func (r *reader) flag(field string, idx int) (byte, error) {
	if r.off >= len(r.b) {
		return 0, r.fail(field, idx, ErrKindTruncated, "message ends before a flag byte")
	}
	v := r.b[r.off]
	if v > 1 {
		return 0, r.fail(field, idx, ErrKindRange, fmt.Sprintf("flag byte %d, want 0 or 1", v))
	}
	r.off++
	return v, nil
}

// nullable reads a presence flag and, when it is 1, a minimal varint.
func (r *reader) nullable(field string, idx int) (*int64, error) {
	present, err := r.flag(field, idx)
	if err != nil || present == 0 {
		return nil, err
	}
	v, err := r.minVarint(field, idx)
	if err != nil {
		return nil, err
	}
	return &v, nil
}
