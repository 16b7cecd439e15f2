package tier

import (
	"encoding/binary"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
)

// BenchmarkPlace publishes batches of 16 new one-chunk blocks (Place, then
// Seal) into a full RAM tier of 4096 blocks, so every batch evicts 16:
// without tenants (index.NoDomain), as a tenant's domain without a
// quota (the blocks are counted and listed per domain), and as a domain
// with a RAM quota of 1024 blocks (its own oldest blocks are evicted).
// Compare the three within one run.
func BenchmarkPlace(b *testing.B) {
	const (
		blocks = 4096
		batch  = 16
	)
	for _, bc := range []struct {
		name  string
		d     index.Domain
		quota uint64
	}{
		{"tenants=none", index.NoDomain, 0},
		{"tenants=2/quota=none", 1, 0},
		{"tenants=2/quota=ram", 1, 1024 * pChunk},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ts, err := New(Spec{RAM: ram.Spec{CapacityBytes: blocks * pChunk, ChunkBytes: pChunk}, Ring: func() {}})
			if err != nil {
				b.Fatal(err)
			}
			defer ts.Close()
			ts.SetQuota(1, bc.quota, 0)
			ts.SetQuota(2, 0, 0)
			ns := abi.Namespace{0xbe}
			var n uint64
			key := func(i int) index.Key {
				var h abi.BlockHash
				binary.LittleEndian.PutUint64(h[:], n+uint64(i))
				return index.Key{NS: ns, Hash: h}
			}
			out := make([]*index.Block, 0, batch)
			place := func() {
				fresh, _, ok := ts.Place(batch, key, pChunk, 1, bc.d, out[:0])
				if !ok {
					b.Fatal("Place refused")
				}
				for _, blk := range fresh {
					ts.Seal(blk)
				}
				clear(fresh)
				n += batch
			}
			for range blocks / batch { // fill the tier
				place()
			}
			b.SetBytes(batch * pChunk)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				place()
			}
		})
	}
}
