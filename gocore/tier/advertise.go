package tier

import (
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
)

// Advertiser hears which blocks this node holds as their producer, so
// that peers may fetch them (cluster.Advertiser is one: it forwards them
// to the catalog). Both calls run on the dispatcher goroutine and must
// not block (they queue); the slice is the tier's, valid during the call
// only.
//
// What is advertised: a block this node produced (published here, or read
// back from this node's SSD tier) once it is sealed in RAM, and withdrawn
// once it leaves RAM (evicted, even if demoted to SSD: only RAM blocks are
// served to peers; dropped by the operator). Replicas (blocks fetched from
// a peer) are never advertised: their producer advertises them, and a
// replica is the first block this node evicts, so advertising it would
// send peers to a copy likely gone; it is never demoted to SSD either.
type Advertiser interface {
	Advertise(ns abi.Namespace, hashes []abi.BlockHash)
	Withdraw(ns abi.Namespace, hashes []abi.BlockHash)
}

// advertBatch is how many advertisements or withdrawals queue before the
// tier hands them over; Complete and Drop hand over the rest.
const advertBatch = 256

// adverts queues the Advertiser's calls in order (an advertisement and a
// later withdrawal of the same block must reach it in that order).
type adverts struct {
	to      Advertiser
	pending []advert
	hashes  []abi.BlockHash // flush's scratch
}

type advert struct {
	k        index.Key
	withdraw bool
}

func (a *adverts) add(k index.Key, withdraw bool) {
	a.pending = append(a.pending, advert{k, withdraw})
	if len(a.pending) >= advertBatch {
		a.flush()
	}
}

// flush hands the queue over, one call per run of one namespace and kind.
func (a *adverts) flush() {
	for i := 0; i < len(a.pending); {
		j := i
		h := a.hashes[:0]
		for ; j < len(a.pending) && a.pending[j].k.NS == a.pending[i].k.NS && a.pending[j].withdraw == a.pending[i].withdraw; j++ {
			h = append(h, a.pending[j].k.Hash)
		}
		if a.pending[i].withdraw {
			a.to.Withdraw(a.pending[i].k.NS, h)
		} else {
			a.to.Advertise(a.pending[i].k.NS, h)
		}
		a.hashes = h[:0]
		i = j
	}
	a.pending = a.pending[:0]
}

// Seal makes a Publishing block this node produced visible, advertises
// it and announces it on medium CPU with the record already kept for it
// (read back from SSD), if any. Replicas are sealed by the peer tier
// itself.
func (t *Tiers) Seal(blk *index.Block) { t.SealRecord(blk, nil) }

// SealRecord is Seal of a block published with block record rec
// (abi.ParseRecord's form, checked; nil: none), which the event stream
// keeps with the block.
func (t *Tiers) SealRecord(blk *index.Block, rec []byte) {
	t.idx.Seal(blk)
	if blk.Replica() {
		return
	}
	t.ledger(blk, rec)
	if t.adv != nil {
		t.adv.add(blk.Key, false)
	}
	if t.ev != nil {
		t.ev.Stored(kvevents.Key(blk.Key), eventDomain(blk.DomainOf()), kvevents.CPU, rec)
	}
}

// Announces reports whether blocks are announced on an event stream:
// then a publish keeps its block records for SealRecord.
func (t *Tiers) Announces() bool { return t.ev != nil }

// eventDomain is the event stream's domain of index domain d
// (kvevents.NoStream for index.NoDomain).
func eventDomain(d index.Domain) int { return int(d) - 1 }

// gone withdraws the advertisement of a block that left RAM and
// announces its removal from medium CPU.
func (t *Tiers) gone(blk *index.Block) {
	if blk.Replica() {
		return
	}
	if t.adv != nil {
		t.adv.add(blk.Key, true)
	}
	if t.ev != nil {
		t.ev.Removed(kvevents.Key(blk.Key), kvevents.CPU)
	}
}

// FlushAdverts hands queued advertisements and withdrawals to the
// Advertiser (Complete does it too).
func (t *Tiers) FlushAdverts() {
	if t.adv != nil {
		t.adv.flush()
	}
}
