package evict

// NameSLRU is the --eviction name of the prefix-aware segmented LRU.
const NameSLRU = "slru"

// slru list ids (Node.queue).
const (
	qProbation = 1
	qProtected = 2
	qTail      = 3
)

// slruConfig holds the tunables; NewSLRU's are the measured best
// (bench/README.md, policy).
type slruConfig struct {
	protectedFrac float64 // protected segment cap, fraction of the resident blocks
	ghostFrac     float64 // ghost entries, fraction of the resident blocks
	protectAt     uint8   // accesses that move a block to the protected segment
}

// slru is a segmented LRU (Karedla et al., 1994) with a ghost of probation
// evictions (as 2Q's A1out) and chain tails first: probation is
// chainQueues.entry, the protected segment chainQueues.upper. See doc.go.
type slru struct {
	chainQueues
	cfg slruConfig
}

// NewSLRU returns the prefix-aware segmented LRU. Blocks accessed twice
// are protected, up to 20% of the resident blocks; the ghost remembers as
// many keys evicted from probation as there are resident blocks.
// capacityBlocks (the cache's capacity in blocks, or <= 0 if unknown) only
// presizes the ghost: the fractions apply to the resident blocks (doc.go
// says why).
func NewSLRU(capacityBlocks int) Policy {
	return newSLRU(slruConfig{protectedFrac: 0.20, ghostFrac: 1.0, protectAt: 2}, capacityBlocks)
}

func newSLRU(cfg slruConfig, capacityBlocks int) *slru {
	p := &slru{cfg: cfg}
	p.init(qTail, qProbation, qProtected, cfg.ghostFrac, capacityBlocks)
	return p
}

func (p *slru) Name() string { return NameSLRU }

func (p *slru) Insert(n *Node) {
	if p.insert(n) { // evicted from probation too early: it came back
		n.freq = p.cfg.protectAt - 1
		p.upper.pushFront(n)
	}
}

// Pin takes n off its list (a pinned block is never a candidate) and
// counts the access.
func (p *slru) Pin(n *Node) {
	p.pin(n)
	p.unlink(n)
}

// Unpin puts n at the most recent end of the protected segment once it has
// been accessed protectAt times, else of probation.
func (p *slru) Unpin(n *Node) {
	p.unpin(n)
	if n.freq >= p.cfg.protectAt {
		p.upper.pushFront(n)
	} else {
		p.entry.pushFront(n)
	}
}

// Victim first demotes protected blocks beyond the segment's cap to the
// most recent end of probation (keeping one access, so one more hit
// protects them again), then returns a chain tail, else the least recent
// probation block, else the least recent protected one. Pinned blocks are
// on no list. Amortised O(1): each demotion undoes one promotion.
func (p *slru) Victim() *Node {
	p.run.reset()
	limit := int(p.cfg.protectedFrac * float64(p.resident))
	for p.upper.len > limit {
		n := p.upper.back()
		p.upper.remove(n)
		n.freq = p.cfg.protectAt - 1
		p.entry.pushFront(n)
	}
	if n := p.tail.back(); n != nil {
		return n
	}
	if n := p.entry.back(); n != nil {
		return n
	}
	return p.upper.back()
}

// Remove drops n; a probation block is remembered in the ghost.
func (p *slru) Remove(n *Node) { p.remove(n, n.queue == qProbation) }
