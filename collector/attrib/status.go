package attrib

import (
	"bytes"
	"fmt"
	"strconv"
)

// ParseStatusUID returns the real uid from the contents of /proc/PID/status,
// the first number of its "Uid:" line (real, effective, saved, filesystem).
// Errors name the line.
func ParseStatusUID(data []byte) (int64, error) {
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		rest, ok := bytes.CutPrefix(line, []byte("Uid:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return 0, fmt.Errorf("attrib: status line %d: Uid has no value", n)
		}
		uid, err := strconv.ParseUint(string(f[0]), 10, 32)
		if err != nil {
			return 0, fmt.Errorf("attrib: status line %d: Uid %q is not a number", n, clip(f[0]))
		}
		return int64(uid), nil
	}
	return 0, fmt.Errorf("attrib: status: no Uid line")
}
