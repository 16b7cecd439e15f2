package index

import (
	"github.com/orbitkv/orbitkv/gocore/abi"
)

// Key identifies a block: namespace then block hash.
type Key struct {
	NS   abi.Namespace
	Hash abi.BlockHash
}

// State of a block.
type State uint8

// Block states.
const (
	Publishing State = iota + 1 // frames allocated, copy in flight: invisible
	Sealed                      // visible to lookups
)

// Block is one cached block. Fields other than Chunks and Bytes are owned by
// the Index.
type Block struct {
	Key    Key
	Bytes  uint64   // block bytes (all layers)
	Layers uint32   // layers the block spans: Bytes/Layers bytes each
	Chunks []uint32 // RAM tier chunk ids, in byte order
	state  State
	pins   int32
	// LRU links; non-nil only while on the list (sealed, unpinned).
	prev, next *Block
	onLRU      bool
}

// State is the block's state.
func (b *Block) State() State { return b.state }

// Pins is the block's pin count.
func (b *Block) Pins() int32 { return b.pins }

// Index is the block map plus the LRU list of evictable blocks.
type Index struct {
	m         map[Key]*Block
	head      Block // sentinel: head.next = most recent, head.prev = least recent
	lruLen    int
	lruChunks uint64 // chunks held by evictable blocks
	sealed    int
	pins      int64
	bytes     uint64 // bytes of sealed blocks
}

// New returns an empty index.
func New() *Index {
	x := &Index{m: make(map[Key]*Block)}
	x.head.next, x.head.prev = &x.head, &x.head
	return x
}

// Lookup returns the sealed block for k, or nil (absent or still publishing).
func (x *Index) Lookup(k Key) *Block {
	b := x.m[k]
	if b == nil || b.state != Sealed {
		return nil
	}
	return b
}

// Contains reports whether any block (sealed or publishing) holds k.
func (x *Index) Contains(k Key) bool { _, ok := x.m[k]; return ok }

// Insert adds a Publishing block for k of bytes over layers; it panics if k is present (the
// caller checks Contains first).
func (x *Index) Insert(k Key, bytes uint64, layers uint32, chunks []uint32) *Block {
	if _, ok := x.m[k]; ok {
		panic("index: Insert of a present key")
	}
	b := &Block{Key: k, Bytes: bytes, Layers: layers, Chunks: chunks, state: Publishing}
	x.m[k] = b
	return b
}

// Seal makes a Publishing block visible and evictable (if unpinned).
func (x *Index) Seal(b *Block) {
	if b.state != Publishing {
		panic("index: Seal of a block that is not publishing")
	}
	b.state = Sealed
	x.sealed++
	x.bytes += b.Bytes
	if b.pins == 0 {
		x.pushFront(b)
	}
}

// Abort removes a Publishing block whose copy failed or whose publisher went
// away; the caller releases its chunks.
func (x *Index) Abort(b *Block) {
	if b.state != Publishing {
		panic("index: Abort of a block that is not publishing")
	}
	delete(x.m, b.Key)
	b.state = 0
}

// Pin keeps b from eviction (a lease or a copy reads it).
func (x *Index) Pin(b *Block) {
	if b.onLRU {
		x.unlink(b)
	}
	b.pins++
	x.pins++
}

// Unpin drops one pin; the last one puts a sealed block at the LRU's most
// recent end.
func (x *Index) Unpin(b *Block) {
	if b.pins <= 0 {
		panic("index: Unpin of an unpinned block")
	}
	b.pins--
	x.pins--
	if b.pins == 0 && b.state == Sealed {
		x.pushFront(b)
	}
}

// Touch marks an evictable block most recently used.
func (x *Index) Touch(b *Block) {
	if b.onLRU {
		x.unlink(b)
		x.pushFront(b)
	}
}

// EvictableChunks is the number of chunks the LRU list could free.
func (x *Index) EvictableChunks() uint64 { return x.lruChunks }

// EvictOldest removes the least recently used unpinned sealed block and
// returns it (the caller releases its chunks), or nil if none.
func (x *Index) EvictOldest() *Block {
	b := x.head.prev
	if b == &x.head {
		return nil
	}
	x.unlink(b)
	delete(x.m, b.Key)
	x.sealed--
	x.bytes -= b.Bytes
	b.state = 0
	return b
}

// Stats are the index counters.
type Stats struct {
	Blocks    int    // sealed blocks
	Bytes     uint64 // bytes of sealed blocks
	Pins      int64  // pins over all blocks
	Evictable int    // sealed unpinned blocks
	Entries   int    // sealed + publishing
}

// Stats returns the counters.
func (x *Index) Stats() Stats {
	return Stats{Blocks: x.sealed, Bytes: x.bytes, Pins: x.pins, Evictable: x.lruLen, Entries: len(x.m)}
}

func (x *Index) pushFront(b *Block) {
	b.prev, b.next = &x.head, x.head.next
	x.head.next.prev = b
	x.head.next = b
	b.onLRU = true
	x.lruLen++
	x.lruChunks += uint64(len(b.Chunks))
}

func (x *Index) unlink(b *Block) {
	b.prev.next, b.next.prev = b.next, b.prev
	b.prev, b.next = nil, nil
	b.onLRU = false
	x.lruLen--
	x.lruChunks -= uint64(len(b.Chunks))
}
