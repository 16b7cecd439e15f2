package requester

// sieve is a fixed-capacity map with SIEVE eviction (Zhang et al., "SIEVE
// is Simpler than LRU", NSDI '24): entries sit in one queue in insertion
// order, a hit only sets the entry's visited bit (no reordering, so a hit
// is a store, not a list splice), and eviction moves a hand from the
// oldest entry towards the newest, clearing visited bits, and evicts the
// first entry whose bit is clear; the hand stays where it stopped. It is
// the Engine's endpoint pool. Not safe for concurrent use: the Engine
// holds its mutex around every call.
type sieve[K comparable, V any] struct {
	capacity int
	items    map[K]*sieveNode[K, V]
	// newest is the head of the queue, oldest its tail; newer points from
	// an entry towards the head.
	newest, oldest *sieveNode[K, V]
	hand           *sieveNode[K, V]
}

type sieveNode[K comparable, V any] struct {
	key          K
	val          V
	visited      bool
	newer, older *sieveNode[K, V]
}

// newSieve makes an empty sieve of capacity entries (≥ 1).
func newSieve[K comparable, V any](capacity int) *sieve[K, V] {
	return &sieve[K, V]{capacity: capacity, items: make(map[K]*sieveNode[K, V], capacity)}
}

// Len is the number of entries, at most the capacity.
func (s *sieve[K, V]) Len() int { return len(s.items) }

// Get returns k's value and marks it visited.
func (s *sieve[K, V]) Get(k K) (V, bool) {
	n, ok := s.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	n.visited = true
	return n.val, true
}

// Add inserts k (not present) at the head of the queue, first evicting one
// entry when the sieve is full; it returns the evicted value, if any.
func (s *sieve[K, V]) Add(k K, v V) (evicted V, ok bool) {
	if len(s.items) >= s.capacity {
		evicted, ok = s.evict()
	}
	n := &sieveNode[K, V]{key: k, val: v, older: s.newest}
	if s.newest != nil {
		s.newest.newer = n
	}
	s.newest = n
	if s.oldest == nil {
		s.oldest = n
	}
	s.items[k] = n
	return evicted, ok
}

// Remove deletes k if present and returns its value.
func (s *sieve[K, V]) Remove(k K) (V, bool) {
	n, ok := s.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	s.unlink(n)
	return n.val, true
}

// Values returns every value, newest first.
func (s *sieve[K, V]) Values() []V {
	out := make([]V, 0, len(s.items))
	for n := s.newest; n != nil; n = n.older {
		out = append(out, n.val)
	}
	return out
}

// evict removes the entry SIEVE chooses: from the hand (or the oldest
// entry) towards the newest, wrapping to the oldest, the first entry not
// visited, clearing the visited bits it passes.
func (s *sieve[K, V]) evict() (V, bool) {
	n := s.hand
	if n == nil {
		n = s.oldest
	}
	if n == nil {
		var zero V
		return zero, false
	}
	for n.visited {
		n.visited = false
		if n = n.newer; n == nil {
			n = s.oldest
		}
	}
	s.hand = n // unlink moves it to the next newer entry
	s.unlink(n)
	return n.val, true
}

// unlink takes n out of the queue and the map; a hand on n moves to the
// next newer entry (where the next eviction resumes).
func (s *sieve[K, V]) unlink(n *sieveNode[K, V]) {
	if s.hand == n {
		s.hand = n.newer
	}
	if n.newer != nil {
		n.newer.older = n.older
	} else {
		s.newest = n.older
	}
	if n.older != nil {
		n.older.newer = n.newer
	} else {
		s.oldest = n.newer
	}
	delete(s.items, n.key)
}
