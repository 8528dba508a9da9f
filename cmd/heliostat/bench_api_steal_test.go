package main

import (
	"strings"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name, in string
		want     cpuTimes
		err      string
	}{
		{"linux 6", "cpu  100 2 30 800 5 1 2 60 0 0\ncpu0 50 1 15 400 2 0 1 30 0 0\nintr 1\n", cpuTimes{total: 1000, steal: 60}, ""},
		{"no steal column", "cpu 10 0 10 80\n", cpuTimes{total: 100}, ""},
		{"per-cpu lines only", "cpu0 1 2 3 4 5 6 7 8\n", cpuTimes{}, "no aggregate cpu line"},
		{"short", "cpu 1 2 3\n", cpuTimes{}, "3 counters"},
		{"not a number", "cpu 1 2 x 4 5\n", cpuTimes{}, "counter 3"},
		{"negative", "cpu 1 2 -3 4 5\n", cpuTimes{}, "counter 3"},
		{"overflow", "cpu 18446744073709551615 1 0 0\n", cpuTimes{}, "overflow"},
		{"empty", "", cpuTimes{}, "no aggregate cpu line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestStealPct(t *testing.T) {
	tests := []struct {
		a, b cpuTimes
		want float64
		ok   bool
	}{
		{cpuTimes{1000, 10}, cpuTimes{2000, 110}, 10, true},
		{cpuTimes{1000, 10}, cpuTimes{1000, 10}, 0, false}, // no time passed
		{cpuTimes{1000, 10}, cpuTimes{2000, 5}, 0, false},  // steal went backwards
		{cpuTimes{1000, 10}, cpuTimes{900, 20}, 0, false},  // total went backwards
		{cpuTimes{0, 0}, cpuTimes{400, 0}, 0, true},
	}
	for _, tt := range tests {
		got, ok := stealPct(tt.a, tt.b)
		if got != tt.want || ok != tt.ok {
			t.Errorf("stealPct(%v, %v) = %v, %v; want %v, %v", tt.a, tt.b, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("cpu  100 2 30 800 5 1 2 60 0 0\n"))
	f.Add([]byte("cpu 1 2 3\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseProcStat(b)
		if err != nil {
			return
		}
		if got.steal > got.total {
			t.Fatalf("steal %d > total %d", got.steal, got.total)
		}
	})
}
