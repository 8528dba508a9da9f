package demandlog

import (
	"context"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

func TestMain(m *testing.M) { os.Exit(schematest.Main(m)) }

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// TestSaveLoad saves steps of two partitions, a step raised twice (as after a
// restart within it), another cluster's steps, and bad rows written behind
// the Log's back, and reads back one largest value per step with the bad
// rows counted.
func TestSaveLoad(t *testing.T) {
	cfg, conn := schematest.Database(t)
	l, err := New(conn, cfg.Database, func() time.Time { return t0.Add(time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	step := 10 * time.Minute
	saves := [][]Mark{
		{{"gpu", t0, 3}, {"gpu", t0.Add(step), 5}, {"cpu", t0, 1}},
		{{"gpu", t0.Add(step), 7}, {"gpu", t0.Add(2 * step), 0}},
		{{"gpu", t0.Add(step), 6}}, // lower than the 7 already there
	}
	for _, s := range saves {
		if err := l.Save(ctx, "c", s); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Save(ctx, "other", []Mark{{"gpu", t0, 99}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Save(ctx, "c", []Mark{{"gpu", t0, 4}, {"gpu", t0, math.NaN()}}); err == nil || !strings.Contains(err.Error(), "not a node count") {
		t.Fatalf("Save with a NaN demand: err %v", err)
	}
	// Rows no Log would write: a negative demand, an empty partition, and
	// a step in the future.
	for _, r := range []struct {
		part string
		at   time.Time
		v    float64
	}{{"gpu", t0.Add(3 * step), -1}, {"", t0, 2}, {"gpu", t0.Add(24 * time.Hour), 4}} {
		b, err := conn.PrepareBatch(ctx, "INSERT INTO "+cfg.Database+".actuator_demand (cluster, partition_name, step, demand, recorded_at)")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Append("c", r.part, r.at, r.v, t0); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}

	got, err := l.Load(ctx, "c", t0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mark{{"cpu", t0, 1}, {"gpu", t0, 3}, {"gpu", t0.Add(step), 7}, {"gpu", t0.Add(2 * step), 0}}
	if !reflect.DeepEqual(got.Marks, want) {
		t.Errorf("Load marks = %+v\nwant %+v", got.Marks, want)
	}
	if got.Rejected != 3 || len(got.Reasons) != 3 {
		t.Fatalf("rejected %d %q, want 3", got.Rejected, got.Reasons)
	}
	for _, want := range []string{"empty partition", "at or after 2026-05-01T13:00:00Z", "demand -1 is not a node count"} {
		if !strings.Contains(strings.Join(got.Reasons, "; "), want) {
			t.Errorf("reasons %q lack %q", got.Reasons, want)
		}
	}

	// Since bounds the read.
	got, err = l.Load(ctx, "c", t0.Add(step), t0.Add(25*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if want := []Mark{{"gpu", t0.Add(step), 7}, {"gpu", t0.Add(2 * step), 0}}; !reflect.DeepEqual(got.Marks, want) {
		t.Errorf("Load from the second step = %+v, want %+v", got.Marks, want)
	}
	if _, err := l.Load(ctx, "c", t0, t0); err == nil {
		t.Error("Load of an empty period succeeded")
	}
	if got, err := l.Load(ctx, "nobody", t0, t0.Add(time.Hour)); err != nil || len(got.Marks) != 0 || got.Rejected != 0 {
		t.Errorf("Load of an unknown cluster = %+v, %v", got, err)
	}
}

func TestCheck(t *testing.T) {
	until := t0.Add(time.Hour)
	for _, tc := range []struct {
		m    Mark
		want string // "" for a good mark
	}{
		{Mark{"gpu", t0, 0}, ""},
		{Mark{"gpu", t0, 12.5}, ""},
		{Mark{"", t0, 1}, "empty partition"},
		{Mark{"gpu", time.Time{}, 1}, "no step time"},
		{Mark{"gpu", time.Unix(0, 0), 1}, "no step time"},
		{Mark{"gpu", until, 1}, "at or after"},
		{Mark{"gpu", t0, -0.5}, "not a node count"},
		{Mark{"gpu", t0, math.Inf(1)}, "not a node count"},
		{Mark{"gpu", t0, math.NaN()}, "not a node count"},
	} {
		err := tc.m.Check(until)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%+v) = %v, want %q", tc.m, err, tc.want)
		}
	}
}

func TestNew(t *testing.T) {
	if _, err := New(nil, "heliostat", nil); err == nil {
		t.Error("New without a connection succeeded")
	}
}
