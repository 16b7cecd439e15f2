package index

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// table is the Index's key → block map: open addressing with linear probing
// over 16-byte slots (a 64-bit tag and the block pointer), at most half
// full. It exists for Prefix: a chain lookup issues the slot loads of a
// group of keys before it needs any of them, so their cache misses overlap
// (a Go map lookup per hash serialised them: ~280 ns per hash at 1M blocks,
// measured with orbitkv-bench query). Deletion shifts later slots back
// (no tombstones), so probe lengths stay short under churn.
//
// Tags mix the key's four 64-bit words with 128-bit multiplies (the
// wyhash construction) under a per-process random seed from crypto/rand,
// so a client cannot choose hashes that collide in the table without
// knowing it; 3 ns per key against 17 for hash/maphash.Comparable here.
// 0 marks an empty slot. Lookups compare the full key, so a tag collision
// costs a probe, never a wrong block.
type table struct {
	slots []slot
	mask  uint64
	n     int
	seed  [5]uint64
}

type slot struct {
	tag uint64
	blk *Block
}

const minTableSlots = 1024

func newTable() table {
	t := table{slots: newSlots(minTableSlots), mask: minTableSlots - 1}
	var b [40]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("index: crypto/rand: " + err.Error()) // never fails on Linux (getrandom(2))
	}
	for i := range t.seed {
		t.seed[i] = binary.LittleEndian.Uint64(b[8*i:]) | 1
	}
	return t
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// tag is k's 64-bit table hash (never 0).
func (t *table) tag(k *Key) uint64 {
	le := binary.LittleEndian
	return t.tagIn(t.nsMix(&k.NS), le.Uint64(k.Hash[:8]), le.Uint64(k.Hash[8:]))
}

// nsMix is the namespace's share of a tag: computed once per chain by
// Prefix, whose keys all share one namespace.
func (t *table) nsMix(ns *abi.Namespace) uint64 {
	le := binary.LittleEndian
	return mix(le.Uint64(ns[:])^t.seed[0], le.Uint64(ns[8:])^t.seed[1])
}

// tagIn is the tag of the block hash whose little-endian 64-bit halves
// are h0 (bytes 0..8) and h1 (bytes 8..16) in the namespace whose nsMix
// is nsm. Small enough to inline into Prefix's loop.
func (t *table) tagIn(nsm, h0, h1 uint64) uint64 {
	x := mix(nsm^mix(h0^t.seed[2], h1^t.seed[3])^t.seed[4], 0x9e3779b97f4a7c15)
	if x == 0 {
		x = 1
	}
	return x
}

// find returns the block stored under k (tag h), or nil.
func (t *table) find(k *Key, h uint64) *Block {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.tag == 0 {
			return nil
		}
		if s.tag == h && s.blk.Key == *k {
			return s.blk
		}
	}
}

// findTag returns the first block of h's run whose tag is h, or nil; the
// caller compares its key.
func (t *table) findTag(h uint64) *Block {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if s.tag == h {
			return s.blk
		}
		if s.tag == 0 {
			return nil
		}
	}
}

// put stores b under its key, which must be absent.
func (t *table) put(b *Block) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	t.insert(t.tag(&b.Key), b)
	t.n++
}

func (t *table) insert(h uint64, b *Block) {
	i := h & t.mask
	for t.slots[i].tag != 0 {
		i = (i + 1) & t.mask
	}
	t.slots[i] = slot{h, b}
}

func (t *table) grow() {
	old := t.slots
	t.slots = newSlots(2 * len(old))
	t.mask = uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.tag != 0 {
			t.insert(s.tag, s.blk)
		}
	}
}

// del removes b (stored under its key); later slots of its run shift back
// into the hole when their home position allows it.
func (t *table) del(b *Block) {
	h := t.tag(&b.Key)
	i := h & t.mask
	for t.slots[i].blk != b {
		if t.slots[i].tag == 0 {
			panic("index: table delete of an absent block")
		}
		i = (i + 1) & t.mask
	}
	for j := (i + 1) & t.mask; t.slots[j].tag != 0; j = (j + 1) & t.mask {
		home := t.slots[j].tag & t.mask
		// Move slot j into the hole at i unless its home lies in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = slot{}
	t.n--
}
