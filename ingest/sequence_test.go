package ingest

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heliostat-dev/heliostat/schemas"
)

func TestCheckSequence(t *testing.T) {
	k := seqKey{topic: "t", partition: 0, producer: "p", key: "h"}
	type step struct {
		seq     uint64
		offset  int64
		want    verdict
		wantGap uint64
	}
	tests := []struct {
		name  string
		start *seqMark // stored mark, nil for none
		steps []step
		mark  seqMark // the mark afterwards
	}{
		{"in order from one", nil, []step{{1, 10, seqNew, 0}, {2, 11, seqNew, 0}, {3, 12, seqNew, 0}}, seqMark{3, 12}},
		{"first message not one: earlier ones lost", nil, []step{{4, 10, seqNew, 3}}, seqMark{4, 10}},
		{"gap after the mark", &seqMark{5, 20}, []step{{6, 21, seqNew, 0}, {9, 22, seqNew, 2}}, seqMark{9, 22}},
		{"resent copies after the original", nil, []step{{1, 10, seqNew, 0}, {2, 11, seqNew, 0}, {2, 12, seqResent, 0}, {1, 13, seqResent, 0}, {3, 14, seqNew, 0}}, seqMark{3, 14}},
		{"read again from before the stored mark", &seqMark{7, 30}, []step{{6, 29, seqStored, 0}, {7, 30, seqAgain, 0}, {8, 31, seqNew, 0}}, seqMark{8, 31}},
		{"copy of the stored mark after it", &seqMark{7, 30}, []step{{7, 35, seqResent, 0}, {8, 36, seqNew, 0}}, seqMark{8, 36}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marks, pending := map[seqKey]seqMark{}, map[seqKey]seqMark{}
			if tt.start != nil {
				marks[k] = *tt.start
			}
			for i, s := range tt.steps {
				v, gap := checkSequence(marks, pending, k, s.seq, s.offset)
				if v != s.want || gap != s.wantGap {
					t.Fatalf("step %d (seq %d at offset %d) = verdict %d, gap %d; want %d, %d", i, s.seq, s.offset, v, gap, s.want, s.wantGap)
				}
			}
			if marks[k] != tt.mark || pending[k] != tt.mark {
				t.Errorf("mark = %+v, pending = %+v; want %+v", marks[k], pending[k], tt.mark)
			}
		})
	}
	// A stream of another key or producer is separate.
	marks, pending := map[seqKey]seqMark{k: {5, 10}}, map[seqKey]seqMark{}
	other := k
	other.key = "h2"
	if v, gap := checkSequence(marks, pending, other, 1, 11); v != seqNew || gap != 0 {
		t.Errorf("first message of another key = %d, %d; want new, no gap", v, gap)
	}
}

func TestSequenceOf(t *testing.T) {
	p := kafka.Header{Key: schemas.HeaderProducer, Value: []byte("abc")}
	tests := []struct {
		name    string
		headers []kafka.Header
		want    schemas.Sequence
		wantErr string
	}{
		{"none", nil, schemas.Sequence{}, ""},
		{"other headers only", []kafka.Header{{Key: "x", Value: []byte("y")}}, schemas.Sequence{}, ""},
		{"both", []kafka.Header{p, {Key: schemas.HeaderSequence, Value: []byte("12")}}, schemas.Sequence{Producer: "abc", Seq: 12}, ""},
		{"empty seq value", []kafka.Header{p, {Key: schemas.HeaderSequence}}, schemas.Sequence{}, "header heliostat-seq"},
		{"producer alone", []kafka.Header{p}, schemas.Sequence{}, "without heliostat-seq"},
		// Either number could be the message's; the last one, taken
		// before, dropped a new message (seq 3) as a copy of seq 1.
		{"seq twice, different", []kafka.Header{p, {Key: schemas.HeaderSequence, Value: []byte("3")}, {Key: schemas.HeaderSequence, Value: []byte("1")}},
			schemas.Sequence{}, "heliostat-seq twice"},
		{"producer twice, different", []kafka.Header{p, {Key: schemas.HeaderSequence, Value: []byte("3")}, {Key: schemas.HeaderProducer, Value: []byte("abd")}},
			schemas.Sequence{}, "heliostat-producer twice"},
		{"seq twice, the same", []kafka.Header{p, {Key: schemas.HeaderSequence, Value: []byte("3")}, {Key: schemas.HeaderSequence, Value: []byte("3")}},
			schemas.Sequence{Producer: "abc", Seq: 3}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sequenceOf(tt.headers)
			if tt.wantErr == "" && (err != nil || got != tt.want) {
				t.Fatalf("sequenceOf = %+v, %v; want %+v", got, err, tt.want)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("sequenceOf = %+v, %v; want an error containing %q", got, err, tt.wantErr)
			}
		})
	}
}

// FuzzSequenceOf checks that any pair of header values is read or refused
// without a panic, that what is read is a valid sequence, and that a
// sequence header given twice with different values is refused.
func FuzzSequenceOf(f *testing.F) {
	f.Add([]byte("abc"), []byte("1"), []byte("2"), true, true, false)
	f.Add([]byte(""), []byte(""), []byte(""), true, false, false)
	f.Add([]byte("abc"), []byte("3"), []byte("1"), true, true, true)
	f.Fuzz(func(t *testing.T, producer, seq, seq2 []byte, withProducer, withSeq, withSeq2 bool) {
		var hs []kafka.Header
		if withProducer {
			hs = append(hs, kafka.Header{Key: schemas.HeaderProducer, Value: producer})
		}
		if withSeq {
			hs = append(hs, kafka.Header{Key: schemas.HeaderSequence, Value: seq})
		}
		if withSeq2 {
			hs = append(hs, kafka.Header{Key: schemas.HeaderSequence, Value: seq2})
		}
		s, err := sequenceOf(hs)
		if err == nil && (withProducer || withSeq || withSeq2) && !s.Valid() {
			t.Fatalf("sequenceOf(%q) = %+v without error, not valid", hs, s)
		}
		if err == nil && withSeq && withSeq2 && !bytes.Equal(seq, seq2) {
			t.Fatalf("sequenceOf(%q) = %+v without error; want one for %s given twice with different values", hs, s, schemas.HeaderSequence)
		}
	})
}

func TestIdleProducers(t *testing.T) {
	t0 := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	pk := func(topic string, partition int32, producer string) prodKey {
		return prodKey{topic: topic, partition: partition, producer: producer}
	}
	tests := []struct {
		name   string
		last   map[prodKey]time.Duration // after t0
		window time.Duration
		want   []prodKey
	}{
		{"none", nil, time.Hour, nil},
		{"one producer is its partition's clock", map[prodKey]time.Duration{pk("t", 0, "a"): 0}, time.Hour, nil},
		{"within the window", map[prodKey]time.Duration{pk("t", 0, "a"): 0, pk("t", 0, "b"): time.Hour}, time.Hour, nil},
		{"beyond it", map[prodKey]time.Duration{pk("t", 0, "a"): 0, pk("t", 0, "b"): time.Hour + time.Second}, time.Hour,
			[]prodKey{pk("t", 0, "a")}},
		{"each partition has its own clock", map[prodKey]time.Duration{
			pk("t", 0, "a"): 0, pk("t", 0, "b"): 2 * time.Hour, // a idle in t/0
			pk("t", 1, "a"): 0, pk("t", 1, "c"): 30 * time.Minute, // a active in t/1
			pk("u", 0, "a"): 0, // alone in u/0
		}, time.Hour, []prodKey{pk("t", 0, "a")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSequences()
			for k, d := range tt.last {
				s.producers[k] = &producerSeen{last: t0.Add(d)}
			}
			got := s.idle(tt.window)
			if !slices.Equal(got, tt.want) {
				t.Errorf("idle(%v) = %v; want %v", tt.window, got, tt.want)
			}
		})
	}
}

func TestForgetProducers(t *testing.T) {
	s := newSequences()
	a0 := prodKey{topic: "t", partition: 0, producer: "a"}
	a1 := prodKey{topic: "t", partition: 1, producer: "a"}
	for _, pk := range []prodKey{a0, a1} {
		s.producers[pk] = &producerSeen{}
		for _, key := range []string{"h0", "h1"} {
			s.marks[seqKey{topic: pk.topic, partition: pk.partition, producer: pk.producer, key: key}] = seqMark{seq: 1}
		}
	}
	if n := s.forget([]prodKey{a0}); n != 2 {
		t.Errorf("forget(a in t/0) dropped %d marks; want 2", n)
	}
	if len(s.marks) != 2 || s.producers[a0] != nil || s.producers[a1] == nil {
		t.Errorf("after forget: %d marks, producers %v; want a's 2 marks in t/1 and a in t/1 only", len(s.marks), s.producers)
	}
	for k := range s.marks {
		if k.prod() != a1 {
			t.Errorf("mark %v left; want only a's in t/1", k)
		}
	}
}

func TestProducerSeen(t *testing.T) {
	t0 := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	k := prodKey{topic: "t", partition: 0, producer: "p"}
	s := newSequences()
	steps := []struct {
		at        time.Duration // after t0
		wantLast  time.Duration
		wantStore bool
	}{
		{0, 0, true}, // first seen: stored
		{30 * time.Second, 30 * time.Second, false}, // under a minute since stored
		{10 * time.Second, 30 * time.Second, false}, // out of order: the time does not go back
		{70 * time.Second, 70 * time.Second, true},  // a minute past the stored time
	}
	for i, st := range steps {
		pending := map[prodKey]time.Time{}
		s.seen(k, t0.Add(st.at), pending)
		if got := s.producers[k].last; !got.Equal(t0.Add(st.wantLast)) {
			t.Errorf("step %d: last = %v; want %v", i, got, t0.Add(st.wantLast))
		}
		if _, stored := pending[k]; stored != st.wantStore {
			t.Errorf("step %d: queued for storing = %v; want %v", i, stored, st.wantStore)
		}
	}
}

func TestMessageTime(t *testing.T) {
	now := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		ts   time.Time
		want time.Time
	}{
		{"past", now.Add(-time.Hour), now.Add(-time.Hour)},
		{"now", now, now},
		{"ahead of ingest's clock", now.Add(time.Hour), now},
		{"no timestamp (-1 ms)", time.UnixMilli(-1), now},
		{"zero", time.Time{}, now},
	}
	for _, tt := range tests {
		if got := messageTime(tt.ts, now); !got.Equal(tt.want) {
			t.Errorf("%s: messageTime(%v) = %v; want %v", tt.name, tt.ts, got, tt.want)
		}
	}
}
