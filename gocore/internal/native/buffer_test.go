//go:build cgo

package native

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestAllocBufferIsASealedSharedMapping(t *testing.T) {
	b, err := AllocBuffer(3, 128, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	t.Run("the dimensions are kept", func(t *testing.T) {
		if b.Layers() != 3 || b.PageBytes() != 128 || b.PageCount() != 5 || len(b.Bytes()) != 3*5*128 {
			t.Errorf("layers %d page bytes %d pages %d len %d", b.Layers(), b.PageBytes(), b.PageCount(), len(b.Bytes()))
		}
	})
	t.Run("the memfd is sealed against shrink and grow", func(t *testing.T) {
		seals, err := unix.FcntlInt(uintptr(b.FD()), unix.F_GET_SEALS, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW; seals&want != want {
			t.Errorf("seals %#x, want %#x set", seals, want)
		}
		if err := unix.Ftruncate(b.FD(), 64); !errors.Is(err, unix.EPERM) {
			t.Errorf("shrink: %v, want EPERM", err)
		}
	})
	t.Run("pages are layer-major and shared with the fd", func(t *testing.T) {
		p := b.Page(2, 4)
		if len(p) != 128 || cap(p) != 128 {
			t.Fatalf("page len %d cap %d, want 128", len(p), cap(p))
		}
		if want := &b.Bytes()[(2*5+4)*128]; &p[0] != want {
			t.Errorf("page (2,4) at offset %d", uintptr(unsafe.Pointer(&p[0]))-uintptr(unsafe.Pointer(&b.Bytes()[0])))
		}
		p[127] = 0xAB
		var x [1]byte
		if _, err := unix.Pread(b.FD(), x[:], (2*5+4)*128+127); err != nil || x[0] != 0xAB {
			t.Errorf("pread: %v %#x", err, x[0])
		}
	})
	t.Run("an out-of-range page panics", func(t *testing.T) {
		for _, lp := range [][2]uint64{{3, 0}, {0, 5}} {
			func() {
				defer func() {
					if r := recover(); r == nil || !strings.Contains(r.(string), "out of range") {
						t.Errorf("Page(%d, %d): recovered %v", lp[0], lp[1], r)
					}
				}()
				b.Page(uint32(lp[0]), lp[1])
			}()
		}
	})
}

func TestFreeIsIdempotent(t *testing.T) {
	b, err := AllocBuffer(1, 64, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.Free()
	b.Free()
	if b.Bytes() != nil || b.Layers() != 0 || b.FD() != -1 {
		t.Errorf("after Free: %d bytes, %d layers, fd %d", len(b.Bytes()), b.Layers(), b.FD())
	}
}

func TestAllocBufferRefusesBadDimensions(t *testing.T) {
	for _, tc := range []struct {
		name             string
		layers           uint32
		pageBytes, pages uint64
	}{
		{"zero layers", 0, 64, 1},
		{"zero page bytes", 1, 0, 1},
		{"zero pages", 1, 64, 0},
		{"page bytes not a multiple of 64", 1, 100, 1},
		{"an overflowing size", 4096, 1 << 40, 1 << 30},
	} {
		t.Run(tc.name+" is EINVAL", func(t *testing.T) {
			b, err := AllocBuffer(tc.layers, tc.pageBytes, tc.pages)
			var ce *ClientError
			if !errors.As(err, &ce) || ce.Code != -int(unix.EINVAL) {
				b.Free()
				t.Errorf("got %v, want -EINVAL", err)
			}
		})
	}
}

// TestCacheTypesMatchC: Query, Publish and Restore pass Go slices of these
// types to C as arrays of their C mirrors.
func TestCacheTypesMatchC(t *testing.T) {
	c := Layout()
	var e RestoreEntry
	for _, tc := range []struct {
		name string
		c    string
		got  uintptr
	}{
		{"a namespace is 16 bytes", "sizeof(okv_namespace)", unsafe.Sizeof(Namespace{})},
		{"a block hash is 16 bytes", "sizeof(okv_block_hash)", unsafe.Sizeof(BlockHash{})},
		{"a restore entry is 8 bytes", "sizeof(okv_restore_entry)", unsafe.Sizeof(e)},
		{"a restore entry's page follows its block", "okv_restore_entry.page", unsafe.Offsetof(e.Page)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if want, ok := c[tc.c]; !ok || tc.got != want {
				t.Errorf("%s: Go %d, C %d (present %v)", tc.c, tc.got, want, ok)
			}
		})
	}
}

func TestAClosedClientAnswersClosed(t *testing.T) {
	c := &Client{}
	b, err := AllocBuffer(1, 64, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	isClosed := func(name string, err error) {
		var ce *ClientError
		if !errors.As(err, &ce) || ce.Code != CodeClosed {
			t.Errorf("%s: %v, want CodeClosed", name, err)
		}
	}
	_, err = c.Query(Namespace{1}, []BlockHash{{1}})
	isClosed("Query", err)
	_, err = c.Publish(Namespace{1}, 0, []BlockHash{{1}}, []uint32{0})
	isClosed("Publish", err)
	_, err = c.Restore(1, 0, []RestoreEntry{{}})
	isClosed("Restore", err)
	_, err = c.RestorePoll(1)
	isClosed("RestorePoll", err)
	isClosed("RestoreWait", c.RestoreWait(1, time.Millisecond))
	isClosed("Release", c.Release(1))
	if _, err := c.RegisterBuffer(b); err == nil {
		t.Error("RegisterBuffer on a closed client succeeded")
	}
	if c.MaxQueryHashes() != 0 || c.NotificationFD() != -1 {
		t.Errorf("closed client: max hashes %d, fd %d", c.MaxQueryHashes(), c.NotificationFD())
	}
}
