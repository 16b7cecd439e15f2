package evict

// chainQueues is the core the prefix-aware policies (slru, s3fifo) share:
//   - tail: the chain tails, the list Victim takes first;
//   - entry: where a chain's blocks go once the next block of their chain
//     arrives (s3fifo's small queue, slru's probation);
//   - upper: blocks that earned a place (s3fifo's main queue, slru's
//     protected segment); a block whose key is in the ghost goes there
//     directly;
//   - ghost: keys of blocks evicted from entry, ghostFrac of the resident
//     blocks;
//   - run: the chain being inserted. Every call other than Insert ends it.
//
// A policy embeds it and decides what moves between entry and upper.
type chainQueues struct {
	tail, entry, upper list
	resident           int
	ghost              ghost
	ghostFrac          float64
	run                chainRun
}

// init names the three lists (ids for Node.queue) and presizes the ghost
// for capacityBlocks (<= 0: unknown).
func (c *chainQueues) init(tailID, entryID, upperID uint8, ghostFrac float64, capacityBlocks int) {
	c.tail.init(tailID)
	c.entry.init(entryID)
	c.upper.init(upperID)
	c.ghostFrac = ghostFrac
	c.ghost = newGhost(capacityBlocks)
}

// Len is the number of resident blocks, pinned or not.
func (c *chainQueues) Len() int { return c.resident }

// list returns the list whose id is id.
func (c *chainQueues) list(id uint8) *list {
	switch id {
	case c.entry.id:
		return &c.entry
	case c.upper.id:
		return &c.upper
	default:
		return &c.tail
	}
}

// unlink takes n off the list it is on, if any.
func (c *chainQueues) unlink(n *Node) {
	if n.queue != 0 {
		c.list(n.queue).remove(n)
	}
}

// insert admits n. The block n continues as its chain's tail (if it is
// still in the tail list) moves to entry. It reports whether n's key was in
// the ghost: n was evicted from entry too early and came back, and the
// caller links it (into upper); otherwise n waits in the tail list.
func (c *chainQueues) insert(n *Node) (returned bool) {
	admit(n)
	c.resident++
	prev := c.run.next(n)
	if prev != nil && prev.queue == c.tail.id { // n continues prev's chain: prev is no longer its tail
		c.tail.remove(prev)
		c.run.place(&c.entry, prev)
	}
	if c.ghost.take(n.Key) {
		return true
	}
	c.tail.pushFront(n)
	return false
}

// pin marks n pinned and counts the access (up to maxFreq); it leaves n's
// list to the caller.
func (c *chainQueues) pin(n *Node) {
	mustHold(n, "Pin")
	c.run.reset()
	n.pinned = true
	if n.freq < maxFreq {
		n.freq++
	}
}

// unpin clears n's pin; the caller links n where it belongs.
func (c *chainQueues) unpin(n *Node) {
	mustPinned(n)
	c.run.reset()
	n.pinned = false
}

// remove unlinks and releases n, remembering its key in the ghost when
// remember is set.
func (c *chainQueues) remove(n *Node, remember bool) {
	mustHold(n, "Remove")
	c.run.reset()
	c.unlink(n)
	if remember {
		c.ghost.add(n.Key, int(c.ghostFrac*float64(c.resident)))
	}
	release(n)
	c.resident--
}
