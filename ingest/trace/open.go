package trace

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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

	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err) // *PathError names the file
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	var r io.Reader = br
	magic, _ := br.Peek(2) // a short file is not gzip; a read error shows up below
	if strings.HasSuffix(path, ".gz") || (len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("trace: open %s: gunzip: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
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
