package cluster

import (
	"context"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/peer"
)

// Pins is how peer control holds this node's RAM blocks for a transfer:
// Pin pins the longest resident leading run of hashes within maxBytes and
// returns it with a pin id (0 and nil when nothing is resident); Unpin
// releases a pin (an unknown one is an error, ignored). Both run on the
// dispatcher goroutine, where Do puts them (channel.Dispatcher.Do: an
// error once it stopped), so pins are taken and dropped between
// requests, like a lease's.
type Pins struct {
	Do    func(func()) error
	Pin   func(ns abi.Namespace, hashes []abi.BlockHash, maxBytes uint64) (pin uint64, run []peer.PinnedBlock)
	Unpin func(pin uint64) error
}

// source is peer control's Source over Pins.
type source struct{ p Pins }

// Pin pins the longest resident leading run of hashes within maxBytes. A
// Pin whose ctx ended while the dispatcher served it releases what it
// pinned and returns ctx's error.
func (s source) Pin(ctx context.Context, ns abi.Namespace, hashes []abi.BlockHash, maxBytes uint64) (uint64, []peer.PinnedBlock, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	var pin uint64
	var run []peer.PinnedBlock
	if err := s.p.Do(func() { pin, run = s.p.Pin(ns, hashes, maxBytes) }); err != nil {
		return 0, nil, err
	}
	if err := ctx.Err(); err != nil {
		s.Unpin(pin)
		return 0, nil, err
	}
	return pin, run, nil
}

// Unpin releases a pin Pin returned (0: nothing was pinned).
func (s source) Unpin(pin uint64) {
	if pin == 0 {
		return
	}
	_ = s.p.Do(func() { _ = s.p.Unpin(pin) }) // an error: the dispatcher stopped, and the cache's pins are gone with it
}
