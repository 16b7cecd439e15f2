package query

import (
	"fmt"
	"math/bits"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// probeTable is the query suite's machine yardstick: a bare open-addressing
// table of 64-bit keys (linear probing, 16-byte slots of key and value, at
// most half full, as gocore/index's table), looked up for keys in an
// arbitrary order of their slots. A lookup of key k costs one cache miss
// whose address depends on k (its slot: the table is 2^21 slots, 32 MiB
// for a million keys, larger than this class of machine's last-level
// cache), and nothing else: what any index of a million resident blocks
// must pay per hash at least. Successive keys' lookups are independent, so
// the CPU overlaps their misses as far as it can, as the Manager's chain
// lookup (index.Prefix) lets it. The Manager's server time per hash
// divided by this probe's time per key compares across machines (a
// machine with faster memory makes both faster).
//
// The slot array is advised onto transparent hugepages exactly as the
// index's is (gocore/index newSlots), so the probe pays the cache miss and
// not a TLB miss wherever the index does not either: the yardstick is the
// best a bare table does on this machine.
//
// serialNs is the same lookup where each key is the value found by the
// previous lookup (a pointer chase): one miss at a time, the memory
// latency; it is reported for context, not used in any ratio.
type probeTable struct {
	slots []probeSlot
	mask  uint64
	keys  []uint64 // keys[i] is the i-th inserted key; lookups walk keys in order
	first uint64   // the start of the chase: keys[0]
}

type probeSlot struct {
	key uint64 // 0: empty
	val uint64 // the next key of the chase
}

// splitmix64 is a bijective 64-bit mix (Steele, Lea, Flood 2014): the
// probe's keys are splitmix64(i+1), distinct and spread over the table.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// probeHome is a key's home slot hash: a 128-bit multiply folded, as the
// index's tags are made (one multiply here, not four: the keys are random
// already).
func probeHome(k uint64) uint64 {
	hi, lo := bits.Mul64(k, 0x9e3779b97f4a7c15)
	return hi ^ lo
}

// newProbeTable builds the table over n keys (n ≥ 1): 2^⌈log2 2n⌉ slots.
// The chase visits every key once: key i's value is key i+1 (the last
// one's is the first).
func newProbeTable(n int) *probeTable {
	size := uint64(1)
	for size < 2*uint64(n) {
		size <<= 1
	}
	p := &probeTable{slots: newProbeSlots(int(size)), mask: size - 1, keys: make([]uint64, n)}
	for i := range p.keys {
		p.keys[i] = splitmix64(uint64(i) + 1)
		if p.keys[i] == 0 {
			p.keys[i] = 1 // splitmix64 is bijective: 0 is hit at most once
		}
	}
	for i, k := range p.keys {
		j := probeHome(k) & p.mask
		for p.slots[j].key != 0 {
			j = (j + 1) & p.mask
		}
		p.slots[j] = probeSlot{key: k, val: p.keys[(i+1)%n]}
	}
	p.first = p.keys[0]
	return p
}

// find returns k's value, or 0 when k is absent.
func (p *probeTable) find(k uint64) uint64 {
	for j := probeHome(k) & p.mask; ; j = (j + 1) & p.mask {
		s := &p.slots[j]
		if s.key == k {
			return s.val
		}
		if s.key == 0 {
			return 0
		}
	}
}

// independentNs times lookups of every key in insertion order (each lookup's
// address depends only on its own key), rounds passes over the keys, and
// returns ns per key. It fails if a key is not found (the table is wrong).
func (p *probeTable) independentNs(rounds int) (float64, error) {
	var sum uint64
	t := time.Now()
	for range rounds {
		for _, k := range p.keys {
			v := p.find(k)
			if v == 0 {
				return 0, fmt.Errorf("probe: key %#x not found", k)
			}
			sum += v
		}
	}
	d := time.Since(t)
	if sum == 0 {
		return 0, fmt.Errorf("probe: the values sum to 0")
	}
	return float64(d.Nanoseconds()) / float64(rounds*len(p.keys)), nil
}

// serialNs times a chase of rounds × n lookups, each key the previous
// lookup's value, and returns ns per key.
func (p *probeTable) serialNs(rounds int) (float64, error) {
	k := p.first
	n := rounds * len(p.keys)
	t := time.Now()
	for range n {
		k = p.find(k)
		if k == 0 {
			return 0, fmt.Errorf("probe: the chase reached an absent key")
		}
	}
	d := time.Since(t)
	if k != p.first { // n is a whole number of cycles of the chase
		return 0, fmt.Errorf("probe: the chase ended at %#x, not at its start %#x", k, p.first)
	}
	return float64(d.Nanoseconds()) / float64(n), nil
}

// newProbeSlots is n zeroed slots, their 2 MiB-aligned interior advised
// MADV_HUGEPAGE (best effort, as gocore/index's newSlots).
func newProbeSlots(n int) []probeSlot {
	const huge = 2 << 20
	s := make([]probeSlot, n)
	base := unsafe.Pointer(unsafe.SliceData(s))
	start, size := uintptr(base), uintptr(n)*unsafe.Sizeof(probeSlot{})
	lo, hi := (start+huge-1)&^(huge-1), (start+size)&^(huge-1)
	if hi > lo {
		_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(base, lo-start)), hi-lo), unix.MADV_HUGEPAGE)
	}
	return s
}
