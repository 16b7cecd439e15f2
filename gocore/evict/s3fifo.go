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
// enter (chainQueues.entry), a main FIFO with 2-bit-frequency reinsertion
// (chainQueues.upper), and a ghost FIFO of keys evicted from the small
// queue; plus chain tails first. See doc.go.
type s3fifo struct {
	chainQueues
	cfg           s3fifoConfig
	nSmall, nMain int // blocks whose home is each queue (linked, or set aside while pinned)
}

// NewS3FIFO returns the prefix-aware S3-FIFO policy with the paper's
// sizes: the small queue holds 10% of the resident blocks, the ghost
// remembers 90% as many keys. capacityBlocks (the cache's capacity in
// blocks, or <= 0 if unknown) only presizes the ghost: the fractions apply
// to the resident blocks (doc.go says why).
func NewS3FIFO(capacityBlocks int) Policy {
	return newS3FIFO(s3fifoConfig{smallFrac: 0.10, ghostFrac: 0.90, promoteAt: 1}, capacityBlocks)
}

func newS3FIFO(cfg s3fifoConfig, capacityBlocks int) *s3fifo {
	p := &s3fifo{cfg: cfg}
	p.init(qS3Tail, qSmall, qMain, cfg.ghostFrac, capacityBlocks)
	return p
}

func (p *s3fifo) Name() string { return NameS3FIFO }

func (p *s3fifo) Insert(n *Node) {
	if p.insert(n) {
		n.home = qMain
		p.nMain++
		p.upper.pushFront(n)
		return
	}
	n.home = qSmall
	p.nSmall++
}

// Pin counts the access; the node stays where it is until Victim meets it.
// A node Victim proposed and its owner kept (evict.Reveal showed it an
// access) is no longer a small-queue victim: a later Remove does not
// remember it in the ghost.
func (p *s3fifo) Pin(n *Node) {
	p.pin(n)
	n.flag &^= flagGhost
}

// Unpin returns a node Victim set aside to the new end of its home queue.
func (p *s3fifo) Unpin(n *Node) {
	p.unpin(n)
	if n.queue == 0 {
		p.list(n.home).pushFront(n)
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
		case p.entry.len > 0 && (p.nSmall >= target || p.upper.len == 0):
			q = &p.entry
		case p.upper.len > 0:
			q = &p.upper
		default:
			return nil
		}
		n := q.back()
		switch {
		case n.pinned:
			q.remove(n)
		case q != &p.upper && n.freq >= p.cfg.promoteAt:
			q.remove(n)
			n.freq = 0
			n.home = qMain
			p.nSmall--
			p.nMain++
			p.upper.pushFront(n)
		case q == &p.upper && n.freq > 0:
			n.freq--
			p.upper.moveToFront(n)
		default:
			if q == &p.upper {
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
	home := n.home
	p.remove(n, n.flag&flagGhost != 0) // panics unless a policy holds n
	if home == qSmall {
		p.nSmall--
	} else {
		p.nMain--
	}
}
