package evict

// chainRun recognises a chain being inserted: the Manager seals a publish's
// fresh blocks one after another in batch order (Depth increasing), and
// nothing else reaches the policy in between. The newest block of the run is
// held apart as the chain's tail, to be evicted first: on the Mooncake
// conversation trace the last block of a published chain is reused 0.8% of
// the time against 24% for the others (it is the prompt's partial last
// block, whose hash changes when the conversation grows), and evicting a
// chain's tail never strands the blocks before it, while evicting its head
// makes every block after it useless.
//
// Every policy call other than Insert ends the run (reset), and so does a
// pin or unpin its owner keeps from the policy (EndRun): a lookup between
// two publishes separates their chains whether or not the policy hears of
// it.
type chainRun struct {
	last   *Node // the previous call's Insert, while the run lasts
	placed *Node // the run's block most recently moved out of the tail list
}

// next starts or continues a run with n and returns the block n displaces as
// the chain's tail (nil when n starts a new run).
func (c *chainRun) next(n *Node) *Node {
	prev := c.last
	c.last = n
	if prev == nil || n.Depth <= prev.Depth {
		c.placed = nil
		return nil
	}
	return prev
}

// place links n, the run's displaced tail, into q: on the old side of the
// block placed before it when that one is still on q, so that a chain
// queues head newest and leaves tail first; else at q's front.
func (c *chainRun) place(q *list, n *Node) {
	if p := c.placed; p != nil && p.queue == q.id {
		q.linkBehind(n, p)
	} else {
		q.pushFront(n)
	}
	c.placed = n
}

func (c *chainRun) reset() { c.last, c.placed = nil, nil }
