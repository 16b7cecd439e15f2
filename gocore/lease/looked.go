package lease

import "sync/atomic"

// LookupBlocks counts the blocks Fetch looked up, per tier and result,
// since start. RAM: the chain's resident prefix is a hit, the rest of the
// chain a miss (every Fetch, whatever its Tail). SSD: only lookups that
// consult the SSD tier (a Tail other than SkipTail, an SSD tier, a RAM
// miss): the blocks whose read the lookup started are hits, the rest of
// the RAM misses are misses (not on SSD, past a prefetch run, or skipped
// for the warm-up budget); a lookup whose tail is already being read by
// an earlier one counts no SSD blocks. A ticket resolved again after its
// reads looks up again and counts again.
type LookupBlocks struct {
	RAMHit, RAMMiss, SSDHit, SSDMiss uint64
}

// lookupCounts is written by the dispatcher goroutine and read by Stats
// from any goroutine: each counter is its own atomic, so a snapshot may
// mix two lookups' figures, never tear one counter.
type lookupCounts struct {
	ramHit, ramMiss, ssdHit, ssdMiss atomic.Uint64
}

func (l *lookupCounts) ram(hit, miss int) {
	l.ramHit.Add(uint64(hit))
	if miss > 0 {
		l.ramMiss.Add(uint64(miss))
	}
}

func (l *lookupCounts) ssd(hit, miss int) {
	if hit > 0 {
		l.ssdHit.Add(uint64(hit))
	}
	if miss > 0 {
		l.ssdMiss.Add(uint64(miss))
	}
}

// LookupBlocks returns the lookup counters; safe from any goroutine.
func (b *Book[W]) LookupBlocks() LookupBlocks {
	l := &b.looked
	return LookupBlocks{RAMHit: l.ramHit.Load(), RAMMiss: l.ramMiss.Load(), SSDHit: l.ssdHit.Load(), SSDMiss: l.ssdMiss.Load()}
}
