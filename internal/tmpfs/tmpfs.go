// Package tmpfs mounts small file systems of their own for tests that fill
// a disk: writing one full fails with ENOSPC, as on a full disk.
package tmpfs

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
)

// Mount returns an empty directory on a tmpfs of size bytes (rounded up to
// whole pages) mounted for t and unmounted when t ends. Mounting needs root
// on Linux, as CI runs; where the mount is refused t is skipped, saying why.
func Mount(t testing.TB, size int) string {
	t.Helper()
	dir := t.TempDir()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skipf("tmpfs: a file system of its own is mounted only as root on Linux (here %s, uid %d); disk-full test skipped", runtime.GOOS, os.Geteuid())
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("tmpfs: mount refused (%v: %s); disk-full test skipped", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("tmpfs: umount %s: %v: %s", dir, err, bytes.TrimSpace(out))
		}
	})
	return dir
}
