package tier

import (
	"log/slog"

	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
)

// ledger records a block this node produced, just sealed, in the RAM
// tier's ledger (gocore/tier/ram, ledger.go) so that a successor Manager
// adopts it; rec is its record, else the one Spec.Records keeps for it.
func (t *Tiers) ledger(blk *index.Block, rec []byte) {
	if rec == nil && t.records != nil {
		rec = t.records(blk.Key)
	}
	t.arena.Seal(blk.Chunks, ram.BlockMeta{NS: blk.Key.NS, Hash: blk.Key.Hash, Bytes: blk.Bytes, Layers: blk.Layers,
		Domain: uint16(blk.DomainOf()), Record: rec})
}

// adopt puts the blocks the RAM tier adopted from a predecessor
// (ram.Spec.Handed) into the index, sealed, in their seal order (the
// oldest first in the eviction policy), each counted against its domain,
// advertised and announced on medium CPU with its record (they are this
// node's own blocks: the ledger keeps no replicas). A block of a domain
// this Manager has no quota for is counted against none.
func (t *Tiers) adopt() {
	ad := t.arena.Adoption()
	if ad.Refused != nil {
		t.log.Warn("ram tier: the handed-over tier was refused; starting empty", slog.Any("err", ad.Refused))
		return
	}
	for _, b := range ad.Blocks {
		k := index.Key{NS: b.NS, Hash: b.Hash}
		t.learnLayout(k.NS, b.Bytes, b.Layers)
		blk := t.idx.Insert(k, b.Bytes, b.Layers, 0, b.Chunks)
		t.idx.Assign(blk, index.Domain(b.Domain))
		t.idx.Seal(blk)
		if t.adv != nil {
			t.adv.add(k, false)
		}
		if t.ev != nil {
			t.ev.Stored(kvevents.Key(k), eventDomain(blk.DomainOf()), kvevents.CPU, b.Record)
		}
	}
	if n := len(ad.Blocks) + ad.Torn + ad.Corrupt + ad.Checksum + ad.Duplicate; n > 0 || ad.Took > 0 {
		t.log.Info("ram tier: adopted the blocks a predecessor sealed", slog.Int("blocks", len(ad.Blocks)),
			slog.Uint64("bytes", ad.Bytes), slog.Int("dropped_torn", ad.Torn), slog.Int("dropped_corrupt", ad.Corrupt),
			slog.Int("dropped_checksum", ad.Checksum), slog.Int("dropped_duplicate", ad.Duplicate),
			slog.Duration("verify", ad.Verify), slog.Duration("took", ad.Took))
	}
	ad.Blocks = nil // the index holds them now
}
