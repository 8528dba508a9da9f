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
	// Slurm writes whole or decimal numbers ("1.50G"); ParseFloat alone
	// would also take "NaN", "Inf", "1e3" and hex floats.
	whole, frac, _ := strings.Cut(num, ".")
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || !digits(whole) || (frac != "" && !digits(frac)) || strings.Count(num, ".") > 1 ||
		(strings.Contains(num, ".") && frac == "") || n*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("memory amount %q is not a size: want a number of megabytes or one ending in K, M, G, T or P", s)
	}
	return int64(n * float64(mult)), nil
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
