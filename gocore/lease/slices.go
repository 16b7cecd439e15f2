package lease

import (
	"math/bits"

	"github.com/orbitkv/orbitkv/gocore/index"
)

// maxPooledBlocks is the largest block slice blockSlices keeps (512 KiB of
// pointers), and maxPooledPerClass how many of one capacity it keeps:
// at most 2 × 2^16 × 8 B × 8 = 8 MiB idle in all.
const (
	maxPooledBlocks   = 1 << 16
	maxPooledPerClass = 8
)

// blockSlices recycles the block slices of ended leases for new ones. A
// 10,000-block query would otherwise allocate 80 KB per lease, and at the
// rate a Manager serves them the allocation, its zeroing and the garbage
// collection it triggers (each cycle marks every Block of the index) cost
// a fifth of the query's time (orbitkv-bench query, profiled). Slices are
// kept by power-of-two capacity; a kept slice is all nil (put clears it),
// so it pins no block.
type blockSlices struct {
	free [bits.UintSize][][]*index.Block
}

// get returns a slice of n nil entries: of a pooled class's capacity when
// n ≤ maxPooledBlocks, else of exactly n (never pooled).
func (p *blockSlices) get(n int) []*index.Block {
	if n <= 0 {
		return nil
	}
	if n > maxPooledBlocks {
		return make([]*index.Block, n)
	}
	k := bits.Len(uint(n - 1))
	if l := len(p.free[k]); l > 0 {
		s := p.free[k][l-1]
		p.free[k][l-1] = nil
		p.free[k] = p.free[k][:l-1]
		return s[:n]
	}
	return make([]*index.Block, n, 1<<k)
}

// put takes back s (which get returned), unless its class is full.
func (p *blockSlices) put(s []*index.Block) {
	c := cap(s)
	if c == 0 || c > maxPooledBlocks || c&(c-1) != 0 {
		return
	}
	k := bits.Len(uint(c - 1))
	if len(p.free[k]) >= maxPooledPerClass {
		return
	}
	clear(s)
	p.free[k] = append(p.free[k], s[:0])
}
