package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// outFile is a per-job output file (--jobs-out) written to a temporary file
// beside its path and renamed onto it once complete. It is created before
// the work, so that a directory that cannot be written fails at once, not
// after minutes of replaying; work that fails or is stopped leaves no
// partial file, and an earlier file of that name as it was.
type outFile struct {
	*os.File
	path string
}

// createOut creates the temporary file for path.
func createOut(path string) (*outFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, err
	}
	return &outFile{File: f, path: path}, nil
}

// commit closes the file and renames it onto its path.
func (o *outFile) commit() error {
	if err := o.Close(); err != nil {
		return fmt.Errorf("%s: %w", o.path, err)
	}
	if err := os.Rename(o.Name(), o.path); err != nil {
		return err
	}
	o.File = nil
	return nil
}

// discard removes the temporary file unless commit renamed it; for a
// defer, safe on a nil outFile.
func (o *outFile) discard() {
	if o == nil || o.File == nil {
		return
	}
	o.Close()
	os.Remove(o.Name())
}
