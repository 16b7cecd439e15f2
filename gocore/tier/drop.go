package tier

import (
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
)

// Dropped counts what Drop did.
type Dropped struct {
	RAMBlocks, RAMBytes uint64 // blocks removed from the RAM tier, and their bytes
	SSDBlocks           uint64 // blocks removed from the SSD tier (flush only)
	Pinned              uint64 // matching RAM blocks kept: pinned by a lease or a copy
	Publishing          uint64 // matching RAM blocks kept: still being published or read from SSD
}

// Drop removes the unpinned sealed RAM blocks whose namespace match
// accepts (dispatcher goroutine only), withdrawing the advertisements of
// those this node produced. Without flush each of those is demoted to
// the SSD tier first, as MakeRoom's evictions are (admission rule and
// staging buffers permitting); with flush it is not, and the matching
// SSD blocks are deleted too, but for those a prefetch is reading. Pinned
// and publishing blocks stay and are counted; adopted blocks whose
// checksum is still being verified (adopt.go) are counted as publishing
// and discarded once verified. Operator drops are not
// counted as evictions. Cost: a walk of the index table and, with flush,
// of the SSD keys.
func (t *Tiers) Drop(match func(abi.Namespace) bool, flush bool) Dropped {
	var d Dropped
	if v := t.adopting; v != nil {
		v.dropped = append(v.dropped, match) // adopted blocks still being verified go too
	}
	for _, blk := range t.idx.Matching(match) {
		switch {
		case blk.State() != index.Sealed:
			d.Publishing++
		case blk.Pins() > 0:
			d.Pinned++
		default:
			t.idx.Remove(blk)
			if t.ssd != nil && !flush && !blk.Replica() {
				t.demote(blk) // copies the bytes out first: the chunks are free after
			}
			t.gone(blk)
			t.arena.Release(blk.Chunks)
			d.RAMBlocks++
			d.RAMBytes += blk.Bytes
		}
	}
	if flush && t.ssd != nil {
		for _, k := range t.ssd.store.Keys() {
			if !match(abi.Namespace(k.NS)) {
				continue
			}
			if _, busy := t.ssd.loading[index.Key{NS: k.NS, Hash: k.Hash}]; busy {
				continue
			}
			t.ssd.store.Delete(k)
			d.SSDBlocks++
		}
	}
	t.FlushAdverts()
	return d
}
