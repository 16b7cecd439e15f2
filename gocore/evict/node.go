package evict

// maxFreq caps a node's access counter at 2 bits (S3-FIFO's; slru counts
// to it as well).
const maxFreq = 3

// Node lifecycle checks shared by every policy. Misuse is a bug in the
// owner (the Index or the simulator), not bad input, so it panics like
// gocore/index does.

// admit marks n held by a policy; it must be fresh.
func admit(n *Node) {
	if n.held {
		panic("evict: Insert of a node a policy already holds")
	}
	n.held = true
	n.pinned = false
	n.freq, n.flag, n.home, n.queue = 0, 0, 0, 0
	n.prev, n.next = nil, nil
}

// release clears n's policy state after Remove, so the block's node may be
// inserted again (into this or another policy).
func release(n *Node) {
	n.held, n.pinned = false, false
	n.freq, n.flag, n.home, n.queue = 0, 0, 0, 0
	n.prev, n.next = nil, nil
}

func mustHold(n *Node, op string) {
	if !n.held {
		panic("evict: " + op + " of a node no policy holds")
	}
}

func mustPinned(n *Node) {
	if !n.held || !n.pinned {
		panic("evict: Unpin of a node that is not pinned")
	}
}
