package session

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// allocatedMemfd is a memfd of size bytes, every page allocated.
func allocatedMemfd(t testing.TB, size int64) *os.File {
	t.Helper()
	fd, err := unix.MemfdCreate("okv-test-holes", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "okv-test-holes")
	t.Cleanup(func() { f.Close() })
	if err := unix.Fallocate(fd, 0, 0, size); err != nil {
		t.Fatal(err)
	}
	return f
}

// Unallocated counts a punched hole, FirstHole finds it in the region (a
// fallocated page never written counts as present), and neither reports
// one where none is.
func TestUnallocatedAndFirstHoleFindAPunchedHole(t *testing.T) {
	const size = 64 << 10
	f := allocatedMemfd(t, size)
	b := Buffer{File: f, Offset: 8192, Bytes: size - 8192}
	if missing, sz, err := b.Unallocated(); missing != 0 || sz != size || err != nil {
		t.Fatalf("allocated memfd: %d missing of %d, %v", missing, sz, err)
	}
	if _, _, found := b.FirstHole(); found {
		t.Fatal("FirstHole found a hole in an allocated memfd")
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 5*4096, 3*4096); err != nil {
		t.Fatal(err)
	}
	if missing, _, err := b.Unallocated(); missing != 3*4096 || err != nil {
		t.Fatalf("after a 3-page punch: %d missing, %v", missing, err)
	}
	off, n, found := b.FirstHole()
	if !found {
		t.Skip("no cachestat(2) on this kernel (Linux 6.5)")
	}
	if off != 5*4096-8192 || n != 3*4096 {
		t.Fatalf("first hole [%d, +%d) of the region, want [%d, +%d)", off, n, 5*4096-8192, 3*4096)
	}
	if _, _, found := (&Buffer{File: f, Offset: 8 * 4096, Bytes: 4 * 4096}).FirstHole(); found {
		t.Fatal("FirstHole found a hole in a region past it")
	}
}

// BenchmarkUnallocated is the restore path's hole check alone: one fstat.
func BenchmarkUnallocated(b *testing.B) {
	f := allocatedMemfd(b, 1<<20)
	buf := Buffer{File: f, Bytes: 1 << 20}
	b.ReportAllocs()
	for range b.N {
		if missing, _, err := buf.Unallocated(); missing != 0 || err != nil {
			b.Fatal(missing, err)
		}
	}
}
