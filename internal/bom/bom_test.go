package bom

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestSkip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"\uFEFF\"job_id\",x\n", "\"job_id\",x\n"},
		{"\uFEFF", ""},
		{"job_id\n", "job_id\n"},
		{"", ""},
		{"\xEF\xBB", "\xEF\xBB"},     // a partial mark is data
		{"\uFEFF\uFEFFa", "\uFEFFa"}, // only the first mark is dropped
		{"a\uFEFFb", "a\uFEFFb"},     // not at the start: data
	} {
		got, err := io.ReadAll(Skip(strings.NewReader(tc.in)))
		if err != nil || string(got) != tc.want {
			t.Errorf("Skip(%q) read %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	boom := errors.New("boom")
	if _, err := io.ReadAll(Skip(iotest.ErrReader(boom))); !errors.Is(err, boom) {
		t.Errorf("Skip(failing reader) read error %v; want %v", err, boom)
	}
}

// FuzzSkip: Skip drops exactly a leading mark and passes every other byte.
func FuzzSkip(f *testing.F) {
	for _, s := range []string{"\uFEFF\"a\",b\n", "\xEF\xBB", "", "a"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := io.ReadAll(Skip(bytes.NewReader(in)))
		if want := bytes.TrimPrefix(in, mark); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Skip(%q) read %q, %v; want %q", in, got, err, want)
		}
	})
}
