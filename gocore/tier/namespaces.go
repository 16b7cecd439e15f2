package tier

import "github.com/orbitkv/orbitkv/gocore/tier/ssd"

// SSDByNamespace returns the SSD tier's resident blocks and bytes by
// namespace (ssd.Store.ByNamespace: a walk of its entries under its
// lock); nil without an SSD tier. Safe from any goroutine.
func (t *Tiers) SSDByNamespace() map[[16]byte]*ssd.NamespaceUse {
	if t.ssd == nil {
		return nil
	}
	return t.ssd.store.ByNamespace()
}
