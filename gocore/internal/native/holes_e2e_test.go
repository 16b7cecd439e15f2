//go:build cgo

package native_test

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/identity"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
)

// allocatedBytes is the bytes of fd's allocated pages (st_blocks × 512):
// what its memfd holds in the memory cgroups its pages are charged to.
func allocatedBytes(t *testing.T, fd int) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// An engine that punches a hole into a registered buffer cannot make the
// Manager fill it: a restore into that buffer is refused (CodeInvalid,
// field buffer_id), and the memfd's allocated bytes stay short, so the
// Manager allocated nothing there. The Manager runs in a child process,
// which writes through its own mapping, as in production.
func TestARestoreIntoAPunchedBufferIsRefused(t *testing.T) {
	path := startManager(t)
	c, err := native.Connect(native.ConnectOptions{SocketPath: path, InstanceID: "punch"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := identity.Spec{ModelID: "punch", BlockTokens: 16, TPSize: 1, PPSize: 1, CPSize: 1}.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	ns := native.Namespace(id)
	const layers, pageBytes, pages = 2, 4096, 8
	src, err := native.AllocBuffer(layers, pageBytes, pages)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Free()
	dst, err := native.AllocBuffer(layers, pageBytes, pages)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Free()
	srcID, err := c.RegisterBuffer(src)
	if err != nil {
		t.Fatal(err)
	}
	dstID, err := c.RegisterBuffer(dst)
	if err != nil {
		t.Fatal(err)
	}
	hs := hashes(0, 2)
	if _, err := c.Publish(ns, srcID, hs, []uint32{0, 1}); err != nil {
		t.Fatal(err)
	}
	l, err := c.Query(ns, hs)
	if err != nil || l.Hits != 2 {
		t.Fatalf("query: %+v %v", l, err)
	}
	defer c.Release(l.ID)

	full := allocatedBytes(t, dst.FD())
	// Punch pages 3..4 of layer 0: bytes [3*4096, 5*4096) of the memfd.
	if err := unix.Fallocate(dst.FD(), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 3*pageBytes, 2*pageBytes); err != nil {
		t.Fatal(err)
	}
	punched := allocatedBytes(t, dst.FD())
	if punched != full-2*pageBytes {
		t.Fatalf("after the punch %d bytes allocated, want %d", punched, full-2*pageBytes)
	}
	op, err := c.Restore(l.ID, dstID, []native.RestoreEntry{{Block: 0, Page: 3}, {Block: 1, Page: 4}})
	if err == nil {
		err = c.RestoreWait(op, 5*time.Second)
	}
	if code(err) != native.CodeInvalid || !strings.Contains(err.Error(), "buffer_id") {
		t.Errorf("restore into the punched pages: %v, want CodeInvalid naming buffer_id", err)
	}
	if got := allocatedBytes(t, dst.FD()); got != punched {
		t.Errorf("after the restore %d bytes allocated, want still %d: the Manager filled the hole", got, punched)
	}
	// The hole is not in these pages, but the buffer is refused all the same.
	if _, err := c.Restore(l.ID, dstID, []native.RestoreEntry{{Block: 0, Page: 0}}); code(err) != native.CodeInvalid {
		t.Errorf("restore into another page of the punched buffer: %v, want CodeInvalid", err)
	}
	// The engine refills its hole (its own pages): restores work again.
	for p := uint64(3); p < 5; p++ {
		clear(dst.Page(0, p))
	}
	op, err = c.Restore(l.ID, dstID, []native.RestoreEntry{{Block: 0, Page: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RestoreWait(op, 5*time.Second); err != nil {
		t.Fatalf("restore after the engine refilled the hole: %v", err)
	}
}
