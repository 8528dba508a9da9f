package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// tresValue returns the value of key in a TRES string such as
// "cpu=2,mem=2000M,node=2,billing=2,gres/gpu=16"; ok is false when absent.
func tresValue(s, key string) (string, bool) {
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// parseMem parses a TRES memory amount, "2000M", "4G", "512K" or a bare
// number of megabytes, into bytes.
func parseMem(s string) (int64, error) {
	mult := int64(1 << 20)
	num := s
	if s != "" {
		switch s[len(s)-1] {
		case 'K', 'k':
			mult, num = 1<<10, s[:len(s)-1]
		case 'M', 'm':
			mult, num = 1<<20, s[:len(s)-1]
		case 'G', 'g':
			mult, num = 1<<30, s[:len(s)-1]
		case 'T', 't':
			mult, num = 1<<40, s[:len(s)-1]
		case 'P', 'p':
			mult, num = 1<<50, s[:len(s)-1]
		}
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 || n*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("memory amount %q is not a size", s)
	}
	return int64(n * float64(mult)), nil
}
