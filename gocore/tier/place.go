package tier

import "github.com/orbitkv/orbitkv/gocore/index"

// Place admits a publish batch of n entries, each a block of bytes over
// layers, entry i named by key(i): it makes room for the entries not yet
// resident (a key repeated in the batch needs one frame) and inserts them
// Publishing, in entry order. fresh[i] is entry i's new block, nil for an
// entry already resident (or publishing) or repeated; present counts
// those. ok is false, and nothing is inserted or evicted, when even
// evicting every unpinned block would not make room. The batch's resident
// blocks are pinned while room is made, so eviction cannot remove a block
// the batch counts as present. The new blocks count against domain d;
// when they would take d over its RAM quota, d's oldest unpinned blocks
// are evicted first, and when that would not do, ok is false (nothing
// inserted or evicted) and the refusal counted (quota.go). fresh reuses
// out's storage.
func (t *Tiers) Place(n int, key func(int) index.Key, bytes uint64, layers uint32, d index.Domain, out []*index.Block) (fresh []*index.Block, present int, ok bool) {
	var pinned []*index.Block
	need := 0
	for i := 0; i < n; i++ {
		k := key(i)
		if blk := t.idx.Lookup(k); blk != nil {
			t.idx.Pin(blk)
			pinned = append(pinned, blk)
		} else if !t.idx.Contains(k) {
			if _, dup := t.batch[k]; !dup {
				t.batch[k] = struct{}{}
				need++
			}
		}
	}
	clear(t.batch)
	defer func() {
		for _, blk := range pinned {
			t.idx.Unpin(blk)
		}
	}()
	fresh = out[:0]
	if need > 0 {
		chunks := uint64(t.arena.ChunksFor(bytes)) * uint64(need)
		if !t.canRoom(chunks) {
			return fresh, 0, false
		}
		if !t.domainRoom(d, chunks) {
			t.quotas[d].ramRefused++
			return fresh, 0, false
		}
		// Cannot fail: canRoom held, and domainRoom's evictions freed as
		// many chunks as they took from the evictable ones.
		t.MakeRoom(chunks)
	}
	for i := 0; i < n; i++ {
		k := key(i)
		if t.idx.Contains(k) { // resident, or a repeat within this batch
			fresh = append(fresh, nil)
			present++
			continue
		}
		fresh = append(fresh, t.Insert(k, bytes, layers, uint32(i), d))
	}
	return fresh, present, true
}
