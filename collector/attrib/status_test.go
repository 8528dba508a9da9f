package attrib

import (
	"strings"
	"testing"
)

func TestParseStatusUID(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{in: "Name:\tx\nUid:\t1000\t1001\t1002\t1003\nGid:\t5\n", want: 1000},
		{in: "Uid:\t0\t0\t0\t0", want: 0},
		{in: "Uid: 4294967295 0 0 0\n", want: 4294967295},
		{in: "Name:\tx\n", wantErr: "no Uid line"},
		{in: "", wantErr: "no Uid line"},
		{in: "Name:\tx\nUid:\n", wantErr: "status line 2: Uid has no value"},
		{in: "Uid:\t-1\t0\n", wantErr: `status line 1: Uid "-1" is not a number`},
		{in: "Uid:\t4294967296\n", wantErr: "status line 1"},
	}
	for _, tt := range tests {
		got, err := ParseStatusUID([]byte(tt.in))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseStatusUID(%q) error = %v; want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseStatusUID(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func FuzzParseStatusUID(f *testing.F) {
	f.Add([]byte("Name:\tx\nUid:\t1000\t1000\t1000\t1000\n"))
	f.Add([]byte("Uid:"))
	f.Fuzz(func(t *testing.T, data []byte) {
		uid, err := ParseStatusUID(data)
		if err == nil && (uid < 0 || uid > 1<<32-1) {
			t.Errorf("ParseStatusUID(%q) = %d; out of range", data, uid)
		}
	})
}
