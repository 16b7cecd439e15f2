package evict

// NameLRU is the --eviction name of the least-recently-used policy.
const NameLRU = "lru"

const qLRU = 1 // lru's list id

// lru is plain least-recently-used: one list, most recent at the front.
// Insert and Unpin push to the front; Pin takes a node off the list (a
// pinned block is never a candidate); Victim is the back. With its owner
// deferring accesses (deferred.go) it orders blocks as CLOCK does.
type lru struct {
	l        list
	resident int
}

// NewLRU returns the least-recently-used policy.
func NewLRU() Policy {
	p := &lru{}
	p.l.init(qLRU)
	return p
}

func (p *lru) Name() string { return NameLRU }
func (p *lru) Len() int     { return p.resident }

func (p *lru) Insert(n *Node) {
	admit(n)
	p.resident++
	p.l.pushFront(n)
}

func (p *lru) Pin(n *Node) {
	mustHold(n, "Pin")
	if n.queue == qLRU {
		p.l.remove(n)
	}
	n.pinned = true
}

func (p *lru) Unpin(n *Node) {
	mustPinned(n)
	n.pinned = false
	p.l.pushFront(n)
}

func (p *lru) Victim() *Node { return p.l.back() }

func (p *lru) Remove(n *Node) {
	mustHold(n, "Remove")
	if n.queue == qLRU {
		p.l.remove(n)
	}
	release(n)
	p.resident--
}
