package manager

import (
	"context"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/peer"
)

// source is peer control's hold on the RAM tier (peer.Source): each call
// runs cache.Service.PinRun or UnpinRun on the dispatcher goroutine
// through channel.Dispatcher.Do, so pins are taken and dropped between
// requests, like a lease's.
type source struct {
	disp *channel.Dispatcher
	svc  *cache.Service
}

// Pin pins the longest resident leading run of hashes within maxBytes. A
// Pin whose ctx ended while the dispatcher served it releases what it
// pinned and returns ctx's error.
func (s *source) Pin(ctx context.Context, ns abi.Namespace, hashes []abi.BlockHash, maxBytes uint64) (uint64, []peer.PinnedBlock, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	var pin uint64
	var run []cache.PinnedBlock
	if err := s.disp.Do(func() { pin, run = s.svc.PinRun(ns, hashes, maxBytes) }); err != nil {
		return 0, nil, err
	}
	if err := ctx.Err(); err != nil {
		s.Unpin(pin)
		return 0, nil, err
	}
	out := make([]peer.PinnedBlock, len(run))
	for i, b := range run {
		out[i] = peer.PinnedBlock{Hash: b.Hash, Length: b.Length, Layers: b.Layers, Bufs: b.Bufs}
	}
	return pin, out, nil
}

// Unpin releases a pin Pin returned (0: nothing was pinned).
func (s *source) Unpin(pin uint64) {
	if pin == 0 {
		return
	}
	_ = s.disp.Do(func() { _ = s.svc.UnpinRun(pin) }) // ErrStopped: the cache and its pins are gone
}
