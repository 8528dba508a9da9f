package main

import "testing"

func TestCountsString(t *testing.T) {
	tests := []struct {
		in   map[string]int
		want string
	}{
		{nil, "none"},
		{map[string]int{"a": 0}, "none"},
		{map[string]int{"no_run_time": 2, "larger_than_cluster": 1792}, "larger_than_cluster 1792, no_run_time 2"},
		{map[string]int{"b": 3, "a": 3, "": 1}, "a 3, b 3, (none given) 1"},
	}
	for _, tt := range tests {
		if got := countsString(tt.in); got != tt.want {
			t.Errorf("countsString(%v) = %q; want %q", tt.in, got, tt.want)
		}
	}
}
