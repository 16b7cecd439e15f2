package discover

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

func testNS(b byte) abi.Namespace {
	var ns abi.Namespace
	ns[0], ns[15] = b, 0x5a
	return ns
}

// hashOf is a hash whose high word is a function of its low word, so a
// reader can tell a torn entry (the words of two hashes) from a real one.
func hashOf(i uint64) abi.BlockHash {
	var h abi.BlockHash
	binary.LittleEndian.PutUint64(h[:8], i)
	binary.LittleEndian.PutUint64(h[8:], mix(i)^0xabcdef)
	return h
}

func newTestTable(t *testing.T, buckets uint64) *Table {
	t.Helper()
	tb, err := NewTable(testNS(1), buckets, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

func TestTableInsertRemove(t *testing.T) {
	tb := newTestTable(t, 1024)
	for i := uint64(0); i < 1000; i++ {
		if !tb.Insert(hashOf(i)) {
			t.Fatalf("insert %d dropped at a load of %d of %d ways", i, i, 1024*Ways)
		}
	}
	t.Run("every inserted hash is present", func(t *testing.T) {
		for i := uint64(0); i < 1000; i++ {
			if p, ok := tb.Contains(hashOf(i)); !p || !ok {
				t.Fatalf("hash %d: present %v ok %v", i, p, ok)
			}
		}
	})
	t.Run("a hash never inserted is absent", func(t *testing.T) {
		if p, ok := tb.Contains(hashOf(5000)); p || !ok {
			t.Fatalf("present %v ok %v", p, ok)
		}
	})
	t.Run("an insert of a present hash changes nothing", func(t *testing.T) {
		g := tb.Generation()
		tb.Insert(hashOf(3))
		if tb.Generation() != g || tb.Entries() != 1000 {
			t.Fatalf("generation %d→%d, entries %d", g, tb.Generation(), tb.Entries())
		}
	})
	t.Run("a removed hash is absent and the others stay", func(t *testing.T) {
		tb.Remove(hashOf(7))
		if p, _ := tb.Contains(hashOf(7)); p {
			t.Fatal("removed hash still present")
		}
		if p, _ := tb.Contains(hashOf(8)); !p {
			t.Fatal("neighbour lost")
		}
		if tb.Entries() != 999 {
			t.Fatalf("entries %d, want 999", tb.Entries())
		}
	})
}

// TestTableHoldsDigestsNotBlockHashes writes a table of known block hashes
// and scans what a client maps (the memfd, read-only, at every byte
// offset): no block hash appears in it, and every hash's Digest does.
func TestTableHoldsDigestsNotBlockHashes(t *testing.T) {
	tb := newTestTable(t, 256)
	const n = 300
	for i := uint64(0); i < n; i++ {
		if !tb.Insert(hashOf(i)) {
			t.Fatalf("insert %d dropped", i)
		}
	}
	m, err := unix.Mmap(int(tb.File().Fd()), 0, int(tb.Bytes()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	t.Run("no block hash appears anywhere in the mapped table", func(t *testing.T) {
		for i := uint64(0); i < n; i++ {
			h := hashOf(i)
			if off := bytes.Index(m, h[:]); off >= 0 {
				t.Fatalf("block hash %d (%x) found at byte %d of the %d-byte table", i, h, off, len(m))
			}
		}
	})
	t.Run("every hash's digest is in the table", func(t *testing.T) {
		for i := uint64(0); i < n; i++ {
			d := Digest(tb.Namespace(), hashOf(i))
			if bytes.Index(m[HeaderBytes:], d[:]) < 0 {
				t.Fatalf("digest of hash %d (%x) missing", i, d)
			}
		}
	})
}

// TestDigestIsPinned: Digest is AES-128 of the hash under DigestKey (the
// first 16 bytes of SHA-256 of DigestTag and the namespace), XORed with
// the hash; native/tests/test_discover.c pins the same bytes for both of
// liborbitkv's AES paths, so writer and reader agree byte for byte.
func TestDigestIsPinned(t *testing.T) {
	var ns abi.Namespace
	var h abi.BlockHash
	for i := range ns {
		ns[i] = 0x4e
	}
	for i := range h {
		h[i] = 0x17
	}
	// Python: hashlib.sha256(b"orbitkv.discover.v3" + b"\x4e" * 16).digest()[:16]
	const wantKey = "dd08df786a2bb4723526a8e064dbd055"
	if k := DigestKey(ns); hex.EncodeToString(k[:]) != wantKey {
		t.Fatalf("DigestKey = %x, want %s", k, wantKey)
	}
	// openssl enc -aes-128-ecb -K <key> -nopad of 0x17 x 16 gives
	// ec16d3b9bbc6a0a5fe43fdb93fcc4a93; XOR 0x17 x 16:
	const want = "fb01c4aeacd1b7b2e954eaae28db5d84"
	if d := Digest(ns, h); hex.EncodeToString(d[:]) != want {
		t.Fatalf("Digest = %x, want %s", d, want)
	}
	other := ns
	other[0] ^= 1
	if Digest(other, h) == Digest(ns, h) {
		t.Fatal("the digest of one hash is the same in two namespaces")
	}
	if d := Digest(ns, h); bytes.Equal(d[:], h[:]) {
		t.Fatal("the digest is the hash")
	}
}

// TestWriterDoesNotAllocate: the writer's Insert and Remove digest each
// hash without allocating (the dispatcher runs them for every sealed or
// evicted block).
func TestWriterDoesNotAllocate(t *testing.T) {
	tb := newTestTable(t, 256)
	h := hashOf(7)
	if n := testing.AllocsPerRun(100, func() {
		tb.Insert(h)
		tb.Remove(h)
	}); n != 0 {
		t.Fatalf("Insert and Remove allocate %v times", n)
	}
}

func TestTableFullBucketsDrop(t *testing.T) {
	tb := newTestTable(t, 2) // 6 ways in all
	n := 0
	for i := uint64(0); i < 10; i++ {
		if tb.Insert(hashOf(i)) {
			n++
		}
	}
	if n != 2*Ways || tb.Dropped() != uint64(10-n) {
		t.Fatalf("%d inserted, %d dropped; want %d and %d", n, tb.Dropped(), 2*Ways, 10-2*Ways)
	}
}

func TestNewTableRefusesBadBucketCounts(t *testing.T) {
	for _, n := range []uint64{0, 1, 3, 100, MaxBuckets * 2} {
		if _, err := NewTable(testNS(1), n, 0); err == nil {
			t.Errorf("NewTable(%d buckets) succeeded", n)
		}
	}
}

func TestBucketsFor(t *testing.T) {
	for _, tt := range []struct{ blocks, want uint64 }{{0, 64}, {1, 64}, {64, 64}, {65, 128}, {262144, 262144}, {1 << 40, MaxBuckets}} {
		if got := BucketsFor(tt.blocks); got != tt.want {
			t.Errorf("BucketsFor(%d) = %d, want %d", tt.blocks, got, tt.want)
		}
	}
}

// TestSealedAgainstClients opens the memfd as a client does (the fd that
// MapDiscovery sends) and checks what the seals forbid.
func TestSealedAgainstClients(t *testing.T) {
	tb := newTestTable(t, 64)
	tb.Insert(hashOf(1))
	fd := int(tb.File().Fd())
	size := int(tb.Bytes())
	t.Run("a read-only shared mapping works and shows the table", func(t *testing.T) {
		m, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		if binary.LittleEndian.Uint32(m) != Magic {
			t.Fatalf("magic %#x", binary.LittleEndian.Uint32(m))
		}
	})
	t.Run("a writable shared mapping is refused", func(t *testing.T) {
		m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err == nil {
			unix.Munmap(m)
			t.Fatal("PROT_WRITE MAP_SHARED mapping succeeded")
		}
		if !errors.Is(err, unix.EPERM) {
			t.Fatalf("err %v, want EPERM", err)
		}
	})
	t.Run("a read-only mapping cannot be made writable", func(t *testing.T) {
		m, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		if err := unix.Mprotect(m, unix.PROT_READ|unix.PROT_WRITE); err == nil {
			t.Fatal("mprotect to PROT_WRITE succeeded")
		}
	})
	t.Run("write(2) is refused", func(t *testing.T) {
		if _, err := unix.Pwrite(fd, []byte{1, 2, 3, 4}, 0); !errors.Is(err, unix.EPERM) {
			t.Fatalf("pwrite err %v, want EPERM", err)
		}
	})
	t.Run("write(2) through a reopened fd is refused", func(t *testing.T) {
		f, err := os.OpenFile("/proc/self/fd/"+itoa(fd), os.O_RDWR, 0)
		if err != nil {
			t.Skipf("cannot reopen through /proc: %v", err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte{1}, 64); !errors.Is(err, unix.EPERM) {
			t.Fatalf("write err %v, want EPERM", err)
		}
	})
	t.Run("shrinking and growing are refused", func(t *testing.T) {
		if err := unix.Ftruncate(fd, 0); !errors.Is(err, unix.EPERM) {
			t.Fatalf("shrink err %v, want EPERM", err)
		}
		if err := unix.Ftruncate(fd, int64(size)*2); !errors.Is(err, unix.EPERM) {
			t.Fatalf("grow err %v, want EPERM", err)
		}
	})
	t.Run("the Manager's own mapping still writes", func(t *testing.T) {
		if !tb.Insert(hashOf(2)) {
			t.Fatal("insert dropped")
		}
		if p, _ := tb.Contains(hashOf(2)); !p {
			t.Fatal("insert not visible")
		}
	})
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(b[n:])
		}
	}
}

// TestReadersDuringChurnSeeNoTornEntry: readers scan every bucket under
// the seqlock while the writer inserts and removes hashes as fast as it
// can; every way a reader accepts must hold the digest of a hash the
// writer wrote (a torn way mixes the words of two), and the hashes inserted first and
// never removed must stay visible throughout (no false negative beside an
// update of another hash).
func TestReadersDuringChurnSeeNoTornEntry(t *testing.T) {
	tb := newTestTable(t, 256) // small: readers and the writer share lines
	const stable, churned = 64, 400
	// The digests the writer may write, as the (lo, hi) words a way holds.
	written := map[[2]uint64]bool{}
	for i := uint64(0); i < stable+churned; i++ {
		h := hashOf(i)
		var buf [32]byte
		lo, hi := tb.dig.words(&buf, &h)
		written[[2]uint64{lo, hi}] = true
	}
	for i := uint64(0); i < stable; i++ {
		if !tb.Insert(hashOf(i)) {
			t.Fatal("stable insert dropped")
		}
	}
	var stop atomic.Bool
	var torn, missed, gaveUp, scans atomic.Uint64
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				for i := range tb.bkt {
					b := &tb.bkt[i]
					for {
						s1 := atomic.LoadUint64(&b.seq)
						if s1&1 != 0 {
							continue
						}
						used := atomic.LoadUint64(&b.used)
						var lo, hi [Ways]uint64
						for w := 0; w < Ways; w++ {
							lo[w], hi[w] = atomic.LoadUint64(&b.way[w][0]), atomic.LoadUint64(&b.way[w][1])
						}
						if atomic.LoadUint64(&b.seq) != s1 {
							continue
						}
						for w := 0; w < Ways; w++ {
							if used&(1<<w) != 0 && !written[[2]uint64{lo[w], hi[w]}] {
								torn.Add(1)
							}
						}
						break
					}
				}
				for i := uint64(0); i < stable; i++ {
					switch p, ok := tb.Contains(hashOf(i)); {
					case !ok: // the writer was descheduled mid-update for the whole spin budget
						gaveUp.Add(1)
					case !p:
						missed.Add(1)
					}
				}
				scans.Add(1)
			}
		}()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[uint64]bool{}
	deadline := time.Now().Add(2 * time.Second)
	updates := 0
	for time.Now().Before(deadline) || scans.Load() < 20 {
		k := stable + rng.Uint64N(churned)
		if live[k] {
			tb.Remove(hashOf(k))
			delete(live, k)
		} else if tb.Insert(hashOf(k)) {
			live[k] = true
		}
		updates++
		if time.Now().After(deadline.Add(60 * time.Second)) {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if torn.Load() != 0 || missed.Load() != 0 {
		t.Fatalf("%d torn entries, %d misses of stable hashes over %d scans and %d updates", torn.Load(), missed.Load(), scans.Load(), updates)
	}
	for k := range live {
		if p, _ := tb.Contains(hashOf(k)); !p {
			t.Fatalf("live hash %d absent after the churn", k)
		}
	}
	t.Logf("%d scans beside %d updates, none torn; %d lookups gave up on a bucket held mid-update", scans.Load(), updates, gaveUp.Load())
}
