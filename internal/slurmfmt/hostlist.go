package slurmfmt

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxHosts bounds how many names ExpandHostlist returns, so that a hostile or
// corrupt expression such as "n[0-999999999]" fails instead of exhausting
// memory. It is above the node count of the largest Slurm clusters.
const MaxHosts = 1 << 17

// ExpandHostlist expands a Slurm hostlist expression into host names, in
// order: "gpu[1-2,4]" → gpu1, gpu2, gpu4; "n[01-02]" keeps the zero padding of
// the lower bound; several bracket groups in one name give their product
// ("r[1-2]n[1-2]" → r1n1, r1n2, r2n1, r2n2); names are separated by commas
// outside brackets. The empty string and "(null)" (Slurm's way of printing
// no list) expand to no hosts. Errors name the offset and what is wrong.
func ExpandHostlist(s string) ([]string, error) {
	if s == "" || s == "(null)" {
		return nil, nil
	}
	var out []string
	err := splitTop(s, func(start, end int) (err error) {
		out, err = expandHost(out, s, start, s[start:end])
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SplitHostlist splits s at the commas outside brackets, as ExpandHostlist
// reads it, without expanding the items: "gpu[1,3]:1,gpu4" → "gpu[1,3]:1",
// "gpu4". Items may be empty. Brackets nested, unopened or left open are
// errors naming the offset.
func SplitHostlist(s string) ([]string, error) {
	var out []string
	err := splitTop(s, func(start, end int) error {
		out = append(out, s[start:end])
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// splitTop calls item with the bounds of each item of s, the list split at
// the commas outside brackets, in order, stopping at its first error.
func splitTop(s string, item func(start, end int) error) error {
	start, depth := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '[':
				depth++
				if depth > 1 {
					return fmt.Errorf("hostlist %q: nested '[' at offset %d", s, i)
				}
				continue
			case ']':
				depth--
				if depth < 0 {
					return fmt.Errorf("hostlist %q: ']' without '[' at offset %d", s, i)
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if depth != 0 {
			return fmt.Errorf("hostlist %q: '[' at offset %d is not closed", s, strings.LastIndexByte(s, '['))
		}
		if err := item(start, i); err != nil {
			return err
		}
		start = i + 1
	}
	return nil
}

// expandHost appends the expansion of one host expression (no top-level
// commas), found at offset off of the whole list s, to out.
func expandHost(out []string, s string, off int, expr string) ([]string, error) {
	if expr == "" {
		return nil, fmt.Errorf("hostlist %q: empty host name at offset %d", s, off)
	}
	names := []string{""}
	for rest, pos := expr, off; rest != ""; {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			if err := checkLiteral(s, pos, rest); err != nil {
				return nil, err
			}
			for i := range names {
				names[i] += rest
			}
			break
		}
		if err := checkLiteral(s, pos, rest[:open]); err != nil {
			return nil, err
		}
		end := strings.IndexByte(rest, ']') // the scan in ExpandHostlist guarantees it follows open
		nums, err := expandRanges(s, pos+open+1, rest[open+1:end])
		if err != nil {
			return nil, err
		}
		if len(names)*len(nums) > MaxHosts || len(out)+len(names)*len(nums) > MaxHosts {
			return nil, fmt.Errorf("hostlist %q: expands to more than %d hosts", s, MaxHosts)
		}
		next := make([]string, 0, len(names)*len(nums))
		for _, n := range names {
			for _, num := range nums {
				next = append(next, n+rest[:open]+num)
			}
		}
		names = next
		pos += end + 1
		rest = rest[end+1:]
	}
	if len(out)+len(names) > MaxHosts {
		return nil, fmt.Errorf("hostlist %q: expands to more than %d hosts", s, MaxHosts)
	}
	return append(out, names...), nil
}

// checkLiteral rejects characters that cannot be in a host name.
func checkLiteral(s string, off int, lit string) error {
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("hostlist %q: control or space character at offset %d", s, off+i)
		}
	}
	return nil
}

// expandRanges expands the inside of a bracket group, "1-3,7" or "01-10",
// found at offset off of s, into the numbers as strings.
func expandRanges(s string, off int, body string) ([]string, error) {
	if body == "" {
		return nil, fmt.Errorf("hostlist %q: empty brackets at offset %d", s, off-1)
	}
	var out []string
	for _, item := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		if !isRange {
			hi = lo
		}
		a, err := parseIndex(s, off, lo)
		if err != nil {
			return nil, err
		}
		b, err := parseIndex(s, off, hi)
		if err != nil {
			return nil, err
		}
		if b < a {
			return nil, fmt.Errorf("hostlist %q: range %q at offset %d runs backwards", s, item, off)
		}
		if b-a >= MaxHosts || len(out)+int(b-a+1) > MaxHosts {
			return nil, fmt.Errorf("hostlist %q: range %q at offset %d expands to more than %d hosts", s, item, off, MaxHosts)
		}
		width := len(lo)
		for n := a; n <= b; n++ {
			d := strconv.FormatUint(n, 10)
			if len(d) < width {
				d = strings.Repeat("0", width-len(d)) + d
			}
			out = append(out, d)
		}
		off += len(item) + 1
	}
	return out, nil
}

func parseIndex(s string, off int, d string) (uint64, error) {
	if d == "" || len(d) > 18 {
		return 0, fmt.Errorf("hostlist %q: bad number %q at offset %d", s, d, off)
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0, fmt.Errorf("hostlist %q: bad number %q at offset %d", s, d, off)
		}
	}
	n, err := strconv.ParseUint(d, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("hostlist %q: bad number %q at offset %d: %w", s, d, off, err)
	}
	return n, nil
}
