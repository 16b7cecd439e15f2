package ssd

import "encoding/binary"

// ghost is the second-hit admission filter: a FIFO of the fingerprints of
// keys offered once and not yet admitted, bounded to n. A key offered
// while its fingerprint is remembered is admitted (and forgotten); any
// other key is remembered and declined. It forgets the oldest fingerprint
// when full, so a key must come back within n other first offers to be
// admitted. Fingerprints are 64 bits of the key (namespace and hash
// folded), so two keys collide with probability about n/2^64.
// Guarded by Store.mu.
type ghost struct {
	set  map[uint64]struct{}
	ring []uint64
	next int
}

func newGhost(n int) *ghost {
	return &ghost{set: make(map[uint64]struct{}, n), ring: make([]uint64, 0, n)}
}

func fingerprint(k Key) uint64 {
	return binary.LittleEndian.Uint64(k.Hash[0:8]) ^ binary.LittleEndian.Uint64(k.Hash[8:16])*0x9e3779b97f4a7c15 ^
		binary.LittleEndian.Uint64(k.NS[0:8]) ^ binary.LittleEndian.Uint64(k.NS[8:16])*0xc2b2ae3d27d4eb4f
}

// offer reports whether k is admitted now.
func (g *ghost) offer(k Key) bool {
	fp := fingerprint(k)
	if _, ok := g.set[fp]; ok {
		delete(g.set, fp)
		return true
	}
	if len(g.ring) < cap(g.ring) {
		g.ring = append(g.ring, fp)
	} else {
		// The slot may hold a fingerprint admitted since (already gone
		// from the set) or offered again later (then forgotten early: the
		// filter is approximate).
		delete(g.set, g.ring[g.next])
		g.ring[g.next] = fp
		g.next = (g.next + 1) % len(g.ring)
	}
	g.set[fp] = struct{}{}
	return false
}
