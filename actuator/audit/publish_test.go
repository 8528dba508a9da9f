package audit

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/heliostat-dev/heliostat/collector/publish"
	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// readActions reads n messages from the one partition of TopicActions.
func readActions(t *testing.T, addr string, n int) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: schemas.TopicActions, Partition: 0, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	var out []kafka.Message
	for range n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %s after %d messages: %v", schemas.TopicActions, len(out), err)
		}
		out = append(out, m)
	}
	return out
}

// TestPublishedSettle: settled actions reach heliostat.actions with their
// outcomes, one message per cluster keyed by it, after the table has them;
// a plan alone publishes nothing, and an action too long to encode is
// counted and logged but still settled in the table.
func TestPublishedSettle(t *testing.T) {
	cfg, conn := schematest.Database(t)
	_, addr := schematest.Broker(t, kfake.SeedTopics(1, schemas.TopicActions))
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	rec := t0.Add(time.Minute)
	l, err := New(conn, cfg.Database, func() time.Time { return rec })
	if err != nil {
		t.Fatal(err)
	}
	pub, err := publish.New(publish.Config{Brokers: []string{addr}, SpoolDir: filepath.Join(t.TempDir(), "spool")}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	p, err := NewPublished(l, pub, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prio := Record{Cluster: "c", ID: l.NewID(t0), Adapter: "slurm", Kind: "set_priority", Target: "42", Partition: "batch",
		Value: ptr(3_000_000_000), Previous: ptr(4294901758), Reason: "qssf rank 1 of 2", Basis: `{"predicted_s":60}`, ModelVersion: 7, DecidedAt: t0}
	down := Record{Cluster: "c", ID: l.NewID(t0.Add(time.Second)), Adapter: "slurm", Kind: "power_down", Target: "gpu4",
		Reason: "idle", Basis: `{"target":1}`, DryRun: true, DecidedAt: t0.Add(time.Second)}
	other := Record{Cluster: "d", ID: l.NewID(t0), Adapter: "sim", Kind: "power_up", Target: "n1", DecidedAt: t0}
	all := []Record{prio, down, other}
	if err := p.Plan(ctx, all); err != nil {
		t.Fatal(err)
	}
	prio.Outcome = Applied
	down.Outcome, down.Error = Skipped, "dry run"
	other.Outcome, other.Error = Failed, "scontrol: exit 1"
	if err := p.Settle(ctx, []Record{prio, down, other}); err != nil {
		t.Fatal(err)
	}
	msgs := readActions(t, addr, 2)
	want := map[string][]schemas.Action{
		"c": {toWire(prio, rec.UnixMilli()), toWire(down, rec.UnixMilli())},
		"d": {toWire(other, rec.UnixMilli())},
	}
	for _, m := range msgs {
		var b schemas.ActionBatch
		if err := schemas.DecodeActionBatch(m.Value, &b); err != nil {
			t.Fatal(err)
		}
		if string(m.Key) != b.Cluster || !reflect.DeepEqual(b.Actions, want[b.Cluster]) {
			t.Errorf("message key %q: %+v\nwant %+v", m.Key, b, want[b.Cluster])
		}
		delete(want, b.Cluster)
	}
	if len(want) != 0 {
		t.Errorf("no message for %v", want)
	}
	if n := testutil.ToFloat64(p.sent); n != 3 {
		t.Errorf("published %v, want 3", n)
	}

	// An action whose reason cannot be encoded is settled in the table,
	// counted, and not published; the next one is.
	long := Record{Cluster: "c", ID: l.NewID(t0.Add(2 * time.Second)), Adapter: "slurm", Kind: "power_up", Target: "gpu5",
		Reason: strings.Repeat("x", schemas.MaxActionTextLen+1), Outcome: Applied, DecidedAt: t0.Add(2 * time.Second)}
	if err := p.Settle(ctx, []Record{long}); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(p.failed); n != 1 {
		t.Errorf("publish failures %v, want 1", n)
	}
	got, err := l.List(ctx, Query{Cluster: "c", Target: "gpu5", Limit: 1})
	if err != nil || len(got) != 1 || got[0].Outcome != Applied {
		t.Fatalf("the unpublishable action in the table: %+v, %v", got, err)
	}
	up := Record{Cluster: "c", ID: l.NewID(t0.Add(3 * time.Second)), Adapter: "slurm", Kind: "power_up", Target: "gpu6", Outcome: Applied, DecidedAt: t0.Add(3 * time.Second)}
	if err := p.Settle(ctx, []Record{up}); err != nil {
		t.Fatal(err)
	}
	last := readActions(t, addr, 3)[2]
	var b schemas.ActionBatch
	if err := schemas.DecodeActionBatch(last.Value, &b); err != nil || len(b.Actions) != 1 || b.Actions[0].Target != "gpu6" {
		t.Fatalf("message after the failure: %+v, %v", b, err)
	}
	// A pass that settles more than fits one message publishes several,
	// in order, none over the bound.
	big := make([]Record, 100)
	for i := range big {
		big[i] = Record{Cluster: "c", ID: l.NewID(t0.Add(4 * time.Second)), Adapter: "slurm", Kind: "set_priority", Target: strconv.Itoa(1000 + i),
			Value: ptr(int64(i)), Basis: strings.Repeat("b", 16<<10), Outcome: Skipped, Error: "rate limit", DecidedAt: t0.Add(4 * time.Second)}
	}
	if err := p.Settle(ctx, big); err != nil {
		t.Fatal(err)
	}
	var targets []string
	parts := 0
	for _, m := range readActions(t, addr, 3+4)[3:] {
		var b schemas.ActionBatch
		if err := schemas.DecodeActionBatch(m.Value, &b); err != nil || len(m.Value) > MaxActionMessageBytes {
			t.Fatalf("part %d: %d bytes, %v", parts, len(m.Value), err)
		}
		parts++
		for _, a := range b.Actions {
			targets = append(targets, a.Target)
		}
	}
	if len(targets) != len(big) || targets[0] != "1000" || targets[99] != "1099" || !slices.IsSorted(targets) {
		t.Fatalf("%d parts carried %d actions: %v", parts, len(targets), targets)
	}
	// More actions than one message may count go out in halves.
	many := make([]Record, schemas.MaxActionsPerMessage+2)
	for i := range many {
		many[i] = Record{Cluster: "c", ID: l.NewID(t0.Add(5 * time.Second)), Adapter: "slurm", Kind: "power_up", Target: "n",
			Outcome: Skipped, DecidedAt: t0.Add(5 * time.Second)}
	}
	if err := p.Settle(ctx, many); err != nil {
		t.Fatal(err)
	}
	var counts []int
	for _, m := range readActions(t, addr, 7+2)[7:] {
		var b schemas.ActionBatch
		if err := schemas.DecodeActionBatch(m.Value, &b); err != nil {
			t.Fatal(err)
		}
		counts = append(counts, len(b.Actions))
	}
	if half := len(many) / 2; !slices.Equal(counts, []int{half, half}) {
		t.Errorf("%d actions went out as messages of %v, want two of %d", len(many), counts, half)
	}
	// A Settle the table refuses publishes nothing.
	if err := p.Settle(ctx, []Record{{Cluster: "c", ID: "x", DecidedAt: t0}}); err == nil {
		t.Fatal("Settle without an outcome succeeded")
	}
	if n, want := testutil.ToFloat64(p.sent), float64(104+len(many)); n != want {
		t.Errorf("published %v after a refused Settle, want %v", n, want)
	}
}
