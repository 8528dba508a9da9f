package spool

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"unsafe"

	"github.com/heliostat-dev/heliostat/internal/tmpfs"
)

// setAppendOnly sets or clears the append-only attribute (chattr +a) of
// path: the file can still be appended to, but not truncated (EPERM).
func setAppendOnly(t *testing.T, path string, on bool) {
	t.Helper()
	const (
		fsIOCGetFlags = 0x80086601 // FS_IOC_GETFLAGS
		fsIOCSetFlags = 0x40086602 // FS_IOC_SETFLAGS
		fsAppendFL    = 0x20       // FS_APPEND_FL
	)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var flags int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIOCGetFlags, uintptr(unsafe.Pointer(&flags))); e != 0 {
		t.Fatalf("FS_IOC_GETFLAGS %s: %v", path, e)
	}
	if on {
		flags |= fsAppendFL
	} else {
		flags &^= fsAppendFL
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIOCSetFlags, uintptr(unsafe.Pointer(&flags))); e != 0 {
		t.Fatalf("FS_IOC_SETFLAGS %s: %v", path, e)
	}
}

// TestAppendAfterTorn: an Append that fails with part of its record on disk
// (a write cut short by a full disk) and that cannot cut that part off again
// (the truncate refused: here the segment is append-only) says so with
// ErrTorn. The Appends that succeed after it must not land behind the torn
// bytes, where reading the segment stops: the records they were accepted
// with must be handed out, while the spool runs and after a reopen.
func TestAppendAfterTorn(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		t.Run(fmt.Sprintf("reopen=%v", reopen), func(t *testing.T) {
			// 4 pages: the filler takes two, the cursor one, the
			// segment the one left.
			disk := tmpfs.Mount(t, 16<<10)
			filler := filepath.Join(disk, "filler")
			writeFile(t, filler, make([]byte, 8<<10))
			dir := filepath.Join(disk, "spool")
			s := open(t, dir, 1<<30)
			segs := segmentFiles(t, dir)
			if len(segs) != 1 {
				t.Fatalf("new spool has segments %q; want 1", segs)
			}
			setAppendOnly(t, segs[0], true)
			defer func() {
				// The tmpfs cannot be unmounted with the file
				// append-only; consumed, it is gone.
				if _, err := os.Stat(segs[0]); err == nil {
					setAppendOnly(t, segs[0], false)
				}
			}()

			value := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 3<<10) }
			add := func(i int) error { return s.Append("heliostat.gpu.samples", nil, value(i)) }
			if err := add(0); err != nil {
				t.Fatalf("Append(record 0) = %v", err)
			}
			// 3 KiB written, 4 KiB of room: record 1 is cut short.
			if err := add(1); !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrTorn) {
				t.Fatalf("Append(record 1) on a full disk, truncate refused = %v; want ENOSPC and ErrTorn", err)
			}
			if size := len(readFile(t, segs[0])); size <= 3<<10 {
				t.Fatalf("segment holds %d bytes after the torn Append; want part of record 1 on disk", size)
			}
			mustRemove(t, filler)
			for _, i := range []int{2, 3} {
				if err := add(i); err != nil {
					t.Fatalf("Append(record %d) after space was freed = %v", i, err)
				}
			}
			// The operator fixed the disk; consumed segments can go.
			setAppendOnly(t, segs[0], false)
			if reopen {
				if err := s.Close(); err != nil {
					t.Fatalf("Close() = %v", err)
				}
				s = open(t, dir, 1<<30)
			}
			var got []string
			for _, r := range consume(t, s, 10, 10) {
				got = append(got, string(r.Value[:1]))
			}
			if want := []string{"a", "c", "d"}; !slices.Equal(got, want) {
				t.Errorf("spool hands out records %q; want %q (every Append that returned nil), LostRecords() = %d", got, want, s.LostRecords())
			}
		})
	}
}
