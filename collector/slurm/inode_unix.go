//go:build unix

package slurm

import (
	"os"
	"syscall"
)

// inode identifies the file behind fi, to notice a rotated log.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
