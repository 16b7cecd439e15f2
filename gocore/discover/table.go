package discover

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// Layout constants of native/include/orbitkv/discover.h.
const (
	Magic   = 0x58564B4F // OKV_DISCOVER_MAGIC, "OKVX"
	Version = 3          // OKV_DISCOVER_VERSION
	Ways    = 3          // OKV_DISCOVER_WAYS
	// DigestTag is OKV_DISCOVER_DIGEST_TAG: the domain string that starts
	// the SHA-256 input of a namespace's digest key (DigestKey).
	DigestTag   = "orbitkv.discover.v3"
	HeaderBytes = 64 // sizeof(struct okv_discover_header)
	BucketBytes = 64 // sizeof(struct okv_discover_bucket)
	// MaxBuckets is OKV_DISCOVER_MAX_BUCKETS: a 4 GiB table.
	MaxBuckets = 1 << 26
	// spins is OKV_DISCOVER_SPINS: a reader's tries on a bucket that
	// stays odd.
	spins = 4096
)

// header mirrors struct okv_discover_header.
type header struct {
	magic      uint32
	version    uint16
	flags      uint16
	buckets    uint64
	seed       uint64
	generation uint64
	ns         abi.Namespace
	entries    uint64
	dropped    uint64
}

// bucket mirrors struct okv_discover_bucket: ways as (lo, hi) words of the
// digest's little-endian bytes (Digest), never of a block hash.
type bucket struct {
	seq  uint64
	used uint64
	way  [Ways][2]uint64
}

// Compile-time size checks of the mirrors (a negative array length fails).
var (
	_ [HeaderBytes - unsafe.Sizeof(header{})]byte
	_ [unsafe.Sizeof(header{}) - HeaderBytes]byte
	_ [BucketBytes - unsafe.Sizeof(bucket{})]byte
	_ [unsafe.Sizeof(bucket{}) - BucketBytes]byte
)

// TableBytes is the size of a table of n buckets (okv_discover_bytes).
func TableBytes(n uint64) uint64 { return HeaderBytes + n*BucketBytes }

// BucketsFor is the bucket count of a table for at most maxBlocks resident
// blocks: one bucket per block rounded up to a power of two (at least 64),
// so at most a third of the ways are ever used.
func BucketsFor(maxBlocks uint64) uint64 {
	n := max(maxBlocks, 64)
	if n > MaxBuckets {
		return MaxBuckets
	}
	return 1 << bits.Len64(n-1)
}

// mix is okv_discover_mix: MurmurHash3's 64-bit finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// bucketsOf is okv_discover_b1 and okv_discover_b2 of okv_discover_key:
// the two candidate buckets of a digest's words (lo, hi).
func bucketsOf(seed, mask uint64, lo, hi uint64) (uint64, uint64) {
	x := mix(((lo ^ seed) * 0x9e3779b97f4a7c15) ^ hi)
	b1 := x & mask
	b2 := (x >> 32) & mask
	if b2 == b1 {
		b2 = (b1 ^ 1) & mask
	}
	return b1, b2
}

// DigestKey is namespace ns's digest key K(ns): the first 16 bytes of
// SHA-256(DigestTag || ns), an AES-128 key (okvi_discover_cipher_init in
// liborbitkv). Every session that can name ns can compute it; it keys
// the digest, it is no secret.
func DigestKey(ns abi.Namespace) [16]byte {
	var in [len(DigestTag) + len(ns)]byte
	copy(in[:], DigestTag)
	copy(in[len(DigestTag):], ns[:])
	sum := sha256.Sum256(in[:])
	return [16]byte(sum[:16])
}

// digester computes the digests of one namespace (the expanded AES-128
// key of DigestKey). Safe for concurrent use (cipher.Block's Encrypt is).
type digester struct{ blk cipher.Block }

func newDigester(ns abi.Namespace) digester {
	k := DigestKey(ns)
	blk, err := aes.NewCipher(k[:])
	if err != nil {
		panic("discover: a 16-byte key refused by crypto/aes: " + err.Error())
	}
	return digester{blk: blk}
}

// digest is AES-128_K(h) XOR h (Digest), computed in buf: the slices
// handed to cipher.Block's Encrypt escape (an interface call), so a buf
// on the heap that is reused spares an allocation per digest. A caller
// owns buf for the call.
func (d digester) digest(buf *[32]byte, h *abi.BlockHash) [16]byte {
	copy(buf[:16], h[:])
	d.blk.Encrypt(buf[16:], buf[:16])
	subtle.XORBytes(buf[16:], buf[16:], buf[:16])
	return [16]byte(buf[16:])
}

// words are the (lo, hi) words a table of d's namespace stores for h: its
// Digest's little-endian halves, computed in buf (digest).
func (d digester) words(buf *[32]byte, h *abi.BlockHash) (uint64, uint64) {
	x := d.digest(buf, h)
	return binary.LittleEndian.Uint64(x[:8]), binary.LittleEndian.Uint64(x[8:])
}

// Digest is what a table holds in place of block hash h of namespace ns
// (okvi_discover_digests in liborbitkv): AES-128 of h under DigestKey(ns),
// XORed with h (Matyas-Meyer-Oseas over one block), 16 bytes. A block
// hash is the capability to restore its block, and every session of the
// namespace maps the table and can compute the key: a reader that holds h
// computes Digest and finds it; one that lacks h would have to find a
// preimage of h -> AES_K(h) XOR h, about 2^128 work with AES taken as an
// ideal cipher, even with K known (plain AES_K(h) would not do: the
// reader could decrypt). It derives and expands the key each call
// (allocating); a Table keeps its own. Safe for concurrent use.
func Digest(ns abi.Namespace, h abi.BlockHash) [16]byte {
	var buf [32]byte
	return newDigester(ns).digest(&buf, &h)
}

// Table is one namespace's discovery index: the memfd, the Manager's
// read-write mapping and the writer. It stores the Digest of each block
// hash, never the hash. Insert and Remove must be called from
// one goroutine at a time (the dispatcher); Contains may run anywhere, as
// the clients' reader does. Close unmaps and closes the memfd; the
// clients' mappings stay valid (the kernel keeps the memory while any maps
// it).
type Table struct {
	ns   abi.Namespace
	dig  digester
	wbuf [32]byte // the writer's digest scratch (Insert, Remove)
	f    *os.File
	mem  []byte
	hdr  *header
	bkt  []bucket
	mask uint64
	seed uint64
}

// Flags of a table's header (enum okv_discover_flags).
const (
	// FlagComplete: the Manager serves only from RAM (no SSD tier, no
	// peers), so a hash absent from the table is a QueryBundle miss too.
	FlagComplete = 1 << 0
	// FlagRetired: the Manager no longer keeps the table current (its last
	// session closed, or the Manager stopped); a reader answers "unknown"
	// (OKV_ESTALE) from it on every read from then on. The only flag that
	// changes in a table's life, and only once, by Retire.
	FlagRetired = 1 << 1
)

// NewTable makes the sealed memfd of an empty table of n buckets (a power
// of two in 2..MaxBuckets) for namespace ns with header flags (Flag*).
// Errors: the memfd, ftruncate, mmap or seal that failed, wrapped with
// what it was for.
func NewTable(ns abi.Namespace, n uint64, flags uint16) (*Table, error) {
	if n < 2 || n > MaxBuckets || n&(n-1) != 0 {
		return nil, fmt.Errorf("discover: %d buckets, want a power of two in 2..%d", n, MaxBuckets)
	}
	size := TableBytes(n)
	fd, err := unix.MemfdCreate("orbitkv-discover", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("discover: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "orbitkv-discover")
	fail := func(what string, err error) (*Table, error) {
		f.Close()
		return nil, fmt.Errorf("discover: %s of %d bytes: %w", what, size, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	// MAP_POPULATE: the dispatcher then never takes a page fault writing.
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fail("mmap", err)
	}
	// The seals come after the Manager's own writable mapping, which
	// F_SEAL_FUTURE_WRITE leaves writable; every later writable mapping,
	// write(2) and resize of this memfd fails with EPERM.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_FUTURE_WRITE|unix.F_SEAL_SEAL); err != nil {
		unix.Munmap(mem)
		return fail("sealing", err)
	}
	var sb [8]byte
	if _, err := rand.Read(sb[:]); err != nil {
		unix.Munmap(mem)
		return fail("seed", err)
	}
	t := &Table{ns: ns, dig: newDigester(ns), f: f, mem: mem, mask: n - 1, seed: binary.LittleEndian.Uint64(sb[:])}
	t.hdr = (*header)(unsafe.Pointer(&mem[0]))
	t.bkt = unsafe.Slice((*bucket)(unsafe.Pointer(&mem[HeaderBytes])), n)
	t.hdr.buckets, t.hdr.seed, t.hdr.ns = n, t.seed, ns
	t.hdr.version, t.hdr.flags = Version, flags
	// The magic last: a reader that checks it sees a complete header (the
	// fd travels only after NewTable returned, so this is belt and braces).
	atomic.StoreUint32(&t.hdr.magic, Magic)
	return t, nil
}

// File is the table's memfd (owned by the Table): what MapDiscovery sends.
func (t *Table) File() *os.File { return t.f }

// Flags are the table's header flags.
func (t *Table) Flags() uint16 { return uint16(atomic.LoadUint32(t.versionFlags()) >> 16) }

// versionFlags is the header's 32-bit word at offset 4: version in the low
// half, flags in the high half (little-endian), so flags change atomically.
func (t *Table) versionFlags() *uint32 { return (*uint32)(unsafe.Pointer(&t.hdr.version)) }

// Retire sets FlagRetired in the header, after which every reader answers
// "unknown" instead of reading the buckets (which then stop being kept
// current), and counts it as an update. Writer only; before Close.
func (t *Table) Retire() {
	atomic.OrUint32(t.versionFlags(), FlagRetired<<16)
	atomic.AddUint64(&t.hdr.generation, 1)
}

// Bytes is the table's size in bytes.
func (t *Table) Bytes() uint64 { return uint64(len(t.mem)) }

// Buckets is the table's bucket count.
func (t *Table) Buckets() uint64 { return t.mask + 1 }

// Namespace is the namespace the table indexes.
func (t *Table) Namespace() abi.Namespace { return t.ns }

// Generation is the number of updates written.
func (t *Table) Generation() uint64 { return atomic.LoadUint64(&t.hdr.generation) }

// Entries is the number of hashes present.
func (t *Table) Entries() uint64 { return atomic.LoadUint64(&t.hdr.entries) }

// Dropped is the number of inserts refused because both buckets were full.
func (t *Table) Dropped() uint64 { return atomic.LoadUint64(&t.hdr.dropped) }

// find returns the way of (lo, hi) in b, or -1. Writer only (no seqlock:
// the writer is the only one changing b).
func (b *bucket) find(lo, hi uint64) int {
	for w := 0; w < Ways; w++ {
		if b.used&(1<<w) != 0 && b.way[w][0] == lo && b.way[w][1] == hi {
			return w
		}
	}
	return -1
}

// begin and end bracket a bucket update (the seqlock's writer side; see
// the package doc for the ordering each gives).
func (b *bucket) begin() { atomic.AddUint64(&b.seq, 1) }
func (b *bucket) end()   { atomic.AddUint64(&b.seq, 1) }

// Insert adds h (a no-op when present) and reports whether it is present
// afterwards: false when both of its buckets are full (counted in
// Dropped). Writer only.
func (t *Table) Insert(h abi.BlockHash) bool {
	lo, hi := t.dig.words(&t.wbuf, &h)
	i1, i2 := bucketsOf(t.seed, t.mask, lo, hi)
	b1, b2 := &t.bkt[i1], &t.bkt[i2]
	if b1.find(lo, hi) >= 0 || b2.find(lo, hi) >= 0 {
		return true
	}
	b := b1
	if bits.OnesCount64(b2.used) < bits.OnesCount64(b1.used) {
		b = b2
	}
	if b.used == 1<<Ways-1 {
		atomic.AddUint64(&t.hdr.dropped, 1)
		return false
	}
	w := bits.TrailingZeros64(^b.used)
	b.begin()
	atomic.StoreUint64(&b.way[w][0], lo)
	atomic.StoreUint64(&b.way[w][1], hi)
	atomic.StoreUint64(&b.used, b.used|1<<w)
	b.end()
	atomic.AddUint64(&t.hdr.entries, 1)
	atomic.AddUint64(&t.hdr.generation, 1)
	return true
}

// Remove takes h out (a no-op when absent). Writer only.
func (t *Table) Remove(h abi.BlockHash) {
	lo, hi := t.dig.words(&t.wbuf, &h)
	i1, i2 := bucketsOf(t.seed, t.mask, lo, hi)
	for _, i := range [2]uint64{i1, i2} {
		b := &t.bkt[i]
		if w := b.find(lo, hi); w >= 0 {
			b.begin()
			atomic.StoreUint64(&b.used, b.used&^(1<<w))
			atomic.StoreUint64(&b.way[w][0], 0)
			atomic.StoreUint64(&b.way[w][1], 0)
			b.end()
			atomic.AddUint64(&t.hdr.entries, ^uint64(0))
			atomic.AddUint64(&t.hdr.generation, 1)
			return
		}
	}
}

// Contains reports whether h is present, reading as a client does (the
// seqlock's reader side): safe beside the writer on any goroutine. A
// test's and a tool's reader: it allocates its 32-byte digest scratch,
// which Insert and Remove do not. ok is false when the table is retired
// (FlagRetired) or a bucket stayed odd for the reader's whole spin budget
// (a writer that died mid-update).
func (t *Table) Contains(h abi.BlockHash) (present, ok bool) {
	if t.Flags()&FlagRetired != 0 {
		return false, false
	}
	var buf [32]byte
	lo, hi := t.dig.words(&buf, &h)
	i1, i2 := bucketsOf(t.seed, t.mask, lo, hi)
	for _, i := range [2]uint64{i1, i2} {
		found, ok := t.bkt[i].read(lo, hi)
		if !ok {
			return false, false
		}
		if found {
			return true, true
		}
	}
	return false, true
}

// read is the seqlock reader of one bucket.
func (b *bucket) read(lo, hi uint64) (found, ok bool) {
	for try := 0; try < spins; try++ {
		s1 := atomic.LoadUint64(&b.seq)
		if s1&1 != 0 {
			continue
		}
		used := atomic.LoadUint64(&b.used)
		found = false
		for w := 0; w < Ways; w++ {
			if used&(1<<w) != 0 && atomic.LoadUint64(&b.way[w][0]) == lo && atomic.LoadUint64(&b.way[w][1]) == hi {
				found = true
			}
		}
		if atomic.LoadUint64(&b.seq) == s1 {
			return found, true
		}
	}
	return false, false
}

// Close unmaps the Manager's mapping and closes the memfd. Not safe beside
// Insert or Remove.
func (t *Table) Close() error {
	t.hdr, t.bkt = nil, nil
	err := unix.Munmap(t.mem)
	t.mem = nil
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	return err
}
