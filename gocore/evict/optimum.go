package evict

import (
	"container/heap"
	"math"
)

// never is the next-use position of a block that is not used again.
const never = math.MaxInt64

// Optimum is the offline optimum the policies are measured against: Belady's
// MIN with bypass under the prefix-hit rule, replaying reqs at capacityBlocks
// blocks, and returns the blocks that hit and all blocks.
//
// Blocks are accessed in trace order, in order within a request, each
// access at its own position in that sequence. A request hits its longest
// resident prefix. Then every block of the request that is not resident is
// a candidate: it is stored if a slot is free, else it replaces the
// resident block whose next use is furthest in the future if its own next
// use comes sooner, else it is not stored (bypass). A "use" counts only
// where it could hit at all: an access whose request has an earlier block
// that no earlier request accessed can never hit, so it is not a use
// (blocks with no use left are not stored, and evicted first if resident). Within a request the earlier block is used first, so the head of
// a chain outlives its tail. Pins do not constrain the optimum, and it may
// bypass: it is at least as free as any policy.
//
// This is Belady with prefix-aware next uses, not a proven optimum under
// the prefix-hit rule (which is harder: keeping a block can be worthless
// when its predecessor is evicted), but no policy here beats it on the
// traces the tests use. O(N log C) time for N accesses; reqs is only read.
func Optimum(reqs [][]uint64, capacityBlocks int) (hits, blocks uint64) {
	return belady(reqs, capacityBlocks, nextUses(reqs))
}

// belady replays reqs with Belady's choice by next[pos], the next use of
// the block accessed at each position.
func belady(reqs [][]uint64, capacityBlocks int, next []int) (hits, blocks uint64) {
	if capacityBlocks < 1 {
		for _, h := range reqs {
			blocks += uint64(len(h))
		}
		return 0, blocks
	}
	resident := make(map[uint64]int, capacityBlocks) // id → its next use
	var h useHeap
	pos := 0
	for _, ids := range reqs {
		blocks += uint64(len(ids))
		k := 0
		for k < len(ids) {
			if _, ok := resident[ids[k]]; !ok {
				break
			}
			k++
		}
		hits += uint64(k)
		for i, id := range ids {
			nu := next[pos+i]
			if _, ok := resident[id]; ok {
				resident[id] = nu
				heap.Push(&h, use{nu, id})
				continue
			}
			if nu == never {
				continue
			}
			if len(resident) >= capacityBlocks {
				top := h.top(resident)
				if top.next <= nu {
					continue // bypass: every resident block is used sooner
				}
				heap.Pop(&h)
				delete(resident, top.id)
			}
			resident[id] = nu
			heap.Push(&h, use{nu, id})
		}
		pos += len(ids)
		if len(h) > 4*capacityBlocks+64 {
			h.compact(resident)
		}
	}
	return hits, blocks
}

// nextUses returns, for each access position, the position of the next use
// of the same block (never if none): the next access in a later request
// whose blocks before it were all seen in earlier requests.
func nextUses(reqs [][]uint64) []int {
	n := 0
	for _, ids := range reqs {
		n += len(ids)
	}
	useful := make([]bool, n)
	seen := make(map[uint64]struct{})
	pos := 0
	for _, ids := range reqs {
		ok := true
		for i, id := range ids {
			_, s := seen[id]
			ok = ok && s
			useful[pos+i] = ok
		}
		for _, id := range ids {
			seen[id] = struct{}{}
		}
		pos += len(ids)
	}
	next := make([]int, n)
	later := make(map[uint64]int, len(seen)) // id → its nearest useful position after the one being filled
	end := n
	for r := len(reqs) - 1; r >= 0; r-- {
		ids := reqs[r]
		start := end - len(ids)
		// A use in the same request does not count (it is that request's
		// own access), so fill the whole request before recording its uses.
		for i, id := range ids {
			if p, ok := later[id]; ok {
				next[start+i] = p
			} else {
				next[start+i] = never
			}
		}
		for i := len(ids) - 1; i >= 0; i-- {
			if useful[start+i] {
				later[ids[i]] = start + i
			}
		}
		end = start
	}
	return next
}

// use is a heap entry: a resident block and a next use it had when pushed
// (stale once the block is re-accessed or evicted).
type use struct {
	next int
	id   uint64
}

// useHeap is a max-heap of uses by next use.
type useHeap []use

func (h useHeap) Len() int           { return len(h) }
func (h useHeap) Less(i, j int) bool { return h[i].next > h[j].next }
func (h useHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *useHeap) Push(x any)        { *h = append(*h, x.(use)) }
func (h *useHeap) Pop() any {
	old := *h
	u := old[len(old)-1]
	*h = old[:len(old)-1]
	return u
}

// top drops stale entries and returns the valid maximum (the heap holds one
// valid entry per resident block, so it is not empty while one is).
func (h *useHeap) top(resident map[uint64]int) use {
	for {
		u := (*h)[0]
		if nu, ok := resident[u.id]; ok && nu == u.next {
			return u
		}
		heap.Pop(h)
	}
}

// compact rebuilds the heap from the valid entries.
func (h *useHeap) compact(resident map[uint64]int) {
	*h = (*h)[:0]
	for id, nu := range resident {
		*h = append(*h, use{nu, id})
	}
	heap.Init(h)
}
