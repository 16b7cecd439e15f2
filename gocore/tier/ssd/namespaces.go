package ssd

// NamespaceUse is what one namespace holds in the store: its resident
// blocks and their bytes (Meta.Bytes summed; each takes a slot of
// HeaderBytes + Spec.SlotBytes on the device whatever its size).
type NamespaceUse struct {
	Blocks, Bytes uint64
}

// ByNamespace returns the resident blocks of every namespace, by
// namespace (Key.NS); Writes in flight are not counted. It walks every
// resident entry under the store's lock, so the workers' completions wait
// for it: for the operator's namespace listing, never a request path.
// Safe from any goroutine.
func (s *Store) ByNamespace() map[[16]byte]*NamespaceUse {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[[16]byte]*NamespaceUse)
	var last *NamespaceUse
	var lastNS [16]byte
	for e := s.fifo.head; e != nil; e = e.next {
		if last == nil || e.key.NS != lastNS {
			last = out[e.key.NS]
			if last == nil {
				last = &NamespaceUse{}
				out[e.key.NS] = last
			}
			lastNS = e.key.NS
		}
		last.Blocks++
		last.Bytes += e.meta.Bytes
	}
	return out
}
