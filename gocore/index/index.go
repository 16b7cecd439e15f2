package index

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/evict"
)

// Key identifies a block: namespace then block hash.
type Key struct {
	NS   abi.Namespace
	Hash abi.BlockHash
}

// digest is a 64-bit mix of k for the policy's ghost lists.
func (k Key) digest() uint64 {
	le := binary.LittleEndian
	return le.Uint64(k.Hash[:8]) ^ le.Uint64(k.Hash[8:])*0x9e3779b97f4a7c15 ^ le.Uint64(k.NS[:8])
}

// State of a block.
type State uint8

// Block states.
const (
	Publishing State = iota + 1 // frames allocated, copy in flight: invisible
	Sealed                      // visible to lookups
)

// Block is one cached block: the record a query reads, exactly one cache
// line, and a pointer to the rest (blockCold), which only publish, removal
// (Evict, Remove) and chunk I/O (copies, frees, SSD demotion) read. Fields
// other than Chunks, Bytes and Layers are owned by the Index; Chunks' ids
// are the caller's, but the slice is never reassigned after Insert
// (nChunks mirrors its length in the hot line, so a query's evictable
// count never reads blockCold).
//
// A query reads and writes only this line (key, state, pins, deferred
// accesses, bytes, chunk count). Insert takes Blocks in order from slabs
// of slabBlocks 64-byte-aligned records (newSlab), so the blocks of a
// chain published in order lie in consecutive lines: Prefix reads such a
// chain by address (follow), one dense run of lines that the CPU's stream
// prefetchers fetch ahead, and goes to the table only where the run ends
// (cost per hash: BenchmarkPrefix, orbitkv-bench query).
type Block struct {
	Key    Key // a lookup reads Key and state
	state  State
	access uint8 // 0→1 pins the policy has not been shown, at most evict.MaxAccesses (Evict)
	shown  bool  // the policy holds the block as pinned (evict.Reveal showed it a pin)
	// meta: metaReplica (fetched from a peer by InsertReplica, not
	// produced here; it lives in the replica policy, whose victims go
	// first) | metaDomain (counted against a Domain, blockCold.domain,
	// while in the index: a pin of a block without it reads nothing of
	// the cold part) | the number of Blocks after this one in its slab
	// (metaRest, at most slabBlocks-1; 0 for a Block outside a slab).
	meta    uint8
	pins    int32
	Bytes   uint64 // block bytes (all layers)
	Layers  uint32 // layers the block spans: Bytes/Layers bytes each
	nChunks uint32 // len(Chunks), for the evictable count on the query path
	// *blockCold: the fields no query touches (Chunks, the policy's node);
	// nil only in a Block built outside Insert (tests).
	*blockCold
}

// blockCold is the part of a Block a query does not read: its RAM tier
// chunks (read by copies and frees) and the eviction policy's node (read
// by Seal, Evict, Remove and the last unpin of a block the policy saw
// pinned).
type blockCold struct {
	Chunks []uint32   // RAM tier chunk ids, in byte order
	node   evict.Node // the eviction policy's state; in the policy while sealed
	// domain is the Domain the block counts against (Assign), and
	// dprev/dnext its neighbours in that domain's FIFO; NoDomain and nil
	// for a block of none.
	// parked: in the domain's parked list, not its FIFO (domainBlocks).
	domain       Domain
	parked       bool
	dprev, dnext *Block
}

// Block.meta's fields.
const (
	metaReplica = 0x80 // the block is a replica (Replica)
	metaDomain  = 0x40 // the block counts against a Domain (Assign)
	metaRest    = 0x3f // Blocks after this one in its slab
)

// blockBytes is a Block's size: one cache line.
const blockBytes = 64

// A Block is exactly one cache line.
var (
	_ [unsafe.Sizeof(Block{}) - blockBytes]byte
	_ [blockBytes - unsafe.Sizeof(Block{})]byte
)

// slabBlocks is the number of Blocks in a slab: 63 lines and the padding
// that aligns them fill Go's 4 KiB size class exactly (paddedSlab).
const slabBlocks = 63

// metaRest holds slabBlocks-1.
var _ [metaRest - (slabBlocks - 1)]byte

// paddedSlab is a slab's allocation. Go puts an 8-byte header before each
// object over 512 bytes that holds pointers, at the start of its
// 4,096-byte-aligned slot (runtime/malloc.go, mallocgcSmallScanHeader),
// so the object starts 8 bytes past a line boundary; 56 bytes of padding
// put blocks[0] on the next one, and 8 + 56 + 63×64 = 4,096. newSlab checks
// the alignment rather than trusting this layout.
type paddedSlab struct {
	_      [blockBytes - 8]byte
	blocks [slabBlocks]Block
}

// slabsMisaligned is set once a slab came back with its blocks off a
// line boundary (not seen on Go 1.26: TestInsertTakesConsecutiveLinesOfASlab
// fails then); from then on Insert allocates each Block alone (64 bytes, a
// size class whose objects are 64-byte aligned) and Prefix finds every
// block through the table.
var slabsMisaligned atomic.Bool

// newSlab returns fresh zeroed Blocks for Insert to take in order: a
// slab's slabBlocks line-aligned Blocks, or one Block where slabs do not
// align (slabsMisaligned).
func newSlab() []Block {
	if !slabsMisaligned.Load() {
		s := new(paddedSlab)
		if uintptr(unsafe.Pointer(&s.blocks[0]))%blockBytes == 0 {
			return s.blocks[:]
		}
		slabsMisaligned.Store(true)
	}
	return make([]Block, 1)
}

// newBlock takes the next Block of the current slab (a new one when it
// is used up), its metaRest set to the Blocks after it in the slab.
//
// Memory: a slab stays allocated while any of its Blocks is referenced
// (the collector keeps a whole object alive through an interior pointer),
// and with it the blockCold of its removed Blocks. When blocks of a slab
// are evicted together, as the blocks of a chain published in order are
// under a recency policy, that costs nothing; at worst, one live block
// per slab, it keeps 4 KiB of slab and 62 removed blocks' cold parts and
// chunk lists (9.4 KiB per live block measured, against about 170 bytes
// for a block alone). So the Manager's scratch slices of blocks are
// cleared before reuse, not only truncated: a stale pointer to a removed
// block would hold its whole slab.
func (x *Index) newBlock() *Block {
	if len(x.slab) == 0 {
		x.slab = newSlab()
	}
	b := &x.slab[0]
	x.slab = x.slab[1:]
	b.meta = uint8(len(x.slab))
	return b
}

// State is the block's state.
func (b *Block) State() State { return b.state }

// Pins is the block's pin count.
func (b *Block) Pins() int32 { return b.pins }

// Replica reports whether b was fetched from a peer (InsertReplica) rather
// than produced on this node (published here, or read back from this
// node's SSD tier).
func (b *Block) Replica() bool { return b.meta&metaReplica != 0 }

// Index is the block map plus the eviction policies over its sealed
// blocks: pol over the blocks this node produced, rep (LRU) over replicas.
// Evict takes rep's victim while it has one: a replica is a copy of a
// block another node still advertises, so losing it costs a transfer,
// losing an own block may lose the cluster's only copy.
type Index struct {
	m         table
	pol       evict.Policy
	rep       evict.Policy
	slab      []Block       // the current slab's Blocks not yet taken (newBlock)
	byAddress atomic.Uint64 // blocks Prefix found by address (follow), since New; read by any goroutine
	replicas  int           // sealed replicas
	evictable uint64        // chunks of sealed unpinned blocks
	nEvict    int           // sealed unpinned blocks
	sealed    int
	pins      int64
	bytes     uint64 // bytes of sealed blocks
	obs       Observer
	doms      []domainBlocks // by Domain; [NoDomain] unused (domain.go)
	// domainSteps counts the blocks EvictDomain's walks visited, since New.
	domainSteps uint64
	// moved[r]: a pin transition of a block of the policy of replicas r
	// (policyOf) since that policy's last Insert; the next Seal ends its
	// chain run first (evict.EndRun), as the Pin or Unpin would have.
	moved [2]bool
}

// New returns an empty index that evicts with pol (gocore/evict).
func New(pol evict.Policy) *Index {
	return &Index{m: newTable(), pol: pol, rep: evict.NewLRU()}
}

// Policy is the index's eviction policy over the blocks this node
// produced (replicas have their own LRU, evicted first).
func (x *Index) Policy() evict.Policy { return x.pol }

// rIdx is 1 for a replica, 0 for a block this node produced: the index of
// b's policy in per-policy arrays.
func rIdx(b *Block) int {
	if b.Replica() {
		return 1
	}
	return 0
}

// policyOf is the policy holding b's node.
func (x *Index) policyOf(b *Block) evict.Policy {
	if b.Replica() {
		return x.rep
	}
	return x.pol
}

// Lookup returns the sealed block for k, or nil (absent or still publishing).
func (x *Index) Lookup(k Key) *Block {
	b := x.m.find(&k, x.m.tag(&k))
	if b == nil || b.state != Sealed {
		return nil
	}
	return b
}

// Contains reports whether any block (sealed or publishing) holds k.
func (x *Index) Contains(k Key) bool { return x.m.find(&k, x.m.tag(&k)) != nil }

// prefixGroup is how many keys Prefix looks up together: their slot loads
// are issued before any is needed, so up to this many cache misses overlap.
const prefixGroup = 16

// Prefix appends to out the sealed blocks of the chain of namespace ns
// whose block hashes are hashes (abi.HashSize bytes each, in chain order,
// as a descriptor carries them; a trailing partial hash is ignored), in
// order, up to the first that is absent or not sealed, and returns out.
//
// It is Lookup over a chain, in two ways that give the same blocks:
//
//   - By the table, in groups of prefixGroup keys, software-pipelined:
//     while a group's blocks are compared, the slots of the next group
//     are already on their way (prefetched), and each group's blocks are
//     prefetched as soon as its slots name them, so the two cache misses
//     of a hash (its slot, then its block) overlap with other hashes'.
//     Each group's prefetches are one call (prefetchN), and tags are
//     computed from the hash bytes in place, with no call per hash.
//   - By address (follow), after a table step whose blocks look laid out
//     in order (its last two adjacent, or a one-key step after a run):
//     the blocks after the last one found, in its slab, are compared with
//     the chain's next hashes directly, for as long as they match. A
//     chain published in order lies in consecutive lines of a slab
//     (newBlock), so most of its hashes cost one sequential line each, no
//     slot and no random miss.
//     A sealed block holding (ns, hash) is the one the table maps that key
//     to (a key has at most one block, and removal unseals it), so a match
//     by address is the table's answer. The pipelined groups then go on
//     from where the run ended, with what is left of the group already
//     prefetched; past it, after a run that reached its slab's end, the
//     next table step is one key, whose slot follow has prefetched (the
//     chain likely goes on in another slab).
//
// Cost per hash: BenchmarkPrefix (published in order),
// BenchmarkPrefixScattered (one block at a time in a shuffled order),
// BenchmarkPrefixShortRuns (runs of 1 to 8 blocks, shuffled),
// orbitkv-bench query (--scattered).
func (x *Index) Prefix(ns abi.Namespace, hashes []byte, out []*Block) []*Block {
	var tags [2][prefixGroup]uint64
	var cand [prefixGroup]*Block
	var addrs [prefixGroup + 1]uintptr // prefetch addresses: hints, never dereferenced
	le := binary.LittleEndian
	t := &x.m
	nsm := t.nsMix(&ns) // every key of the chain shares ns
	n := len(hashes) / abi.HashSize
	// fill tags the g keys at base into buffer buf and prefetches their
	// home slots.
	fill := func(buf, base, g int) {
		hb := hashes[base*abi.HashSize : (base+g)*abi.HashSize]
		for j := range g {
			h := hb[j*abi.HashSize : (j+1)*abi.HashSize]
			tag := t.tagIn(nsm, le.Uint64(h[:8]), le.Uint64(h[8:]))
			tags[buf][j] = tag
			addrs[j] = uintptr(unsafe.Pointer(&t.slots[tag&t.mask]))
		}
		prefetchN(&addrs[0], g)
	}
	// g: the keys at base whose tags are in tags[buf] (0: none yet).
	// single: the next step is one key, just after a followed run.
	base, buf, g, single := 0, 0, 0, false
	var byAddr uint64 // blocks found by address in this call
	for base < n {
		if g == 0 {
			g = min(prefixGroup, n-base)
			if single {
				g = 1
			}
			fill(buf, base, g)
		}
		h := &tags[buf]
		// Phase 1: each key's slot run, by tag only (prefetched by fill;
		// the loads of different keys are independent), and a prefetch
		// of the blocks they name.
		k := 0
		for j := range g {
			cand[j] = t.findTag(h[j])
			if cand[j] != nil {
				addrs[k] = uintptr(unsafe.Pointer(cand[j]))
				k++
			}
		}
		// Follow after this step only where the chain looks laid out in
		// order here: a one-key step (after a run that left its slab), or
		// a group whose last two blocks are adjacent lines. A chain whose
		// blocks lie apart then pays nothing for the address route. The
		// line after the group's last block is prefetched for follow (a
		// hint: past its slab's end it is never read).
		last := uintptr(unsafe.Pointer(cand[g-1]))
		tryFollow := last != 0 && (g == 1 || last == uintptr(unsafe.Pointer(cand[g-2]))+blockBytes)
		if tryFollow {
			addrs[k] = last + blockBytes
			k++
		}
		prefetchN(&addrs[0], k)
		// The next group's tags and slots while those blocks arrive.
		next := 0
		if !single && base+g < n {
			next = min(prefixGroup, n-base-g)
			fill(buf^1, base+g, next)
		}
		// Phase 2: each candidate's key and state; a full probe where the
		// tag matched another key (a 2^-64 event).
		hb := hashes[base*abi.HashSize : (base+g)*abi.HashSize]
		var b *Block
		for j := range g {
			b = cand[j]
			hash := abi.BlockHash(hb[j*abi.HashSize : (j+1)*abi.HashSize])
			if b != nil && (b.Key.Hash != hash || b.Key.NS != ns) {
				k := Key{NS: ns, Hash: hash}
				b = t.find(&k, h[j])
			}
			if b == nil || b.state != Sealed {
				x.countByAddress(byAddr)
				return out
			}
			out = append(out, b)
		}
		base += g
		var f int
		if tryFollow {
			out, f = x.follow(b, ns, nsm, hashes[base*abi.HashSize:n*abi.HashSize], out)
		}
		base += f
		byAddr += uint64(f)
		switch {
		case f < next:
			// The rest of the next group, whose tags and slots fill has
			// already computed and prefetched (all of it where f is 0).
			if f > 0 {
				copy(tags[buf^1][:next-f], tags[buf^1][f:next])
			}
			g, buf, single = next-f, buf^1, false
		case f > 0 && f == int(b.meta&metaRest):
			// The run left its slab: one key, whose slot follow has
			// prefetched (the chain likely goes on in another slab).
			g, single = 0, true
		default:
			g, single = 0, false
		}
	}
	x.countByAddress(byAddr)
	return out
}

// countByAddress adds n blocks found by address to the counter, once per
// Prefix call (one atomic add, not one per step).
func (x *Index) countByAddress(n uint64) {
	if n != 0 {
		x.byAddress.Add(n)
	}
}

// ByAddress returns how many blocks Prefix found by address since New
// (Stats.ByAddress). Unlike Stats, safe from any goroutine.
func (x *Index) ByAddress() uint64 { return x.byAddress.Load() }

// follow appends to out the blocks after b in its slab that are sealed
// and hold the block hashes hashes (abi.HashSize bytes each, the chain's
// next ones, whole hashes only) in namespace ns, in order, up to the first
// that does not, and returns out and how many it appended. Once the first
// matches it prefetches the table slot of the hash just past the slab's
// end, which the next table step of Prefix reads when the run goes on to
// another slab (a chain whose blocks lie apart pays neither the tag nor
// the prefetch). nsm is ns's t.nsMix.
func (x *Index) follow(b *Block, ns abi.Namespace, nsm uint64, hashes []byte, out []*Block) ([]*Block, int) {
	left := len(hashes) / abi.HashSize
	rest := min(int(b.meta&metaRest), left)
	if rest == 0 {
		return out, 0
	}
	p := unsafe.Pointer(b)
	for j := range rest {
		// Within b's slab: b has metaRest ≥ rest Blocks after it.
		nb := (*Block)(unsafe.Add(p, (j+1)*blockBytes))
		if nb.state != Sealed || nb.Key.Hash != abi.BlockHash(hashes[j*abi.HashSize:(j+1)*abi.HashSize]) || nb.Key.NS != ns {
			return out, j
		}
		out = append(out, nb)
		if j == 0 && rest < left {
			// A run: where it leaves the slab, the table takes over.
			h := hashes[rest*abi.HashSize : (rest+1)*abi.HashSize]
			le := binary.LittleEndian
			t := &x.m
			tag := t.tagIn(nsm, le.Uint64(h[:8]), le.Uint64(h[8:]))
			addr := uintptr(unsafe.Pointer(&t.slots[tag&t.mask]))
			prefetchN(&addr, 1)
		}
	}
	return out, rest
}

// Insert adds a Publishing block for k of bytes over layers; depth is its
// position within the publish batch that stores it (0 = first), which a
// prefix-aware policy uses (evict.Node.Depth). It panics if k is present
// (the caller checks Contains first).
func (x *Index) Insert(k Key, bytes uint64, layers uint32, depth uint32, chunks []uint32) *Block {
	if x.Contains(k) {
		panic("index: Insert of a present key")
	}
	b := x.newBlock()
	b.Key, b.Bytes, b.Layers, b.nChunks, b.state = k, bytes, layers, uint32(len(chunks)), Publishing
	b.blockCold = &blockCold{Chunks: chunks, node: evict.Node{Key: k.digest(), Depth: depth, Owner: b}}
	x.m.put(b)
	return b
}

// InsertReplica is Insert for a block fetched from a peer: once sealed it
// is evicted before any block this node produced (see Index).
func (x *Index) InsertReplica(k Key, bytes uint64, layers uint32, depth uint32, chunks []uint32) *Block {
	b := x.Insert(k, bytes, layers, depth, chunks)
	b.meta |= metaReplica
	return b
}

// Seal makes a Publishing block visible and hands it to the policy.
func (x *Index) Seal(b *Block) {
	if b.state != Publishing {
		panic("index: Seal of a block that is not publishing")
	}
	b.state = Sealed
	if x.obs != nil {
		x.obs.Sealed(b.Key)
	}
	x.sealed++
	x.bytes += b.Bytes
	if b.Replica() {
		x.replicas++
	}
	pol := x.policyOf(b)
	if r := rIdx(b); x.moved[r] {
		evict.EndRun(pol)
		x.moved[r] = false
	}
	pol.Insert(&b.node)
	x.evictable += uint64(b.nChunks)
	x.nEvict++
	if b.pins > 0 { // pinned while publishing (not done today): keep it so
		pol.Pin(&b.node)
		b.shown = true
		x.evictable -= uint64(b.nChunks)
		x.nEvict--
	} else if b.meta&metaDomain != 0 {
		x.domainMoved(b, true)
	}
}

// Abort removes a Publishing block whose copy failed or whose publisher went
// away; the caller releases its chunks.
func (x *Index) Abort(b *Block) {
	if b.state != Publishing {
		panic("index: Abort of a block that is not publishing")
	}
	x.m.del(b)
	x.unassign(b)
	b.state = 0
}

// Pin keeps b from eviction (a lease or a copy reads it). For the policy
// the first pin is an access, counted in b and shown to the policy only
// when the policy proposes b for eviction (see Evict): a query touches no
// policy state and no other block.
func (x *Index) Pin(b *Block) {
	var moved [2]int
	var chunks uint64
	if x.pinOne(b) {
		moved[rIdx(b)] = 1
		chunks = uint64(b.nChunks)
	}
	x.settle(1, moved, -chunks)
}

// PinAll pins each block of bs, in order: Pin over a lease's blocks, with
// the index's totals updated once for the whole slice.
func (x *Index) PinAll(bs []*Block) { x.pinEach(bs, true) }

// Unpin drops one pin; the last one makes a sealed block evictable again.
func (x *Index) Unpin(b *Block) {
	var moved [2]int
	var chunks uint64
	if x.unpinOne(b) {
		moved[rIdx(b)] = 1
		chunks = uint64(b.nChunks)
	}
	x.settle(-1, moved, chunks)
}

// UnpinAll drops one pin of each block of bs, in order: Unpin over a
// lease's blocks, with the index's totals updated once for the whole
// slice. It panics, as Unpin does, at a block with no pin (a broken
// invariant that ends the Manager; the totals are then not updated).
func (x *Index) UnpinAll(bs []*Block) { x.pinEach(bs, false) }

// pinEach is PinAll (pin) or UnpinAll (!pin): the per-block step over bs,
// a group of blocks prefetched ahead, then one settle.
func (x *Index) pinEach(bs []*Block, pin bool) {
	var moved [2]int // blocks of each policy (rIdx) that changed sets
	var chunks uint64
	prefetchAhead(bs, 0)
	for i, b := range bs {
		if i%prefixGroup == 0 {
			prefetchAhead(bs, i+prefixGroup)
		}
		var changed bool
		if pin {
			changed = x.pinOne(b)
		} else {
			changed = x.unpinOne(b)
		}
		if changed {
			moved[rIdx(b)]++
			chunks += uint64(b.nChunks)
		}
	}
	if pin {
		x.settle(int64(len(bs)), moved, -chunks)
	} else {
		x.settle(-int64(len(bs)), moved, chunks)
	}
}

// pinOne adds a pin to b and reports whether it was the first pin of a
// sealed block, which b's access counter records (Evict shows it to the
// policy) and which takes b out of the evictable set: the caller counts it
// in settle.
func (x *Index) pinOne(b *Block) bool {
	b.pins++
	if b.pins == 1 && b.state == Sealed {
		evict.Access(&b.access)
		if b.meta&metaDomain != 0 {
			x.domainMoved(b, false)
		}
		return true
	}
	return false
}

// unpinOne drops a pin of b and reports whether it was the last pin of a
// sealed block, which makes b evictable again (the caller counts it in
// settle); a policy that was shown b pinned (evict.Reveal) is told now. It
// panics when b has no pin.
func (x *Index) unpinOne(b *Block) bool {
	if b.pins <= 0 {
		panic("index: Unpin of an unpinned block")
	}
	b.pins--
	if b.pins == 0 && b.state == Sealed {
		if b.shown {
			b.shown = false
			x.policyOf(b).Unpin(&b.node)
		}
		if b.meta&metaDomain != 0 {
			x.domainMoved(b, true)
		}
		return true
	}
	return false
}

// settle applies pin changes to the totals: dPins pins, moved[r] blocks of
// policy r (rIdx) that entered (pins) or left (unpins) the unevictable set,
// and dChunks, their chunks, signed by direction in two's complement (−c to
// take c away). A transition marks its policy's chain run as ended for the
// next Seal (moved).
func (x *Index) settle(dPins int64, moved [2]int, dChunks uint64) {
	n := moved[0] + moved[1]
	if dPins > 0 {
		n = -n
	}
	x.pins += dPins
	x.evictable += dChunks
	x.nEvict += n
	x.moved[0] = x.moved[0] || moved[0] > 0
	x.moved[1] = x.moved[1] || moved[1] > 0
}

// prefetchAhead prefetches the first lines of blocks bs[i:i+prefixGroup]
// (fewer at the end): PinAll and UnpinAll prefetch the first group, then
// each next group as they start one, since a long lease's blocks have left
// the caches since its lookup.
func prefetchAhead(bs []*Block, i int) {
	if i < len(bs) {
		// A *Block is one machine word: the slice's elements are the
		// addresses themselves.
		prefetchN((*uintptr)(unsafe.Pointer(&bs[i])), min(prefixGroup, len(bs)-i))
	}
}

// EvictableChunks is the number of chunks eviction could free.
func (x *Index) EvictableChunks() uint64 { return x.evictable }

// Evict removes the block the policy chooses among the unpinned sealed ones
// and returns it (the caller releases its chunks), or nil if none: the
// replica LRU's victim while there is one, else the policy's. Accesses and
// pins reach the policies lazily (evict.Reveal): a proposed victim that
// was accessed since its policy last saw it, or is pinned, is shown that,
// and the policies propose again.
func (x *Index) Evict() *Block {
	n, err := evict.NextVictim(x.rep, deferredOf)
	if err == nil && n == nil {
		n, err = evict.NextVictim(x.pol, deferredOf)
	}
	if err != nil {
		panic("index: " + err.Error())
	}
	if n == nil {
		return nil
	}
	b := n.Owner.(*Block)
	if b.state != Sealed {
		panic("index: the eviction policy chose an unsealed block")
	}
	x.unlink(b)
	return b
}

// deferredOf is evict.NextVictim's view of a block.
func deferredOf(n *evict.Node) (int32, *uint8, *bool) {
	b := n.Owner.(*Block)
	return b.pins, &b.access, &b.shown
}

// Stats are the index counters.
type Stats struct {
	Blocks    int    // sealed blocks
	Replicas  int    // sealed blocks fetched from peers (among Blocks)
	Bytes     uint64 // bytes of sealed blocks
	Pins      int64  // pins over all blocks
	Evictable int    // sealed unpinned blocks
	Entries   int    // sealed + publishing
	// ByAddress counts the blocks Prefix found by address (a slab-mate
	// of the block before it in the chain) rather than through the
	// table, since New: how much of the lookups the slab layout serves.
	ByAddress uint64
}

// Stats returns the counters.
func (x *Index) Stats() Stats {
	return Stats{Blocks: x.sealed, Replicas: x.replicas, Bytes: x.bytes, Pins: x.pins, Evictable: x.nEvict, Entries: x.m.n, ByAddress: x.byAddress.Load()}
}
