package ingest

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseRetention(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"604800000", 7 * 24 * time.Hour, ""},
		{"3600000", time.Hour, ""},
		{" 1 ", time.Millisecond, ""},
		{"0", 0, ""},
		{"-1", -1, ""},
		{"-5", -1, ""},
		{"", 0, `retention.ms "" is not a whole number`},
		{"1h", 0, `retention.ms "1h" is not a whole number`},
		{"1.5", 0, "not a whole number"},
		{"9223372036854775807", 0, "is beyond 9223372036854"},
		{"99999999999999999999", 0, "not a whole number"},
	} {
		got, err := parseRetention(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parseRetention(%q) = %v, %v; want an error about %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseRetention(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// FuzzParseRetention: any string is either a retention (negative only as
// -1, forever; else its milliseconds exactly) or an error naming it.
func FuzzParseRetention(f *testing.F) {
	for _, s := range []string{"604800000", "-1", "0", "", "1h", "9223372036854775807", " 42"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseRetention(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("parseRetention(%q): error %v does not name the value", s, err)
			}
			return
		}
		ms, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		switch {
		case perr != nil:
			t.Fatalf("parseRetention(%q) = %v; want an error", s, d)
		case ms < 0 && d != -1, ms >= 0 && (d < 0 || int64(d/time.Millisecond) != ms || ms > math.MaxInt64/int64(time.Millisecond)):
			t.Fatalf("parseRetention(%q) = %v; want %d ms", s, d, ms)
		}
	})
}
