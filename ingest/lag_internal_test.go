package ingest

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestLagAge: heliostat_ingest_consumer_lag_seconds is the time since the
// later of the last message read and the last time a check of the log end
// found the reader there (a refresh; a message's high watermark may be out
// of date and does not count), absent while neither is known.
func TestLagAge(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	type step struct {
		at        time.Duration // the clock, from t0
		read      bool          // a message read (else a refresh from the log end)
		next      int64         // read: the offset read next
		stamp     time.Duration // read: the message's broker timestamp, from t0
		unstamped bool          // read: the message has no timestamp
		end       int64
		wantAge   float64 // -1: no series
	}
	cases := []struct {
		name  string
		start int64 // the assignment's offset
		steps []step
	}{
		{"a backlog read from a day back", 0, []step{
			{at: 0, end: 1000, wantAge: -1}, // nothing read, never at the end: unknown
			{at: time.Second, read: true, next: 1, stamp: -24 * time.Hour, end: 1000, wantAge: 86401},
			{at: 2 * time.Second, read: true, next: 500, stamp: -12 * time.Hour, end: 1000, wantAge: 43202},
			{at: 3 * time.Second, read: true, next: 1000, stamp: -time.Second, end: 1000, wantAge: 4}, // the last message's age
			{at: 4 * time.Second, end: 1000, wantAge: 0},                                              // found at the end
		}},
		{"stalled: the reader waits while messages arrive", 10, []step{
			{at: 0, read: true, next: 11, stamp: -5 * time.Second, end: 11, wantAge: 5},
			{at: time.Second, end: 11, wantAge: 0},
			{at: 30 * time.Second, end: 40, wantAge: 29},         // at the end 29 s ago
			{at: 10 * time.Minute, end: 4000, wantAge: 599},      // still there
			{at: 3 * time.Hour, end: 90000, wantAge: 3*3600 - 1}, // grows with the wait
		}},
		{"queued: a message whose fetch found the log end, taken an hour later", 10, []step{
			{at: 0, end: 10, wantAge: 0},
			// kafka-go fetched it (high watermark 11) an hour ago; the
			// reader waited since. Not at the end now, for all it knows.
			{at: time.Hour, read: true, next: 11, stamp: 0, end: 11, wantAge: 3600},
			{at: time.Hour + time.Second, end: 5000, wantAge: 3601},
		}},
		{"quiet topic: a new message after hours is not hours of lag", 5, []step{
			{at: 0, read: true, next: 6, stamp: 0, end: 6, wantAge: 0},
			{at: 2 * time.Hour, end: 6, wantAge: 0},                 // refreshed at the end
			{at: 2*time.Hour + 10*time.Second, end: 7, wantAge: 10}, // not 2 h
			{at: 2*time.Hour + 11*time.Second, read: true, next: 7, stamp: 2*time.Hour + 9*time.Second, end: 7, wantAge: 2},
		}},
		{"a reader behind: the message read bounds tighter than the last end", 0, []step{
			{at: 0, end: 0, wantAge: 0},
			{at: time.Hour, read: true, next: 1, stamp: 59 * time.Minute, end: 50, wantAge: 60},
			{at: time.Hour + time.Minute, read: true, next: 2, unstamped: true, end: 50, wantAge: 120}, // no stamp: the last one stands
		}},
		{"a producer's clock ahead", 0, []step{
			{at: 0, read: true, next: 1, stamp: time.Minute, end: 5, wantAge: 0},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "m"}, []string{"topic", "partition"})
			age := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "a"}, []string{"topic", "partition"})
			now := t0
			l := &partLag{topic: "t", partition: 0, vec: msgs, age: age, labels: []string{"t", "0"}, next: c.start, now: func() time.Time { return now }}
			for i, s := range c.steps {
				now = t0.Add(s.at)
				if s.read {
					stamp := t0.Add(s.stamp)
					if s.unstamped {
						stamp = time.Time{}
					}
					l.read(s.next, s.end, stamp)
				} else {
					l.refresh(s.end)
				}
				if got := testutil.ToFloat64(msgs.WithLabelValues("t", "0")); got != float64(s.end-l.next) {
					t.Errorf("step %d: lag %v messages; want %v", i, got, s.end-l.next)
				}
				if s.wantAge < 0 {
					if n := testutil.CollectAndCount(age); n != 0 {
						t.Errorf("step %d: %d age series; want none", i, n)
					}
					continue
				}
				if got := testutil.ToFloat64(age.WithLabelValues("t", "0")); got != s.wantAge {
					t.Errorf("step %d: age %v s; want %v", i, got, s.wantAge)
				}
			}
			l.stop(false)
			if n := testutil.CollectAndCount(msgs) + testutil.CollectAndCount(age); n != 0 {
				t.Errorf("after stop, %d series left; want none", n)
			}
		})
	}
}

// BenchmarkPartLagRead is the lag bookkeeping of one message read (both
// series), on ingest's path for every message.
func BenchmarkPartLagRead(b *testing.B) {
	msgs := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "m"}, []string{"topic", "partition"})
	age := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "a"}, []string{"topic", "partition"})
	l := &partLag{topic: "t", partition: 0, vec: msgs, age: age, labels: []string{"t", "0"}, now: time.Now}
	at := time.Now()
	b.ReportAllocs()
	for i := range b.N {
		l.read(int64(i+1), int64(i+100), at)
	}
}
