package index

// Observer learns which keys are visible to lookups: Sealed when a block
// becomes visible (Seal), Removed when a sealed block leaves (eviction or
// Remove). Between a key's Sealed and its Removed, Lookup(k) finds it. The
// calls run on the goroutine that owns the Index (the dispatcher), inside
// Seal, Evict and Remove, so they must be quick and must not call back
// into the Index. gocore/discover keeps the shared-memory discovery index
// this way.
type Observer interface {
	Sealed(k Key)
	Removed(k Key)
}

// SetObserver makes o the Index's observer (nil: none). Blocks sealed
// before the call are not replayed: the caller walks Matching first, on
// the same goroutine, if it needs them.
func (x *Index) SetObserver(o Observer) { x.obs = o }
