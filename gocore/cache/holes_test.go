package cache

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
)

// openWithFile is rig.open with the buffer's memfd kept open and
// allocated (fallocate), as RegisterBuffers leaves a buffer, so the
// restore path's hole check (Buffer.Unallocated) runs; without the file
// (rig.open) the check is skipped.
func (r *rig) openWithFile() (*session.Session, *os.File) {
	r.t.Helper()
	s, err := r.table.Open(session.Peer{PID: 1, InstanceID: "test"})
	if err != nil {
		r.t.Fatal(err)
	}
	size := tLayers * tPages * tPageBytes
	fd, err := unix.MemfdCreate("cache-test", unix.MFD_CLOEXEC)
	if err != nil {
		r.t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "cache-test")
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		r.t.Fatal(err)
	}
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		r.t.Fatal(err)
	}
	b := session.Buffer{File: f, Bytes: uint64(size), Layers: tLayers, PageBytes: tPageBytes, PageCount: tPages}
	b.SetMapping(m, 0) // Table.Close unmaps it and closes f
	s.AddBuffers([]session.Buffer{b})
	r.svc.Attach(s)
	r.gen[s] = s.InitialGeneration
	return s, f
}

// A punched buffer's restore is refused and counted, and refused again
// while the hole stays.
func TestARestoreIntoABufferWithAHoleIsRefusedAndCounted(t *testing.T) {
	r := newRigWith(t, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 1 << 20}}})
	a, f := r.openWithFile()
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(0, 1), pg(1)), 0)
	q := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0)
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 4*tPageBytes, tPageBytes); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		p := r.call(a, abi.CmdRestore, restoreDesc(q.Arg1, []uint32{0}, []uint32{4}), 0)
		if status(p) != abi.StatusInvalid || abi.Field(p.Arg0) != abi.FieldBufferID {
			t.Fatalf("restore %d into the punched page: %v field %v, want Invalid buffer_id", i, status(p), abi.Field(p.Arg0))
		}
	}
	if st := r.svc.Stats(); st.BufferHoles != 2 || st.Invalid != 2 || st.Operations != 0 || st.ReservedBytes != q.Arg0*tLayers*tPageBytes {
		t.Fatalf("after two refusals: %+v", st)
	}
	r.call(a, abi.CmdRelease, nil, q.Arg1)
	r.close(a)
	r.idle()
}

// BenchmarkRestore times one Restore of n blocks through the cache (serve,
// copy, completion, RestorePoll) with the hole check (the buffer's memfd
// kept: one fstat per restore) and without it (no file: skipped), in one
// run; compare check=on to check=off at the same blocks.
func BenchmarkRestore(b *testing.B) {
	for _, n := range []int{1, 8} {
		for _, check := range []bool{false, true} {
			b.Run(fmt.Sprintf("blocks=%d/check=%s", n, map[bool]string{false: "off", true: "on"}[check]), func(b *testing.B) {
				r := newRigWith(b, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 4 << 20}}})
				var s *session.Session
				if check {
					s, _ = r.openWithFile()
				} else {
					s, _ = r.open()
				}
				r.call(s, abi.CmdPublish, publishDesc(ns1, tLayers, hs(0, n), pg(n)), 0)
				q := r.call(s, abi.CmdQueryBundle, queryDesc(ns1, hs(0, n)...), 0)
				blocks, pages := make([]uint32, n), make([]uint32, n)
				for i := range n {
					blocks[i], pages[i] = uint32(i), uint32(i)
				}
				desc := restoreDesc(q.Arg1, blocks, pages)
				b.SetBytes(int64(n * tLayers * tPageBytes))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					op := r.call(s, abi.CmdRestore, desc, 0)
					if status(op) != abi.StatusOK {
						b.Fatalf("restore: %v", status(op))
					}
					if p := r.wait(s, op.Arg0); status(p) != abi.StatusOK {
						b.Fatalf("poll: %v", status(p))
					}
				}
				b.StopTimer()
				r.call(s, abi.CmdRelease, nil, q.Arg1)
				r.close(s)
			})
		}
	}
}
