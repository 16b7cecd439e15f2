package evict

// ghost is S3-FIFO's ghost queue: the keys of the last blocks evicted from
// the small queue, in FIFO order, without their data. A key found in the
// ghost on Insert was evicted too early, so its block goes straight to the
// main queue. The FIFO is a ring of (key, stamp); the map holds each key's
// latest stamp, so a key pushed twice is forgotten only with its newest
// entry and a lookup is O(1).
type ghost struct {
	ring  []ghostEntry
	head  int // index of the oldest entry
	n     int // entries in the ring
	stamp uint64
	m     map[uint64]uint64 // key → stamp of its newest ring entry
}

type ghostEntry struct {
	key, stamp uint64
}

// newGhost presizes for hint keys, at most 1<<16 (it grows as needed), so a
// generous hint costs no memory up front.
func newGhost(hint int) ghost {
	hint = min(max(hint, 16), 1<<16)
	return ghost{m: make(map[uint64]uint64, hint), ring: make([]ghostEntry, hint)}
}

// add remembers key, forgetting the oldest keys while more than limit are held.
func (g *ghost) add(key uint64, limit int) {
	limit = max(limit, 1)
	for g.n >= limit {
		g.pop()
	}
	if g.n == len(g.ring) {
		g.grow()
	}
	g.stamp++
	g.ring[(g.head+g.n)%len(g.ring)] = ghostEntry{key, g.stamp}
	g.n++
	g.m[key] = g.stamp
}

// take reports whether key is remembered and forgets it.
func (g *ghost) take(key uint64) bool {
	if _, ok := g.m[key]; !ok {
		return false
	}
	delete(g.m, key) // its ring entry is now stale and dropped by pop
	return true
}

func (g *ghost) pop() {
	e := g.ring[g.head]
	g.head = (g.head + 1) % len(g.ring)
	g.n--
	if s, ok := g.m[e.key]; ok && s == e.stamp {
		delete(g.m, e.key)
	}
}

func (g *ghost) grow() {
	r := make([]ghostEntry, 2*len(g.ring))
	for i := 0; i < g.n; i++ {
		r[i] = g.ring[(g.head+i)%len(g.ring)]
	}
	g.ring, g.head = r, 0
}
