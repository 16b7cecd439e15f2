package ssd

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// directDir returns a directory whose filesystem accepts O_DIRECT: the
// test's temporary directory, or one under /var/tmp when that one is on a
// filesystem that refuses it (tmpfs on older kernels). It skips the test
// when neither does.
func directDir(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	if acceptsDirect(dir) {
		return dir
	}
	alt, err := os.MkdirTemp("/var/tmp", "orbitkv-ssd-test-")
	if err == nil {
		tb.Cleanup(func() { os.RemoveAll(alt) })
		if acceptsDirect(alt) {
			return alt
		}
	}
	tb.Skipf("neither %s nor /var/tmp accepts O_DIRECT: the SSD tier needs it", dir)
	return ""
}

func acceptsDirect(dir string) bool {
	fd, err := unix.Open(dir+"/probe", unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return false
	}
	unix.Close(fd)
	os.Remove(dir + "/probe")
	return true
}

// testSpec is a small store: slots of 64 KiB, the given number of them.
func testSpec(dir string, slots int) Spec {
	const slotBytes = 64 << 10
	return Spec{Dir: dir, SlotBytes: slotBytes, CapacityBytes: uint64(slots) * (HeaderBytes + slotBytes), VerifyOnOpen: -1}
}

func mustOpen(tb testing.TB, s Spec) *Store {
	tb.Helper()
	st, err := Open(s, nil)
	if err != nil {
		tb.Fatalf("Open(%+v): %v", s, err)
	}
	return st
}

// alignedBuf is n bytes of page-aligned anonymous memory, unmapped when tb ends.
func alignedBuf(tb testing.TB, n int) []byte {
	tb.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		tb.Fatalf("mmap %d bytes: %v", n, err)
	}
	tb.Cleanup(func() { unix.Munmap(b) })
	return b
}

// chunks cuts b into pieces of chunk bytes, as the RAM tier hands them over.
func chunks(b []byte, chunk int) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := min(chunk, len(b))
		out = append(out, b[:n:n])
		b = b[n:]
	}
	return out
}

// key is a test key: namespace ns, hash i.
func key(ns byte, i uint64) Key {
	var k Key
	k.NS[0] = ns
	binary.LittleEndian.PutUint64(k.Hash[:], i)
	binary.LittleEndian.PutUint64(k.Hash[8:], ^i)
	return k
}

// fill writes k's content into b: every 8 bytes a word derived from the
// key and the offset, so a block's bytes differ from every other block's.
func fill(b []byte, k Key) {
	seed := binary.LittleEndian.Uint64(k.Hash[:]) ^ uint64(k.NS[0])<<56
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], seed*0x9e3779b97f4a7c15+uint64(i))
	}
}

// same reports whether the first n bytes of b are k's content.
func same(b []byte, k Key, n uint64) bool {
	want := make([]byte, n+8) // fill writes whole 8-byte words
	fill(want, k)
	return string(b[:n]) == string(want[:n])
}

const waitTimeout = 10 * time.Second

// call runs an asynchronous store operation and waits for its done.
func call(tb testing.TB, f func(done func(error))) error {
	tb.Helper()
	ch := make(chan error, 1)
	f(func(err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-time.After(waitTimeout):
		tb.Fatalf("done not called within %v", waitTimeout)
		return nil
	}
}

// writeBlock writes k's content of m.Bytes from a fresh buffer cut in 16 KiB chunks.
func writeBlock(tb testing.TB, s *Store, k Key, m Meta) error {
	tb.Helper()
	src := alignedBuf(tb, int(roundUp(m.Bytes)))
	fill(src, k)
	return call(tb, func(done func(error)) { s.Write(k, m, chunks(src, 16<<10), nil, done) })
}

// readBlock reads k into a fresh buffer and returns it.
func readBlock(tb testing.TB, s *Store, k Key, m Meta) ([]byte, error) {
	tb.Helper()
	dst := alignedBuf(tb, int(roundUp(m.Bytes)))
	err := call(tb, func(done func(error)) { s.Read(k, m, chunks(dst, 16<<10), done) })
	return dst, err
}

// mustRoundTrip reads k and checks its bytes.
func mustRead(tb testing.TB, s *Store, k Key, m Meta) {
	tb.Helper()
	b, err := readBlock(tb, s, k, m)
	if err != nil {
		tb.Fatalf("Read(%x): %v", k.Hash[:8], err)
	}
	if !same(b, k, m.Bytes) {
		tb.Fatalf("Read(%x): bytes differ from those written", k.Hash[:8])
	}
}

func isErr(err, target error) bool { return errors.Is(err, target) }
