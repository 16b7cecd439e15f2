package tier

import (
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
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

// verifyBatch is how many verified blocks a verifier hands the dispatcher
// at once (one Ring).
const verifyBatch = 256

// adoption is the verification of the blocks the RAM tier adopted from a
// predecessor (ram.Spec.Handed). The blocks enter the index Publishing
// (invisible, never evicted), in seal order, each in its domain; verifiers
// on GOMAXPROCS goroutines check each block's bytes against the checksum
// taken at its seal, in seal order, and Complete, on the dispatcher, seals
// the blocks that match (visible, advertised, announced on the KV event
// stream with their records) and discards the others. So the Manager
// serves from its first request, and a block is served only once its
// bytes were verified. Until then a query of it is a miss and a publish
// of it finds it present.
type adoption struct {
	blocks []ram.Adopted
	blks   []*index.Block // blocks[i]'s index block
	next   atomic.Int64   // the next block a verifier takes
	stop   chan struct{}
	wg     sync.WaitGroup
	ring   func()

	mu    sync.Mutex
	ready []verdict // verified, not yet applied (under mu)

	// dropped are the namespace filters of the operator's drops (Drop)
	// while the verification ran: a block they match is discarded,
	// whatever its verdict (dispatcher).
	dropped []func(abi.Namespace) bool

	left          int // blocks not yet applied (dispatcher)
	sealed, wrong int
	bytes         uint64
	start         time.Time
}

// verdict is one block's verification.
type verdict struct {
	i  int
	ok bool
}

// adopt puts the adopted blocks into the index and starts their
// verification (adoption).
func (t *Tiers) adopt(ring func()) {
	ad := t.arena.Adoption()
	if ad.Refused != nil {
		t.log.Warn("ram tier: the handed-over tier was refused; starting empty", slog.Any("err", ad.Refused))
		return
	}
	if ad.Took == 0 { // nothing was handed over
		return
	}
	t.log.Info("ram tier: adopted the blocks a predecessor sealed; verifying their checksums before serving each",
		slog.Int("blocks", ad.Count), slog.Uint64("bytes", ad.Bytes), slog.Int("dropped_torn", ad.Torn),
		slog.Int("dropped_corrupt", ad.Corrupt), slog.Int("dropped_duplicate", ad.Duplicate), slog.Duration("took", ad.Took))
	if len(ad.Blocks) == 0 {
		return
	}
	v := &adoption{blocks: ad.Blocks, blks: make([]*index.Block, len(ad.Blocks)), stop: make(chan struct{}), ring: ring,
		left: len(ad.Blocks), start: time.Now()}
	ad.Blocks = nil // the adoption holds them now
	for i, b := range v.blocks {
		k := index.Key{NS: b.NS, Hash: b.Hash}
		t.learnLayout(k.NS, b.Bytes, b.Layers)
		blk := t.idx.Insert(k, b.Bytes, b.Layers, 0, b.Chunks)
		t.idx.Assign(blk, index.Domain(b.Domain))
		v.blks[i] = blk
	}
	t.adopting = v
	for range runtime.GOMAXPROCS(0) {
		v.wg.Go(func() { v.verify(t.arena) })
	}
}

// verify checks blocks in seal order until none is left or stop closes,
// handing the verdicts over in batches.
func (v *adoption) verify(a *ram.Arena) {
	var out []verdict
	hand := func() {
		if len(out) == 0 {
			return
		}
		v.mu.Lock()
		v.ready = append(v.ready, out...)
		v.mu.Unlock()
		out = out[:0]
		if v.ring != nil {
			v.ring()
		}
	}
	defer hand()
	for {
		select {
		case <-v.stop:
			return
		default:
		}
		i := int(v.next.Add(1) - 1)
		if i >= len(v.blocks) {
			return
		}
		out = append(out, verdict{i, a.Verify(&v.blocks[i])})
		if len(out) == verifyBatch {
			hand()
		}
	}
}

// completeAdoption applies the verdicts handed over (dispatcher
// goroutine): a block that matched is sealed and announced, one that did
// not is discarded. It reports how many it applied.
func (t *Tiers) completeAdoption() int {
	v := t.adopting
	if v == nil {
		return 0
	}
	v.mu.Lock()
	ready := v.ready
	v.ready = nil
	v.mu.Unlock()
	for _, r := range ready {
		blk, b := v.blks[r.i], &v.blocks[r.i]
		v.left--
		if !r.ok {
			v.wrong++
			t.Discard(blk)
			continue
		}
		if v.droppedByOperator(blk.Key.NS) {
			t.Discard(blk)
			continue
		}
		v.sealed++
		v.bytes += b.Bytes
		t.idx.Seal(blk)
		if t.adv != nil {
			t.adv.add(blk.Key, false)
		}
		if t.ev != nil {
			t.ev.Stored(kvevents.Key(blk.Key), eventDomain(blk.DomainOf()), kvevents.CPU, b.Record)
		}
		b.Record = nil
	}
	if v.left == 0 {
		t.log.Info("ram tier: verified the adopted blocks", slog.Int("serving", v.sealed), slog.Uint64("bytes", v.bytes),
			slog.Int("dropped_checksum", v.wrong), slog.Duration("took", time.Since(v.start)))
		t.adopted = AdoptedStats{Blocks: uint64(v.sealed), Bytes: v.bytes, DroppedChecksum: uint64(v.wrong), Took: time.Since(v.start)}
		v.wg.Wait()
		t.adopting = nil
	}
	return len(ready)
}

// droppedByOperator reports whether an operator's Drop during the
// verification matched ns.
func (v *adoption) droppedByOperator(ns abi.Namespace) bool {
	for _, m := range v.dropped {
		if m(ns) {
			return true
		}
	}
	return false
}

// stopAdoption stops the verifiers and waits for them (Close).
func (t *Tiers) stopAdoption() {
	if v := t.adopting; v != nil {
		close(v.stop)
		v.wg.Wait()
	}
}

// AdoptedStats is what the verification of an adopted tier did, once it
// ended (zero before, and without an adopted tier).
type AdoptedStats struct {
	Blocks, Bytes   uint64 // blocks verified and served, their bytes
	DroppedChecksum uint64 // blocks whose bytes did not match their seal checksum
	Took            time.Duration
}

// Adopted is the verification's outcome (dispatcher goroutine), and
// whether it is still running.
func (t *Tiers) Adopted() (st AdoptedStats, verifying bool) { return t.adopted, t.adopting != nil }
