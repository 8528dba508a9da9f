//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package spool

import (
	"fmt"
	"os"
)

// lockDir only creates the lock file: this platform has no flock, so two
// users of one spool directory are not kept apart.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("spool: open lock file: %w", err)
	}
	return f, nil
}
