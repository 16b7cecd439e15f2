package tier

import (
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// Per-domain quotas (the Manager's tenant domains, docs/security.md
// "Tenants"): the RAM tier bytes a domain's blocks occupy (sealed and
// publishing: their whole chunks, index.Index.DomainChunks × the arena's
// chunk bytes, whatever their Block.Bytes) stay at or below its RAM
// quota, and the SSD slots its blocks occupy (ssd.Store.ClassBytes, class
// = domain: HeaderBytes + SlotBytes each) at or below its SSD quota.
//
//   - RAM: a publish (Place) that would take its domain over the quota
//     first evicts the domain's oldest unpinned blocks (by insertion,
//     index.Index.EvictDomain), through the same path as MakeRoom's
//     victims (demoted to SSD, advertisements withdrawn, the index's
//     Observer told); when the domain's unpinned blocks are too few, the
//     publish is refused whole (Place's ok false, nothing evicted) and
//     counted in DomainStats.RAMRefused. SSD reads and peer fetches for a
//     domain take as much of their run's head as fits the same way; the
//     rest is a miss, not counted.
//   - SSD: a demotion that would take its domain over the quota first
//     deletes the domain's oldest SSD blocks (ssd.Store.MakeClassRoom);
//     when those are too few (reads pin them) it is not admitted, counted
//     in SSDStats.NotAdmitted and DomainStats.SSDRefused.
//
// Blocks of index.NoDomain (no tenants) are counted against nothing and
// cost no lookup: the quota check of a domain without a quota is one
// bounds check and one load.

// domainQuota is one domain's quotas (0: none) and refusals.
type domainQuota struct {
	ram, ssd               uint64
	ramRefused, ssdRefused uint64
}

// SetQuota sets domain d's RAM and SSD quotas in bytes (0: none, bounded
// only by the tier). Dispatcher goroutine only; set before blocks of d
// are placed (blocks already over a new quota stay until evicted).
func (t *Tiers) SetQuota(d index.Domain, ramBytes, ssdBytes uint64) {
	if d == index.NoDomain {
		return
	}
	if int(d) >= len(t.quotas) {
		t.quotas = append(t.quotas, make([]domainQuota, int(d)+1-len(t.quotas))...)
	}
	t.quotas[d].ram, t.quotas[d].ssd = ramBytes, ssdBytes
}

// ramQuota is d's RAM quota, 0 for none.
func (t *Tiers) ramQuota(d index.Domain) uint64 {
	if int(d) >= len(t.quotas) {
		return 0
	}
	return t.quotas[d].ram
}

// DomainStats are one domain's blocks in the tiers, its quotas and the
// refusals they caused.
type DomainStats struct {
	RAMBytes, SSDBytes uint64 // bytes its blocks occupy: RAM chunks, sealed and publishing; SSD slots, resident and being written
	RAMQuota, SSDQuota uint64 // 0: none
	RAMRefused         uint64 // publishes refused: the RAM quota, its unpinned blocks evicted, still did not fit
	SSDRefused         uint64 // demotions not admitted: the SSD quota, its unpinned SSD blocks deleted, still did not fit
}

// DomainStats returns d's figures. Dispatcher goroutine only (the SSD
// bytes take the store's lock).
func (t *Tiers) DomainStats(d index.Domain) DomainStats {
	st := DomainStats{RAMBytes: t.idx.DomainChunks(d) * t.arena.ChunkBytes()}
	if t.ssd != nil {
		st.SSDBytes = t.ssd.store.ClassBytes(ssd.Class(d))
	}
	if int(d) < len(t.quotas) {
		q := t.quotas[d]
		st.RAMQuota, st.SSDQuota, st.RAMRefused, st.SSDRefused = q.ram, q.ssd, q.ramRefused, q.ssdRefused
	}
	return st
}

// domainRoom makes room within d's RAM quota for chunks more RAM tier
// chunks of d's blocks, evicting d's oldest unpinned blocks (evictOne);
// false, with nothing evicted, when even evicting all of them would not
// do. The quota is in bytes and holds whole chunks: q / chunk bytes of
// them. A domain without a quota always has room.
func (t *Tiers) domainRoom(d index.Domain, chunks uint64) bool {
	q := t.ramQuota(d)
	if q == 0 {
		return true
	}
	q /= t.arena.ChunkBytes()
	have := t.idx.DomainChunks(d)
	if have+chunks <= q {
		return true
	}
	if chunks > q || !t.idx.DomainEvictable(d, have+chunks-q) {
		return false
	}
	for t.idx.DomainChunks(d)+chunks > q {
		t.evictOne(t.idx.EvictDomain(d))
	}
	return true
}

// ssdRoom makes room within blk's domain's SSD quota for blk
// (ssd.Store.MakeClassRoom); false, counted, when it does not fit.
func (t *Tiers) ssdRoom(blk *index.Block) bool {
	d := blk.DomainOf()
	if int(d) >= len(t.quotas) || t.quotas[d].ssd == 0 {
		return true
	}
	if t.ssd.store.MakeClassRoom(ssd.Class(d), t.quotas[d].ssd) {
		return true
	}
	t.quotas[d].ssdRefused++
	return false
}
