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
// evictions (as 2Q's A1out) and chain tails first. See doc.go.
type slru struct {
	cfg                   slruConfig
	tail, prob, protected list
	resident              int
	ghost                 ghost
	run                   chainRun
}

// NewSLRU returns the prefix-aware segmented LRU. Blocks accessed twice
// are protected, up to 20% of the resident blocks; the ghost remembers as
// many keys evicted from probation as there are resident blocks.
// capacityBlocks (the cache's capacity in blocks, or <= 0 if unknown) only
// presizes the ghost: sizing by the resident count, which equals the
// capacity whenever eviction runs, measured the same hit ratios as sizing
// by the capacity and stays right when the owner knows its capacity in
// blocks only approximately.
func NewSLRU(capacityBlocks int) Policy {
	return newSLRU(slruConfig{protectedFrac: 0.20, ghostFrac: 1.0, protectAt: 2}, capacityBlocks)
}

func newSLRU(cfg slruConfig, capacityBlocks int) *slru {
	p := &slru{cfg: cfg, ghost: newGhost(capacityBlocks)}
	p.tail.init(qTail)
	p.prob.init(qProbation)
	p.protected.init(qProtected)
	return p
}

func (p *slru) Name() string { return NameSLRU }
func (p *slru) Len() int     { return p.resident }

func (p *slru) queue(id uint8) *list {
	switch id {
	case qProbation:
		return &p.prob
	case qProtected:
		return &p.protected
	default:
		return &p.tail
	}
}

func (p *slru) unlink(n *Node) {
	if n.queue != 0 {
		p.queue(n.queue).remove(n)
	}
}

func (p *slru) Insert(n *Node) {
	admit(n)
	p.resident++
	prev := p.run.next(n)
	if prev != nil && prev.queue == qTail { // n continues prev's chain: prev is no longer its tail
		p.tail.remove(prev)
		p.run.place(&p.prob, prev)
	}
	if p.ghost.take(n.Key) { // evicted from probation too early: it came back
		n.freq = p.cfg.protectAt - 1
		p.protected.pushFront(n)
		return
	}
	p.tail.pushFront(n)
}

// Pin takes n off its list (a pinned block is never a candidate) and
// counts the access.
func (p *slru) Pin(n *Node) {
	mustHold(n, "Pin")
	p.run.reset()
	p.unlink(n)
	n.pinned = true
	if n.freq < maxFreq {
		n.freq++
	}
}

// Unpin puts n at the most recent end of the protected segment once it has
// been accessed protectAt times, else of probation.
func (p *slru) Unpin(n *Node) {
	mustPinned(n)
	p.run.reset()
	n.pinned = false
	if n.freq >= p.cfg.protectAt {
		p.protected.pushFront(n)
	} else {
		p.prob.pushFront(n)
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
	for p.protected.len > limit {
		n := p.protected.back()
		p.protected.remove(n)
		n.freq = p.cfg.protectAt - 1
		p.prob.pushFront(n)
	}
	if n := p.tail.back(); n != nil {
		return n
	}
	if n := p.prob.back(); n != nil {
		return n
	}
	return p.protected.back()
}

// Remove drops n; a probation block is remembered in the ghost.
func (p *slru) Remove(n *Node) {
	mustHold(n, "Remove")
	p.run.reset()
	if n.queue == qProbation {
		p.ghost.add(n.Key, int(p.cfg.ghostFrac*float64(p.resident)))
	}
	p.unlink(n)
	release(n)
	p.resident--
}
