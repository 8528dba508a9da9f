package tmpfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/heliostat-dev/heliostat/internal/tmpfs"
)

// TestMount: a file written on a 16 KiB mount fails with ENOSPC once it
// holds the mount's size.
func TestMount(t *testing.T) {
	dir := tmpfs.Mount(t, 16<<10)
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<10)
	written := 0
	for written <= 16<<10 {
		n, err := f.Write(buf)
		written += n
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Write after %d bytes = %v; want ENOSPC", written, err)
			}
			return
		}
	}
	t.Errorf("wrote %d bytes on a 16 KiB tmpfs without ENOSPC", written)
}
