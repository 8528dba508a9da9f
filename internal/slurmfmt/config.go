package slurmfmt

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// ConfigValue is a setting read from `scontrol show config`: its value,
// "" for Slurm's "(null)", and the line it was on.
type ConfigValue struct {
	Value string
	Line  int
}

// ConfigValues reads the settings named keys out of the output of `scontrol
// show config`: lines "Name = value", the name padded with spaces; lines
// without "=" (the "Configuration data as of …" header, "Slurmctld(primary)
// at … is UP") and other names are skipped. A key not printed is absent from
// the map. A key printed twice is an error naming both lines: the output is
// not scontrol's.
func ConfigValues(b []byte, keys ...string) (map[string]ConfigValue, error) {
	out := map[string]ConfigValue{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		name, value, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		name = strings.TrimSpace(name)
		if !slices.Contains(keys, name) {
			continue
		}
		if first, dup := out[name]; dup {
			return nil, fmt.Errorf("line %d: %s again (first on line %d)", n, name, first.Line)
		}
		value = strings.TrimSpace(value)
		if value == "(null)" {
			value = ""
		}
		out[name] = ConfigValue{Value: value, Line: n}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
