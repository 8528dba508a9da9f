package gzfile

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpen(t *testing.T) {
	const text = "time,active\n2017-10-01 00:00:00,3\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string][]byte{
		"plain.csv":       []byte(text),
		"named.csv.gz":    gz.Bytes(),
		"unnamed.csv":     gz.Bytes(), // gzip without the suffix: found by its magic number
		"short.csv":       []byte("x"),
		"empty.csv":       nil,
		"broken.csv.gz":   []byte("not gzip at all"),
		"truncated.cv.gz": gz.Bytes()[:len(gz.Bytes())/2],
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name, want, openErr, readErr string
	}{
		{name: "plain.csv", want: text},
		{name: "named.csv.gz", want: text},
		{name: "unnamed.csv", want: text},
		{name: "short.csv", want: "x"},
		{name: "empty.csv", want: ""},
		{name: "broken.csv.gz", openErr: "gunzip " + filepath.Join(dir, "broken.csv.gz")},
		{name: "truncated.cv.gz", readErr: "unexpected EOF"},
		{name: "missing.csv", openErr: "no such file or directory"},
	} {
		r, err := Open(filepath.Join(dir, tt.name))
		if tt.openErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.openErr) {
				t.Errorf("Open(%s) error %v; want %q", tt.name, err, tt.openErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Open(%s): %v", tt.name, err)
		}
		b, err := io.ReadAll(r)
		if tt.readErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.readErr) {
				t.Errorf("read %s: error %v; want %q", tt.name, err, tt.readErr)
			}
		} else if err != nil || string(b) != tt.want {
			t.Errorf("read %s = %q, %v; want %q", tt.name, b, err, tt.want)
		}
		if err := r.Close(); err != nil {
			t.Errorf("close %s: %v", tt.name, err)
		}
	}
}
