package ingest

import (
	"strings"
	"testing"

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
// without a panic, and that what is read is a valid sequence.
func FuzzSequenceOf(f *testing.F) {
	f.Add([]byte("abc"), []byte("1"), true, true)
	f.Add([]byte(""), []byte(""), true, false)
	f.Fuzz(func(t *testing.T, producer, seq []byte, withProducer, withSeq bool) {
		var hs []kafka.Header
		if withProducer {
			hs = append(hs, kafka.Header{Key: schemas.HeaderProducer, Value: producer})
		}
		if withSeq {
			hs = append(hs, kafka.Header{Key: schemas.HeaderSequence, Value: seq})
		}
		s, err := sequenceOf(hs)
		if err == nil && (withProducer || withSeq) && !s.Valid() {
			t.Fatalf("sequenceOf(%q) = %+v without error, not valid", hs, s)
		}
	})
}
