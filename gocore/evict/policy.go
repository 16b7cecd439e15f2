package evict

// Node is a policy's per-block state. It is embedded in the block it
// describes (gocore/index.Block) so no map lookup is needed on the hot
// path; Owner points back to that block. Fields other than Key, Depth and
// Owner belong to the policy that holds the node.
type Node struct {
	// Key is a 64-bit digest of the block key (namespace, hash), for
	// policies that remember evicted keys (ghost queues). Set before Insert.
	Key uint64
	// Depth is the block's position in the hash chain that published it:
	// the index of its entry in the Publish batch (0 = the batch's first
	// entry; a publish after a hit prefix starts at the first missed block,
	// so Depth counts from there, in the Manager and in Simulate alike).
	// Prefix-aware policies use it to recognise a chain being inserted:
	// within a chain the tail is worth less than the head, because a block
	// is useful only while every block before it is resident. Set before
	// Insert.
	Depth uint32
	// Owner is the block this node belongs to (returned through Victim).
	Owner any

	// Policy-private state.
	prev, next *Node
	queue      uint8 // which list the node is on (policy-defined), 0 = none
	home       uint8 // the queue a node set aside while pinned returns to
	freq       uint8
	pinned     bool
	held       bool // between Insert and Remove
	flag       uint8
}

// Policy decides which resident block to evict. A Policy is not safe for
// concurrent use: its owner (the dispatcher goroutine, or a simulation)
// serialises every call.
//
// The event sequence, identical in the Manager and in the simulator of
// `orbitkv-bench policy` so that the two agree:
//   - a block becomes resident: Insert (after its publish copy completed);
//   - a lookup that finds it, a publish that finds it present, a copy that
//     reads it (restore): an access and a pin, which the owner counts and
//     shows the policy later, when Victim proposes the block: Pin then
//     Unpin per access, and Pin alone for a block still pinned, whose
//     Unpin follows when its last pin goes (Reveal, deferred.go);
//   - when frames are needed: Victim, then Remove of that victim, repeated
//     until enough are free (Victim alone changes no membership, so two
//     calls without a Remove between them may return the same node);
//   - a block dropped for another reason: Remove.
//
// A block the policy holds pinned is never returned by Victim; the owner
// keeps docs/design.md §6 rule 4 by showing a proposed victim its pin (Reveal)
// instead of evicting it. Pins nest: a node pinned twice needs two
// Unpins; the owner counts pins and shows the policy a pin at most once at
// a time. Calling Insert for a node a policy holds, Pin/Remove for one it
// does not, or Unpin for one that is not pinned is a bug in the owner and
// panics. After Remove the
// node may be inserted again.
type Policy interface {
	// Name is the --eviction value that selects this policy.
	Name() string
	// Insert adds a newly resident, unpinned block.
	Insert(n *Node)
	// Pin records an access to a resident block and keeps it from
	// eviction until Unpin.
	Pin(n *Node)
	// Unpin makes a pinned block evictable again.
	Unpin(n *Node)
	// Victim returns the unpinned block the policy would evict next, or nil
	// when every resident block is pinned (or none is resident). It may
	// reorder its internal lists (second chances) but removes nothing: the
	// caller calls Remove on the returned node.
	Victim() *Node
	// Remove drops n (a victim being evicted, or a block discarded).
	Remove(n *Node)
	// Len is the number of resident blocks the policy holds (pinned or not).
	Len() int
}
