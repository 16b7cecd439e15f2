package cache

import (
	"errors"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/peer"
)

// The source side of a peer transfer (gocore/cluster's Pins, run through
// channel.Dispatcher.Do): the exact resident blocks a peer asked for are
// pinned for the transfer, as a lease pins them (docs/design.md §6 rule 4:
// never evicted while pinned; rule 8: Stats.Idle is false and Check
// accounts for them while any is held), until UnpinRun.

// ErrNoPin is returned by UnpinRun for a pin that is not held (never
// issued, or already released).
var ErrNoPin = errors.New("cache: no such transfer pin")

// PinRun pins the longest leading run of hashes sealed in RAM, at most
// maxBytes of them (a block that does not fit ends the run), and returns
// it with a pin id for UnpinRun (each block's bytes are the
// concatenation of its Bufs, the RAM tier's chunks, the last one cut to
// the block's length: immutable while pinned, valid only until then); an empty run pins nothing and returns id
// 0. Dispatcher goroutine only.
func (s *Service) PinRun(ns abi.Namespace, hashes []abi.BlockHash, maxBytes uint64) (pin uint64, run []peer.PinnedBlock) {
	blocks := s.idx.Prefix(ns, abi.HashBytes(hashes), nil)
	var bytes uint64
	for i, blk := range blocks {
		if bytes+blk.Bytes > maxBytes {
			blocks = blocks[:i]
			break
		}
		bytes += blk.Bytes
	}
	if len(blocks) == 0 {
		return 0, nil
	}
	run = make([]peer.PinnedBlock, len(blocks))
	for i, blk := range blocks {
		s.idx.Pin(blk)
		run[i] = peer.PinnedBlock{Hash: blk.Key.Hash, Length: blk.Bytes, Layers: blk.Layers, Bufs: s.frames(blk)}
	}
	s.nextPin++
	pin = s.nextPin
	if s.transferPins == nil {
		s.transferPins = make(map[uint64][]*index.Block)
	}
	s.transferPins[pin] = blocks
	s.pinnedBlocks += len(blocks)
	s.publishStats()
	return pin, run
}

// frames are blk's chunks, the last one cut to its length.
func (s *Service) frames(blk *index.Block) [][]byte {
	out := make([][]byte, len(blk.Chunks))
	left := blk.Bytes
	for i, c := range blk.Chunks {
		b := s.arena.Chunk(c)
		b = b[:min(uint64(len(b)), left)]
		left -= uint64(len(b))
		out[i] = b
	}
	return out
}

// UnpinRun releases a pin PinRun issued: its blocks may be evicted again.
// An unknown or released pin is ErrNoPin. Dispatcher goroutine only.
func (s *Service) UnpinRun(pin uint64) error {
	blocks, ok := s.transferPins[pin]
	if !ok {
		return ErrNoPin
	}
	delete(s.transferPins, pin)
	for _, blk := range blocks {
		s.idx.Unpin(blk)
	}
	s.pinnedBlocks -= len(blocks)
	s.publishStats()
	return nil
}

// RAMMemory is the RAM tier's whole mapping (valid until Close), which a
// transfer engine registers as destination memory so that bytes from
// peers land in the tier's frames directly. Safe from any goroutine.
func (s *Service) RAMMemory() []byte { return s.arena.Mem() }
