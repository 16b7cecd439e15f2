package index

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/evict"
)

// Insert takes Blocks from slabs in order: on this runtime the slabs align
// (else newSlab hands out lone Blocks, and metaRest is 0), the blocks of
// one slab are consecutive lines, and each block's metaRest counts the
// Blocks after it in its slab. Prefix's follow relies on all three; a
// runtime that moved Go's malloc header would fail here rather than make
// chains slow unnoticed.
func TestInsertTakesConsecutiveLinesOfASlab(t *testing.T) {
	x := New(evict.NewLRU())
	var prev *Block
	for i := 0; i < 3*slabBlocks; i++ {
		b := x.Insert(Key{NS: abi.Namespace{3}, Hash: abi.BlockHash{byte(i), byte(i >> 8)}}, 64, 1, 0, nil)
		if rest := int(b.meta & metaRest); rest != len(x.slab) {
			t.Fatalf("block %d: metaRest %d, %d Blocks left in its slab", i, rest, len(x.slab))
		}
		if i%slabBlocks != 0 && uintptr(unsafe.Pointer(b)) != uintptr(unsafe.Pointer(prev))+blockBytes {
			t.Fatalf("block %d at %p does not follow block %d at %p", i, b, i-1, prev)
		}
		if i%slabBlocks == 0 && b.meta&metaRest != slabBlocks-1 {
			t.Fatalf("block %d opens a slab with metaRest %d, want %d (slabs misaligned: %v)", i, b.meta&metaRest, slabBlocks-1, slabsMisaligned.Load())
		}
		if uintptr(unsafe.Pointer(b))%blockBytes != 0 {
			t.Fatalf("block %d at %p: not 64-byte aligned", i, b)
		}
		prev = b
	}
}

// prefixByLookup is Prefix's contract spelled with Lookup: the chain's
// sealed blocks, in order, up to the first absent or unsealed one.
func prefixByLookup(x *Index, ns abi.Namespace, hashes []byte) []*Block {
	var out []*Block
	for i := 0; i+abi.HashSize <= len(hashes); i += abi.HashSize {
		b := x.Lookup(Key{NS: ns, Hash: abi.BlockHash(hashes[i : i+abi.HashSize])})
		if b == nil {
			break
		}
		out = append(out, b)
	}
	return out
}

// samePrefix fails t unless Prefix of hashes in ns gives prefixByLookup's
// blocks.
func samePrefix(t *testing.T, what string, x *Index, ns abi.Namespace, hashes []byte) []*Block {
	t.Helper()
	got := x.Prefix(ns, hashes, nil)
	want := prefixByLookup(x, ns, hashes)
	if len(got) != len(want) {
		t.Fatalf("%s: Prefix finds %d blocks, Lookup %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: block %d of Prefix (%p) is not Lookup's (%p)", what, i, got[i], want[i])
		}
	}
	return got
}

// Under churn (chains of two namespaces published interleaved, in pieces,
// some aborted, some removed or evicted, some still publishing), Prefix,
// which reads slab-mates by address, finds exactly the blocks Lookup
// finds one by one, for chains that run through slab boundaries, holes,
// another namespace's blocks and blocks of other chains. It also checks
// that many blocks were found by address (Stats.ByAddress), so it tests
// follow and not only the table.
func TestPrefixByAddressAgreesWithLookupUnderChurn(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := New(evict.NewLRU())
	nss := [2]abi.Namespace{{1}, {2}}
	const chains, chainLen = 40, 200
	hash := func(c, i int) abi.BlockHash {
		var h abi.BlockHash
		binary.LittleEndian.PutUint64(h[:], uint64(c)<<32|uint64(i))
		h[15] = 0xc4
		return h
	}
	chain := func(c int) []byte { return chainBytes(chainLen, func(i int) abi.BlockHash { return hash(c, i) }) }
	var publishing []*Block
	byAddress := x.Stats().ByAddress
	for step := 0; step < 3000; step++ {
		c := rng.IntN(chains)
		ns := nss[c%2]
		switch r := rng.IntN(10); {
		case r < 5: // publish a piece of chain c: where its cached prefix ends (as an engine extends a chain), or from anywhere
			from := rng.IntN(chainLen)
			if rng.IntN(2) == 0 {
				from = len(prefixByLookup(x, ns, chain(c)))
			}
			for i := from; i < min(chainLen, from+1+rng.IntN(80)); i++ {
				k := Key{NS: ns, Hash: hash(c, i)}
				if x.Contains(k) {
					continue
				}
				b := x.Insert(k, 64, 1, uint32(i), nil)
				switch rng.IntN(20) {
				case 0:
					publishing = append(publishing, b)
				case 1:
					x.Abort(b)
				default:
					x.Seal(b)
				}
			}
		case r < 6: // finish or abort what is publishing
			for _, b := range publishing {
				if rng.IntN(2) == 0 {
					x.Seal(b)
				} else {
					x.Abort(b)
				}
			}
			publishing = publishing[:0]
		case r < 8: // remove some blocks of chain c
			for i := 0; i < chainLen; i++ {
				if b := x.Lookup(Key{NS: ns, Hash: hash(c, i)}); b != nil && b.pins == 0 && rng.IntN(30) == 0 {
					x.Remove(b)
				}
			}
		default: // evict a few
			for i := 0; i < rng.IntN(30); i++ {
				x.Evict()
			}
		}
		for q := 0; q < 4; q++ {
			c := rng.IntN(chains)
			from := rng.IntN(chainLen)
			samePrefix(t, "churn", x, nss[c%2], chain(c)[from*abi.HashSize:])
			// And asked in the other namespace, whose blocks of the same
			// hashes are never this chain's.
			samePrefix(t, "churn, other namespace", x, nss[(c+1)%2], chain(c))
		}
	}
	// The lookups above must have taken the address route, or the test
	// checked only the table.
	if got := x.Stats().ByAddress - byAddress; got < 1000 {
		t.Fatalf("Prefix found %d blocks by address during the churn: follow was hardly exercised", got)
	}
}

// follow itself, on one slab whose blocks hold a chain in order: it takes
// the slab-mates after a block while they are sealed and hold the next
// hashes of the namespace asked, stops at the first that is not, at the
// slab's end, and at the hashes' end, and Prefix counts what it took in
// Stats.ByAddress.
func TestFollowTakesSlabMatesUpToTheFirstMismatch(t *testing.T) {
	ns := abi.Namespace{4}
	const blocksN = 2 * slabBlocks
	h := func(i int) abi.BlockHash { return abi.BlockHash{byte(i), byte(i >> 8), 0x3c} }
	chain := chainBytes(blocksN, h)
	x := New(evict.NewLRU())
	blocks := make([]*Block, blocksN)
	for i := range blocksN {
		blocks[i] = x.Insert(Key{NS: ns, Hash: h(i)}, 64, 1, 0, nil)
		if i != 40 {
			x.Seal(blocks[i])
		}
	}
	follow := func(from int, hashes []byte, inNS abi.Namespace) int {
		out, f := x.follow(blocks[from], inNS, x.m.nsMix(&inNS), hashes, nil)
		if len(out) != f {
			t.Fatalf("follow from %d appended %d blocks and reported %d", from, len(out), f)
		}
		for j, b := range out {
			if b != blocks[from+1+j] {
				t.Fatalf("follow from %d: block %d is not the chain's block %d", from, j, from+1+j)
			}
		}
		return f
	}
	after := func(i int) []byte { return chain[(i+1)*abi.HashSize:] }
	for _, c := range []struct {
		what   string
		from   int
		hashes []byte
		ns     abi.Namespace
		want   int
	}{
		{"up to the publishing block 40", 0, after(0), ns, 39},
		{"from the block after it", 41, after(41), ns, slabBlocks - 1 - 41},
		{"the slab's last block has no mates", slabBlocks - 1, after(slabBlocks - 1), ns, 0},
		{"the hashes end first", 0, chain[abi.HashSize : 11*abi.HashSize], ns, 10},
		{"a trailing partial hash is not a hash", 0, chain[abi.HashSize : 11*abi.HashSize+5], ns, 10},
		{"no hashes", 0, nil, ns, 0},
		{"another namespace", 0, after(0), abi.Namespace{5}, 0},
		{"the next slab's blocks are not mates", slabBlocks, after(slabBlocks), ns, slabBlocks - 1},
	} {
		if got := follow(c.from, c.hashes, c.ns); got != c.want {
			t.Fatalf("%s: follow took %d, want %d", c.what, got, c.want)
		}
	}
	// A hash that differs (the chain forks) stops it there.
	fork := slices.Clone(after(0))
	fork[5*abi.HashSize] ^= 1
	if got := follow(0, fork, ns); got != 5 {
		t.Fatalf("a fork at the 6th mate: follow took %d, want 5", got)
	}
	// Prefix: block 0 by the table, 1..39 by address, then 40 stops it.
	before := x.Stats().ByAddress
	if got := len(x.Prefix(ns, chain, nil)); got != 40 {
		t.Fatalf("Prefix found %d blocks, want 40", got)
	}
	if d := x.Stats().ByAddress - before; d != 39-(prefixGroup-1) {
		t.Fatalf("Prefix found %d blocks by address, want %d (the first group through the table)", d, 39-(prefixGroup-1))
	}
	// Sealed, the whole chain: the first group by the table, the rest of
	// each slab by address, the next slab's first block by the table.
	x.Seal(blocks[40])
	before = x.Stats().ByAddress
	if got := len(x.Prefix(ns, chain, nil)); got != blocksN {
		t.Fatalf("Prefix found %d of %d blocks", got, blocksN)
	}
	if d, want := x.Stats().ByAddress-before, uint64(blocksN-prefixGroup-1); d != want {
		t.Fatalf("Prefix found %d blocks by address, want %d", d, want)
	}
	// Removed from the middle of a slab: the run breaks there, and so
	// does the chain.
	x.Remove(blocks[30])
	if got := len(x.Prefix(ns, chain, nil)); got != 30 {
		t.Fatalf("Prefix past the removed block 30 found %d blocks", got)
	}
}

// At fixed places: a chain published in order but with one block removed
// and published again (it moved to another slab), one still publishing,
// and a slab-mate of another namespace with the chain's next hash. Prefix
// must stop (or go on through the table) exactly where Lookup does.
func TestPrefixByAddressStopsWhereTheTableWould(t *testing.T) {
	ns, other := abi.Namespace{5}, abi.Namespace{6}
	const blocksN = 3 * slabBlocks
	h := func(i int) abi.BlockHash { return abi.BlockHash{byte(i), byte(i >> 8), 0x5a} }
	chain := chainBytes(blocksN, h)
	x := New(evict.NewLRU())
	blocks := make([]*Block, blocksN)
	for i := range blocksN {
		k := Key{NS: ns, Hash: h(i)}
		if i == prefixGroup+4 {
			// A slab-mate in another namespace holding the chain's hash;
			// the chain's own block comes after it.
			x.Seal(x.Insert(Key{NS: other, Hash: h(i)}, 64, 1, 0, nil))
		}
		blocks[i] = x.Insert(k, 64, 1, 0, nil)
		if i != 100 {
			x.Seal(blocks[i])
		}
	}
	// Block 70 removed and published again: now the last block allocated.
	x.Remove(blocks[70])
	blocks[70] = x.Insert(Key{NS: ns, Hash: h(70)}, 64, 1, 0, nil)
	x.Seal(blocks[70])
	got := samePrefix(t, "removed and re-published at 70, publishing at 100", x, ns, chain)
	if len(got) != 100 {
		t.Fatalf("Prefix finds %d blocks, want 100 (up to the publishing one)", len(got))
	}
	samePrefix(t, "other namespace", x, other, chain)
	x.Seal(blocks[100])
	if got := samePrefix(t, "all sealed", x, ns, chain); len(got) != blocksN {
		t.Fatalf("Prefix finds %d of %d sealed blocks", len(got), blocksN)
	}
	// Every length, so the chain's end falls at every place in a run.
	for n := 0; n <= blocksN; n++ {
		samePrefix(t, "prefix of the chain", x, ns, chain[:n*abi.HashSize])
	}
	x.Remove(blocks[50])
	if got := samePrefix(t, "removed at 50", x, ns, chain); len(got) != 50 {
		t.Fatalf("Prefix finds %d blocks past a removed block 50", len(got))
	}
}
