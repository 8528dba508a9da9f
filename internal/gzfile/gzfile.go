// Package gzfile opens data files (traces, node-demand series) that may be
// gzip-compressed: a file named .gz, or starting with gzip's magic number,
// is decompressed as it is read, so `x.csv.gz` works wherever `x.csv` does.
package gzfile

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"
)

// Open opens path for reading, decompressing it when it is gzip. The error
// names the file.
func Open(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError names the file
	}
	br := bufio.NewReaderSize(f, 256<<10)
	magic, _ := br.Peek(2) // a short file is not gzip; a read error shows up when read
	if !strings.HasSuffix(path, ".gz") && (len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b) {
		return readCloser{br, f.Close}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gunzip %s: %w", path, err)
	}
	return readCloser{zr, func() error {
		_ = zr.Close() // its error is the last read's, which the reader saw
		return f.Close()
	}}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }
