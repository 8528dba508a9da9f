package ingest

import (
	"slices"
	"testing"
	"time"
)

// TestStillIdle: a producer forgotten at the start of a batch that sends
// again within it keeps the marks the batch writes for it; its older
// messages in the batch do not count as sending again.
func TestStillIdle(t *testing.T) {
	a := prodKey{topic: "t", partition: 0, producer: "a"}
	b := prodKey{topic: "t", partition: 0, producer: "b"}
	bOther := prodKey{topic: "t", partition: 1, producer: "b"}
	then := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	forgotAt := map[prodKey]time.Time{a: then, b: then}
	for _, tc := range []struct {
		name    string
		forget  []prodKey
		senders map[prodKey]time.Time
		want    []prodKey
	}{
		{"none sent", []prodKey{a, b}, nil, []prodKey{a, b}},
		{"b sent again", []prodKey{a, b}, map[prodKey]time.Time{b: then.Add(time.Second)}, []prodKey{a}},
		{"b's older messages in the batch", []prodKey{a, b}, map[prodKey]time.Time{b: then}, []prodKey{a, b}},
		{"b sent on another partition", []prodKey{a, b}, map[prodKey]time.Time{bOther: then.Add(time.Hour)}, []prodKey{a, b}},
		{"all sent", []prodKey{a}, map[prodKey]time.Time{a: then.Add(time.Minute)}, []prodKey{}},
	} {
		got := stillIdle(tc.forget, forgotAt, tc.senders)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: stillIdle = %v; want %v", tc.name, got, tc.want)
		}
	}
}
