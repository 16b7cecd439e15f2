package cluster

import (
	"sync/atomic"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/catalog"
)

// Advertiser forwards the tiers' advertisements and withdrawals of the
// blocks this node produced to the catalog once it is open (gocore/tier's
// Advertiser); before Start and after Leave they go nowhere (the catalog
// lease's revocation withdraws everything at once). Dispatcher goroutine;
// the catalog queues, so neither call blocks.
type Advertiser struct {
	cat atomic.Pointer[catalog.Catalog]
}

// Advertise hands ns's hashes to the catalog as held by this node.
func (a *Advertiser) Advertise(ns abi.Namespace, hashes []abi.BlockHash) {
	if c := a.cat.Load(); c != nil {
		c.Advertise(ns, hashes)
	}
}

// Withdraw hands ns's hashes to the catalog as no longer held.
func (a *Advertiser) Withdraw(ns abi.Namespace, hashes []abi.BlockHash) {
	if c := a.cat.Load(); c != nil {
		c.Withdraw(ns, hashes)
	}
}
