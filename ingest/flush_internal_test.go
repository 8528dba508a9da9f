package ingest

import (
	"bytes"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/schemas"
)

func TestFitDeadLetter(t *testing.T) {
	hdr := func(m kafka.Message) (string, int) {
		v, n := "", 0
		for _, h := range m.Headers {
			if h.Key == schemas.HeaderDeadletterTruncated {
				v, n = string(h.Value), n+1
			}
		}
		return v, n
	}
	for _, tc := range []struct {
		name         string
		value, limit int
		cut          bool
	}{
		{"small", 100, 1000, false},
		{"just fits", 800, 1000, false},
		{"over", 5000, 1000, true},
		{"far over", 2_000_000, deadLetterMaxBytes, true},
		{"limit below the headers", 50, 60, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := kafka.Message{Key: []byte("k"), Value: bytes.Repeat([]byte{'v'}, tc.value),
				Headers: []kafka.Header{{Key: schemas.HeaderDeadletterReason, Value: []byte("bad magic")}}}
			if got := fitDeadLetter(&m, tc.limit); got != tc.cut {
				t.Fatalf("fitDeadLetter = %v; want %v", got, tc.cut)
			}
			v, n := hdr(m)
			if !tc.cut {
				if len(m.Value) != tc.value || n != 0 {
					t.Errorf("uncut: value %d bytes, %d truncated headers", len(m.Value), n)
				}
				return
			}
			if n != 1 || v != strconv.Itoa(tc.value) || len(m.Value) >= tc.value {
				t.Errorf("cut: value %d bytes, %d truncated headers %q; want fewer than %d bytes, one header %d", len(m.Value), n, v, tc.value, tc.value)
			}
			// Cut again, smaller: still one header with the first length.
			if fitDeadLetter(&m, tc.limit/2) {
				t.Error("a second cut reported as a new one")
			}
			if v, n := hdr(m); n != 1 || v != strconv.Itoa(tc.value) {
				t.Errorf("after a second cut: %d truncated headers %q; want one, %d", n, v, tc.value)
			}
		})
	}
}

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
