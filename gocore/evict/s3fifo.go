package evict

// NameS3FIFO is the --eviction name of the prefix-aware S3-FIFO policy.
const NameS3FIFO = "s3fifo"

// S3-FIFO list ids (Node.queue and Node.home). A chain's tail waits in its
// own list, part of the small queue, which Victim looks at first.
const (
	qSmall    = 1
	qMain     = 2
	qS3Tail   = 3
	flagGhost = 1 // Node.flag: Victim chose it from the small queue, Remove remembers its key
)

// s3fifoConfig holds the tunables; NewS3FIFO's are the paper's.
type s3fifoConfig struct {
	smallFrac float64 // small queue target, fraction of the resident blocks
	ghostFrac float64 // ghost entries, fraction of the resident blocks
	promoteAt uint8   // a small-queue block accessed this often moves to main
}

// s3fifo is S3-FIFO (Yang et al., SOSP'23): a small FIFO that new blocks
// enter, a main FIFO with 2-bit-frequency reinsertion, and a ghost FIFO of
// keys evicted from the small queue; plus chain tails first. See doc.go.
type s3fifo struct {
	cfg               s3fifoConfig
	tail, small, main list
	nSmall, nMain     int // blocks whose home is each queue (linked, or set aside while pinned)
	resident          int
	ghost             ghost
	run               chainRun
}

// NewS3FIFO returns the prefix-aware S3-FIFO policy with the paper's
// sizes: the small queue holds 10% of the resident blocks, the ghost
// remembers 90% as many keys. capacityBlocks (the cache's capacity in
// blocks, or <= 0 if unknown) only presizes the ghost: sizing the queues
// by the resident count, which equals the capacity whenever eviction runs,
// measured within 0.0005 of sizing them by the capacity and stays right
// when the owner knows its capacity in blocks only approximately.
func NewS3FIFO(capacityBlocks int) Policy {
	return newS3FIFO(s3fifoConfig{smallFrac: 0.10, ghostFrac: 0.90, promoteAt: 1}, capacityBlocks)
}

func newS3FIFO(cfg s3fifoConfig, capacityBlocks int) *s3fifo {
	p := &s3fifo{cfg: cfg, ghost: newGhost(capacityBlocks)}
	p.tail.init(qS3Tail)
	p.small.init(qSmall)
	p.main.init(qMain)
	return p
}

func (p *s3fifo) Name() string { return NameS3FIFO }
func (p *s3fifo) Len() int     { return p.resident }

func (p *s3fifo) queue(id uint8) *list {
	switch id {
	case qSmall:
		return &p.small
	case qMain:
		return &p.main
	default:
		return &p.tail
	}
}

func (p *s3fifo) Insert(n *Node) {
	admit(n)
	p.resident++
	prev := p.run.next(n)
	if prev != nil && prev.queue == qS3Tail { // n continues prev's chain: prev is no longer its tail
		p.tail.remove(prev)
		p.run.place(&p.small, prev)
	}
	if p.ghost.take(n.Key) { // evicted from small too early: it came back
		n.home = qMain
		p.nMain++
		p.main.pushFront(n)
		return
	}
	n.home = qSmall
	p.nSmall++
	p.tail.pushFront(n)
}

// Pin counts the access; the node stays where it is until Victim meets it.
func (p *s3fifo) Pin(n *Node) {
	mustHold(n, "Pin")
	p.run.reset()
	n.pinned = true
	if n.freq < maxFreq {
		n.freq++
	}
}

// Unpin returns a node Victim set aside to the new end of its home queue.
func (p *s3fifo) Unpin(n *Node) {
	mustPinned(n)
	p.run.reset()
	n.pinned = false
	if n.queue == 0 {
		p.queue(n.home).pushFront(n)
	}
}

// Victim walks the queues' old ends as S3-FIFO does: chain tails first,
// then the small queue while it holds at least its share, else main. A
// small-queue block that was accessed moves to main; a main block with
// frequency left is reinserted with one less; a pinned block met on the
// way is set aside (unlinked until Unpin, keeping its frequency, so no
// later call meets it again). Every step retires a pin, a promotion or a
// frequency unit, so a call is amortised O(1); it returns nil when nothing
// is evictable.
func (p *s3fifo) Victim() *Node {
	p.run.reset()
	target := max(1, int(p.cfg.smallFrac*float64(p.resident)))
	for {
		var q *list
		switch {
		case p.tail.len > 0:
			q = &p.tail
		case p.small.len > 0 && (p.nSmall >= target || p.main.len == 0):
			q = &p.small
		case p.main.len > 0:
			q = &p.main
		default:
			return nil
		}
		n := q.back()
		switch {
		case n.pinned:
			q.remove(n)
		case q != &p.main && n.freq >= p.cfg.promoteAt:
			q.remove(n)
			n.freq = 0
			n.home = qMain
			p.nSmall--
			p.nMain++
			p.main.pushFront(n)
		case q == &p.main && n.freq > 0:
			n.freq--
			p.main.moveToFront(n)
		default:
			if q == &p.main {
				n.flag &^= flagGhost
			} else {
				n.flag |= flagGhost
			}
			return n
		}
	}
}

// Remove drops n; a victim from the small queue is remembered in the ghost.
func (p *s3fifo) Remove(n *Node) {
	mustHold(n, "Remove")
	p.run.reset()
	if n.queue != 0 {
		p.queue(n.queue).remove(n)
	}
	if n.home == qSmall {
		p.nSmall--
	} else {
		p.nMain--
	}
	if n.flag&flagGhost != 0 {
		p.ghost.add(n.Key, int(p.cfg.ghostFrac*float64(p.resident)))
	}
	release(n)
	p.resident--
}
