//go:build cgo

package native_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/discover"
	"github.com/orbitkv/orbitkv/gocore/identity"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
)

// discHashes are n distinct block hashes from first on (a tag in the high
// word keeps them apart from other tests' hashes).
func discHashes(first, n int) []native.BlockHash {
	out := make([]native.BlockHash, n)
	for i := range out {
		binary.LittleEndian.PutUint64(out[i][:8], uint64(first+i))
		binary.LittleEndian.PutUint64(out[i][8:], 0xd15c0)
	}
	return out
}

func discNamespace(t *testing.T, model string) native.Namespace {
	t.Helper()
	id, err := identity.Spec{ModelID: model, BlockTokens: 16, TPSize: 1, PPSize: 1, CPSize: 1}.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	return native.Namespace(id)
}

// discoverMapping is one mapping of a discovery index in this process.
type discoverMapping struct {
	start, end uint64
	perms      string
	inode      string
}

// discoverMappings lists this process's mappings of discovery-index
// memfds (/proc/self/maps names them "/memfd:orbitkv-discover").
func discoverMappings(t *testing.T) []discoverMapping {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []discoverMapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "/memfd:orbitkv-discover") {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		s, _ := strconv.ParseUint(lo, 16, 64)
		e, _ := strconv.ParseUint(hi, 16, 64)
		out = append(out, discoverMapping{start: s, end: e, perms: fields[1], inode: fields[4]})
	}
	return out
}

func publishRange(t *testing.T, c *native.Client, ns native.Namespace, buf uint32, hs []native.BlockHash) {
	t.Helper()
	per := min(len(hs), 256)
	pages := make([]uint32, per)
	for i := range pages {
		pages[i] = uint32(i)
	}
	for i := 0; i < len(hs); i += per {
		n := min(per, len(hs)-i)
		if _, err := c.Publish(ns, buf, hs[i:i+n], pages[:n]); err != nil {
			t.Fatalf("publish %d..%d: %v", i, i+n-1, err)
		}
	}
}

// discoverSession connects a session named instance to the Manager at path
// with one registered 256-page buffer of 4 KiB pages and returns it with
// the buffer's id; the test's Cleanup frees both.
func discoverSession(t *testing.T, path, instance string) (*native.Client, uint32) {
	t.Helper()
	c, err := native.Connect(native.ConnectOptions{SocketPath: path, InstanceID: instance})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	buf, err := native.AllocBuffer(1, 4096, 256)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Free)
	id, err := c.RegisterBuffer(buf)
	if err != nil {
		t.Fatal(err)
	}
	return c, id
}

// readMapping copies this process's mapping m (a C mapping, not a Go
// slice) through /proc/self/mem.
func readMapping(t *testing.T, m discoverMapping) []byte {
	t.Helper()
	f, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem := make([]byte, m.end-m.start)
	if _, err := f.ReadAt(mem, int64(m.start)); err != nil {
		t.Fatalf("reading the mapping at %#x through /proc/self/mem: %v", m.start, err)
	}
	return mem
}

// TestDigestsAgreeWithLiborbitkv: the digests the Manager writes
// (gocore/discover, Go's crypto/aes) are byte for byte the ones
// liborbitkv looks up, through AES-NI and through its portable AES, on
// random namespaces and hashes.
func TestDigestsAgreeWithLiborbitkv(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	hs := make([]native.BlockHash, 64)
	ran := map[bool]bool{}
	for round := 0; round < 50; round++ {
		var ns native.Namespace
		binary.LittleEndian.PutUint64(ns[:8], rng.Uint64())
		binary.LittleEndian.PutUint64(ns[8:], rng.Uint64())
		for i := range hs {
			binary.LittleEndian.PutUint64(hs[i][:8], rng.Uint64())
			binary.LittleEndian.PutUint64(hs[i][8:], rng.Uint64())
		}
		for _, soft := range []bool{false, true} {
			got, aesni := native.DiscoverDigests(ns, hs, soft)
			ran[aesni] = true
			for i, h := range hs {
				if want := discover.Digest(ns, h); got[i] != want {
					t.Fatalf("ns %x hash %x: liborbitkv (AES-NI %v) %x, gocore/discover %x", ns, h, aesni, got[i], want)
				}
			}
		}
	}
	if !ran[true] {
		t.Log("this CPU has no AES-NI: only liborbitkv's portable AES was compared")
	}
}

// TestDiscoverLocalThroughTheManager drives okv_discover_local against a
// real Manager (8 MiB RAM tier of 4 KiB chunks: 2,048 blocks).
func TestDiscoverLocalThroughTheManager(t *testing.T) {
	path := startManager(t)
	c, id := discoverSession(t, path, "discover-a")
	other, oid := discoverSession(t, path, "discover-b")
	nsA, nsB := discNamespace(t, "tenant-a"), discNamespace(t, "tenant-b")
	chain := discHashes(0, 100)
	publishRange(t, c, nsA, id, chain)

	t.Run("the count is the resident prefix of the chain", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			hashes []native.BlockHash
			want   uint32
		}{
			{"a resident chain counts whole", chain, 100},
			{"a chain running past the resident blocks stops at the first missing", discHashes(0, 150), 100},
			{"a chain starting at a missing block counts zero", discHashes(100, 10), 0},
			{"an empty chain counts zero", nil, 0},
		} {
			got, err := c.DiscoverLocal(nsA, tt.hashes)
			if err != nil || got != tt.want {
				t.Errorf("%s: DiscoverLocal = %d, %v; want %d", tt.name, got, err, tt.want)
			}
		}
	})
	t.Run("the mapped table holds no block hash, yet the API finds every one", func(t *testing.T) {
		maps := discoverMappings(t)
		if len(maps) != 1 {
			t.Fatalf("%d discovery mappings in this process, want 1", len(maps))
		}
		mem := readMapping(t, maps[0])
		for i, h := range chain {
			if off := bytes.Index(mem, h[:]); off >= 0 {
				t.Fatalf("block hash %d (%x) found at byte %d of the %d-byte mapped table", i, h, off, len(mem))
			}
			// The Manager's writer (Go) and liborbitkv's reader (C)
			// agree: the digest the Manager wrote is in the table.
			if d := discover.Digest(nsA, h); bytes.Index(mem[discover.HeaderBytes:], d[:]) < 0 {
				t.Fatalf("digest %x of block hash %d is not in the mapped table", d, i)
			}
		}
		if got, err := c.DiscoverLocal(nsA, chain); err != nil || got != uint32(len(chain)) {
			t.Fatalf("DiscoverLocal of the chain = %d, %v; want %d", got, err, len(chain))
		}
	})
	t.Run("the mapping is read-only and cannot be made writable", func(t *testing.T) {
		maps := discoverMappings(t)
		if len(maps) != 1 {
			t.Fatalf("%d discovery mappings in this process, want 1 (only namespace A was asked for): %+v", len(maps), maps)
		}
		m := maps[0]
		if m.perms != "r--s" {
			t.Fatalf("mapping perms %q, want r--s", m.perms)
		}
		// The raw syscall: the mapping is C's, not a Go slice.
		if _, _, errno := unix.Syscall(unix.SYS_MPROTECT, uintptr(m.start), uintptr(m.end-m.start), unix.PROT_READ|unix.PROT_WRITE); errno == 0 {
			t.Fatal("mprotect of the discovery mapping to PROT_WRITE succeeded")
		}
	})
	t.Run("another session cannot write the index through its memfd", func(t *testing.T) {
		m := discoverMappings(t)[0]
		f, err := os.OpenFile("/proc/self/map_files/"+strconv.FormatUint(m.start, 16)+"-"+strconv.FormatUint(m.end, 16), os.O_RDWR, 0)
		if err != nil {
			t.Skipf("cannot open the mapping's file through /proc/self/map_files (needs CAP_SYS_ADMIN): %v", err)
		}
		defer f.Close()
		if _, err := unix.Mmap(int(f.Fd()), 0, int(m.end-m.start), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); !errors.Is(err, unix.EPERM) {
			t.Fatalf("PROT_WRITE MAP_SHARED mmap: err %v, want EPERM", err)
		}
		if _, err := f.WriteAt([]byte{0xff}, 0); !errors.Is(err, unix.EPERM) {
			t.Fatalf("write(2): err %v, want EPERM", err)
		}
		if err := f.Truncate(0); !errors.Is(err, unix.EPERM) {
			t.Fatalf("ftruncate: err %v, want EPERM", err)
		}
	})
	t.Run("another namespace is not mapped and its blocks never show", func(t *testing.T) {
		bHashes := discHashes(5000, 50)
		publishRange(t, other, nsB, oid, bHashes)
		if got, err := c.DiscoverLocal(nsA, bHashes); err != nil || got != 0 {
			t.Fatalf("namespace A's index counts %d of namespace B's blocks (%v)", got, err)
		}
		if n := len(discoverMappings(t)); n != 1 {
			t.Fatalf("%d mappings before anyone asked for B, want 1", n)
		}
		if got, err := other.DiscoverLocal(nsB, bHashes); err != nil || got != 50 {
			t.Fatalf("B's own session counts %d of 50 (%v)", got, err)
		}
		maps := discoverMappings(t)
		if len(maps) != 2 || maps[0].inode == maps[1].inode {
			t.Fatalf("after B's session asked for B: %+v, want two mappings of different memfds", maps)
		}
	})
	t.Run("after eviction the answers agree with QueryBundle", func(t *testing.T) {
		// 1,950 more blocks make 2,100 in a 2,048-block tier: the oldest of
		// the chain are evicted, the rest stay. No update is in flight once
		// Publish returned, so the index must agree with the Manager's own
		// answer exactly.
		publishRange(t, c, nsA, id, discHashes(10000, 1950))
		evicted := 0
		for i, h := range chain {
			local, err := c.DiscoverLocal(nsA, []native.BlockHash{h})
			if err != nil {
				t.Fatal(err)
			}
			l, err := c.Query(nsA, []native.BlockHash{h})
			if err != nil {
				t.Fatal(err)
			}
			if l.Hits > 0 {
				c.Release(l.ID)
			} else {
				evicted++
			}
			if local != l.Hits {
				t.Fatalf("block %d: local discovery says %d, QueryBundle %d", i, local, l.Hits)
			}
		}
		if evicted == 0 {
			t.Fatal("no block of the chain was evicted: the test proves nothing")
		}
		t.Logf("%d of %d chain blocks evicted; local discovery agreed on every one", evicted, len(chain))
	})
}

// TestLocalReadersDuringChurnNeverMissAPinnedChain: one session keeps a
// chain leased (pinned blocks are never evicted) while another publishes
// thousands of blocks of the same namespace through the 2,048-block tier,
// so the Manager inserts and evicts entries of the very table the first
// session reads. The C reader (okv_discover_local, another process than
// the writer's goroutine) must count the whole pinned chain on every read:
// a torn entry or a lost one would show as a shorter count.
func TestLocalReadersDuringChurnNeverMissAPinnedChain(t *testing.T) {
	path := startManager(t)
	reader, err := native.Connect(native.ConnectOptions{SocketPath: path, InstanceID: "discover-reader"})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	writer, id := discoverSession(t, path, "discover-writer")
	ns := discNamespace(t, "churn")
	chain := discHashes(1<<20, 64)
	publishRange(t, writer, ns, id, chain)
	lease, err := reader.Query(ns, chain)
	if err != nil || lease.Hits != uint32(len(chain)) {
		t.Fatalf("leasing the chain: %+v %v", lease, err)
	}
	defer reader.Release(lease.ID)
	if err := reader.DiscoverOpen(ns); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	type result struct {
		reads, short int
		err          error
	}
	res := make(chan result, 1)
	go func() {
		var r result
		for {
			select {
			case <-done:
				res <- r
				return
			default:
			}
			n, err := reader.DiscoverLocal(ns, chain)
			if err != nil && code(err) != native.CodeDiscoverBusy { // a bucket held mid-update past the spin budget: allowed
				r.err = err
				res <- r
				return
			}
			if err == nil && n != uint32(len(chain)) {
				r.short++
			}
			r.reads++
		}
	}()
	// 8,000 fresh blocks through the tier: about 6,000 evictions, each
	// written into the table the reader reads.
	publishRange(t, writer, ns, id, discHashes(2<<20, 8000))
	close(done)
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.short != 0 {
		t.Fatalf("%d of %d local reads counted less than the pinned chain", r.short, r.reads)
	}
	if r.reads == 0 {
		t.Fatal("the reader never read during the churn: the test proves nothing")
	}
	// The control: the churn really evicted (the oldest churn block is gone
	// from the table), so the reads above ran beside removals.
	if n, err := reader.DiscoverLocal(ns, discHashes(2<<20, 1)); err != nil || n != 0 {
		t.Fatalf("the first churn block reads %d (%v) after 8,000 publishes through 2,048 blocks; want evicted", n, err)
	}
	t.Logf("%d local reads during the churn, every one counted the whole pinned chain", r.reads)
}

// TestARefusedNamespaceIsRememberedAndRetiredTablesAreNotRead runs a
// Manager whose --discover-bytes holds one table (8 MiB tier of 4 KiB
// chunks: 2,048 buckets). A refusal is answered again from the client's
// memory for OKVI_DISCOVER_BACKOFF_NS (no MapDiscovery per call), the
// budget comes back when the table's session closes, and once the Manager
// stopped (every table retired) a mapped index answers an error, never its
// last counts.
func TestARefusedNamespaceIsRememberedAndRetiredTablesAreNotRead(t *testing.T) {
	oneTable := 64 + 2048*64
	path, stop := startManagerWith(t, managerDiscoverEnv+"="+strconv.Itoa(oneTable))
	holder, err := native.Connect(native.ConnectOptions{SocketPath: path, InstanceID: "discover-holder"})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	c, err := native.Connect(native.ConnectOptions{SocketPath: path, InstanceID: "discover-late"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nsA, nsB := discNamespace(t, "refusal-a"), discNamespace(t, "refusal-b")
	if _, err := holder.DiscoverLocal(nsA, discHashes(0, 4)); err != nil {
		t.Fatal(err)
	}
	t.Run("a refused namespace is answered from memory, naming the Manager's refusal", func(t *testing.T) {
		_, err := c.DiscoverLocal(nsB, discHashes(0, 4))
		var ce *native.ClientError
		if !errors.As(err, &ce) || !strings.Contains(ce.Detail, "--discover-bytes") {
			t.Fatalf("first call past the budget: %v, want the Manager's refusal naming --discover-bytes", err)
		}
		for i := range 1000 {
			_, again := c.DiscoverLocal(nsB, discHashes(0, 4))
			var ae *native.ClientError
			if !errors.As(again, &ae) || ae.Code != ce.Code || !strings.Contains(ae.Detail, "--discover-bytes") {
				t.Fatalf("call %d after the refusal: %v, want the same refusal (%v)", i, again, err)
			}
			if !strings.Contains(ae.Detail, "ms ago; asked again 1000 ms after it") {
				// Either the backoff passed (a descheduled test on a loaded
				// VM) or the client asked the Manager again.
				if i < 10 {
					t.Fatalf("call %d after the refusal was not answered from memory: %q", i, ae.Detail)
				}
				break
			}
		}
	})
	t.Run("the budget comes back when the table's only session closes", func(t *testing.T) {
		holder.Close()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := c.DiscoverLocal(nsB, discHashes(0, 4))
			if err == nil {
				if got != 0 {
					t.Fatalf("an empty namespace counts %d", got)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("30 s after the holder closed: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("a table the Manager retired answers an error, not its last counts", func(t *testing.T) {
		buf, err := native.AllocBuffer(1, 4096, 16)
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Free()
		id, err := c.RegisterBuffer(buf)
		if err != nil {
			t.Fatal(err)
		}
		chain := discHashes(0, 8)
		publishRange(t, c, nsB, id, chain)
		if got, err := c.DiscoverLocal(nsB, chain); err != nil || got != 8 {
			t.Fatalf("before the Manager stopped: %d, %v; want 8", got, err)
		}
		stop() // Registry.Close retires every table; the client's mapping stays
		got, err := c.DiscoverLocal(nsB, chain)
		if err == nil {
			t.Fatalf("after the Manager stopped the index still answered %d with no error", got)
		}
		if got != 0 {
			t.Fatalf("a retired table counted %d", got)
		}
		t.Logf("after the Manager stopped: %v", err)
	})
}
