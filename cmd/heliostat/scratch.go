package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// scratchOwnerFile, in a scratch directory, holds the id of the process
// that made it.
const scratchOwnerFile = "heliostat.pid"

// scratchDir makes a temporary directory prefix-* in tmp for the local
// ClickHouse of a one-shot command (bench ingest, bench api, report
// --trace), with this process's id in scratchOwnerFile. The caller removes
// it when done. A SIGKILL skips that removal (the server dies with its
// parent), so first the prefix-* directories whose owner process is gone
// are removed, each reported on stderr. A directory without an owner file
// (made by an older heliostat, kept on purpose, or not made yet) is left
// alone.
func scratchDir(stderr io.Writer, tmp, prefix string) (string, error) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, prefix+"-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, scratchOwnerFile))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 && !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue // its owner runs (or a process has its id)
		}
		if err := os.RemoveAll(d); err != nil {
			fmt.Fprintf(stderr, "cannot remove %s, left by a killed run: %v\n", d, err)
			continue
		}
		fmt.Fprintf(stderr, "removed %s, left by a killed run\n", d)
	}
	dir, err := os.MkdirTemp(tmp, prefix+"-*")
	if err != nil {
		return "", fmt.Errorf("temporary directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, scratchOwnerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("temporary directory: %w", err)
	}
	return dir, nil
}

// disownScratch keeps a scratch directory from being taken for a killed
// run's once its owner exits (report --keep-clickhouse).
func disownScratch(dir string) {
	_ = os.Remove(filepath.Join(dir, scratchOwnerFile))
}
