package trace

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/heliostat-dev/heliostat/internal/gzfile"
)

// Open reads the trace file at path. format is "swf", "helios" or "" to
// guess from the name: .swf and .swf.gz are SWF, .csv and .csv.gz Helios.
// A gzip file (named .gz, or starting with the gzip magic number) is
// decompressed on the fly. Helios times are read as UTC; call ReadHelios for
// another zone.
func Open(path, format string) (*Trace, error) {
	if format == "" {
		format = guessFormat(path)
		if format == "" {
			return nil, fmt.Errorf("trace: open %s: %w: cannot guess it from the name; want .swf, .swf.gz, .csv or .csv.gz", path, ErrUnknownFormat)
		}
	}
	var read func(io.Reader) (*Trace, error)
	switch format {
	case "swf":
		read = ReadSWF
	case "helios":
		read = func(r io.Reader) (*Trace, error) { return ReadHelios(r, nil) }
	default:
		return nil, fmt.Errorf("trace: open %s: %w %q; want swf or helios", path, ErrUnknownFormat, format)
	}

	r, err := gzfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer r.Close()
	t, err := read(r)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return t, nil
}

func guessFormat(path string) string {
	name := strings.ToLower(filepath.Base(path))
	name = strings.TrimSuffix(name, ".gz")
	switch filepath.Ext(name) {
	case ".swf":
		return "swf"
	case ".csv":
		return "helios"
	}
	return ""
}
