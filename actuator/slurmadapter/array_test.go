package slurmadapter

import "testing"

func TestArrayTasks(t *testing.T) {
	for _, tc := range []struct {
		in          string
		n, throttle int
		err         bool
	}{
		{"0-99", 100, 0, false},
		{"7", 1, 0, false},
		{"0-99:2", 50, 0, false},
		{"0-99:3%5", 34, 5, false}, // Slurm 22.05's words for --array=0-99:3%5
		{"1,5,7-9", 5, 0, false},
		{"0-1,4,9,16", 5, 0, false},
		{"2-9%2", 8, 2, false},
		{"0-4000000", maxArrayTasks, 0, false},
		{"0-4294967295,0-4294967295", maxArrayTasks, 0, false},
		{"", 0, 0, true},
		{"%5", 0, 0, true},
		{"a", 0, 0, true},
		{"5-3", 0, 0, true},
		{"-1", 0, 0, true},
		{"0--1", 0, 0, true},
		{"1-", 0, 0, true},
		{"0-9:0", 0, 0, true},
		{"0-9:-1", 0, 0, true},
		{"4:2", 0, 0, true},
		{"0-9%0", 0, 0, true},
		{"0-9%x", 0, 0, true},
		{"0-9%", 0, 0, true},
		{"1,,2", 0, 0, true},
		{",", 0, 0, true},
		{"0-4294967296", 0, 0, true},
		{"0-1,4,9,16,25,36,49,64,81,100,121,144,169,196,225,256,289,32...", 0, 0, true}, // cut short by squeue
	} {
		n, throttle, err := arrayTasks(tc.in)
		if n != tc.n || throttle != tc.throttle || (err != nil) != tc.err {
			t.Errorf("arrayTasks(%q) = %d, %d, %v; want %d, %d, error %v", tc.in, n, throttle, err, tc.n, tc.throttle, tc.err)
		}
	}
}

func FuzzArrayTasks(f *testing.F) {
	for _, s := range []string{"0-99", "0-99:3%5", "1,5,7-9", "2-9%2", "0-1,4,32...", "5-3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, throttle, err := arrayTasks(s)
		if err != nil {
			return
		}
		if n < 1 || n > maxArrayTasks || throttle < 0 || throttle > maxArrayTasks {
			t.Errorf("arrayTasks(%q) = %d, %d; want 1..%d tasks and a throttle of 0..%d", s, n, throttle, maxArrayTasks, maxArrayTasks)
		}
	})
}
