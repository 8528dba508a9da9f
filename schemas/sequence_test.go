package schemas_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
)

func TestParseSequence(t *testing.T) {
	tests := []struct {
		name     string
		producer []byte
		seq      []byte
		want     schemas.Sequence
		wantErr  string // substring; "" for success
	}{
		{"both", []byte("0123456789abcdef"), []byte("1"), schemas.Sequence{Producer: "0123456789abcdef", Seq: 1}, ""},
		{"largest", []byte("p-1_x.Y"), []byte("18446744073709551615"), schemas.Sequence{Producer: "p-1_x.Y", Seq: 1<<64 - 1}, ""},
		{"neither", nil, nil, schemas.Sequence{}, "no sequence headers"},
		{"seq alone", nil, []byte("3"), schemas.Sequence{}, "heliostat-seq present without heliostat-producer"},
		{"producer alone", []byte("p"), nil, schemas.Sequence{}, "heliostat-producer present without heliostat-seq"},
		{"empty producer", []byte{}, []byte("3"), schemas.Sequence{}, "header heliostat-producer"},
		{"producer with a space", []byte("a b"), []byte("3"), schemas.Sequence{}, "header heliostat-producer"},
		{"producer too long", []byte(strings.Repeat("a", schemas.MaxProducerLen+1)), []byte("3"), schemas.Sequence{}, "header heliostat-producer"},
		{"empty seq", []byte("p"), []byte{}, schemas.Sequence{}, "header heliostat-seq"},
		{"zero", []byte("p"), []byte("0"), schemas.Sequence{}, "header heliostat-seq"},
		{"leading zero", []byte("p"), []byte("07"), schemas.Sequence{}, "header heliostat-seq"},
		{"negative", []byte("p"), []byte("-1"), schemas.Sequence{}, "header heliostat-seq"},
		{"overflow", []byte("p"), []byte("18446744073709551616"), schemas.Sequence{}, "header heliostat-seq"},
		{"binary", []byte("p"), []byte{0, 0, 0, 1}, schemas.Sequence{}, "header heliostat-seq"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := schemas.ParseSequence(tt.producer, tt.seq)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ParseSequence(%q, %q) = %+v, %v; want %+v", tt.producer, tt.seq, got, err, tt.want)
				}
				if !got.Valid() {
					t.Errorf("%+v.Valid() = false", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseSequence(%q, %q) = %+v, %v; want an error containing %q", tt.producer, tt.seq, got, err, tt.wantErr)
			}
		})
	}
	if _, err := schemas.ParseSequence(nil, nil); !errors.Is(err, schemas.ErrNoSequence) {
		t.Errorf("ParseSequence(nil, nil) = %v; want ErrNoSequence", err)
	}
}

// FuzzParseSequence checks that any header values are parsed or refused,
// never panic, and that what is accepted is valid and formats back to the
// same header value.
func FuzzParseSequence(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), []byte("1"))
	f.Add([]byte("p"), []byte("18446744073709551615"))
	f.Add([]byte(""), []byte("0"))
	f.Add([]byte("a b"), []byte("+1"))
	f.Fuzz(func(t *testing.T, producer, seq []byte) {
		s, err := schemas.ParseSequence(producer, seq)
		if err != nil {
			return
		}
		if !s.Valid() {
			t.Fatalf("ParseSequence(%q, %q) accepted %+v, which is not Valid", producer, seq, s)
		}
		if got := string(s.FormatSeq()); got != string(seq) {
			t.Fatalf("ParseSequence(%q, %q).FormatSeq() = %q", producer, seq, got)
		}
	})
}
