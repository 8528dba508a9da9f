package slurm

import "testing"

func TestParseMem(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"2000M", 2000 << 20, false},
		{"4G", 4 << 30, false},
		{"512K", 512 << 10, false},
		{"1.5G", 3 << 29, false},
		{"100", 100 << 20, false},
		{"1P", 1 << 50, false},
		{"0", 0, false},
		{"", 0, true},
		{"M", 0, true},
		{"NaN", 0, true},
		{"NaNM", 0, true},
		{"InfG", 0, true},
		{"1e3M", 0, true},
		{"0x10M", 0, true},
		{"-5M", 0, true},
		{"+5M", 0, true},
		{"1.G", 0, true},
		{".5G", 0, true},
		{"1.2.3G", 0, true},
		{"5000P", 0, true}, // beyond 2^62 bytes
		{"4X", 0, true},
	} {
		got, err := parseMem(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("parseMem(%q) = %d; want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseMem(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
