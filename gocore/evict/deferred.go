package evict

import "fmt"

// MaxAccesses is the most accesses an owner keeps for Reveal per block:
// the policies' access counters saturate there (maxFreq), so more would
// change nothing.
const MaxAccesses = maxFreq

// Deferred accesses. An owner (gocore/index, the simulator) need not call
// Pin and Unpin on every access: touching a block's Node on each lookup is
// a cache miss per block of a query (the node lives in the block record,
// and a list policy's Pin also touches its two list neighbours). Instead
// the owner may keep, beside each block, its pin count and the accesses
// (0→1 pin transitions, counted up to MaxAccesses by Access) that the
// policy has not seen, and show them when the policy proposes the block
// for eviction:
//
// NextVictim (a Victim that Reveals until it meets an untouched block),
// and, when a block's last pin is dropped while shown, call pol.Unpin; at
// every 0→1 and 1→0 pin transition it keeps from the policy, the owner
// calls EndRun before the next Insert.
// The policy then sees each access when the block reaches its eviction
// end rather than when it happened: its order is the order of the last
// time it saw the block (lazy promotion, as CLOCK is to LRU), and a
// pinned block leaves its lists only when Victim meets it (as S3-FIFO's
// Victim sets pinned blocks aside). Every Reveal retires the block's
// accesses and shows the policy its pin, after which the policy never
// proposes it again while it is pinned (lru and slru unlink it at once,
// s3fifo sets it aside the next time Victim meets it), so the loop ends.

// EndRun tells pol that its owner pinned or unpinned a block without
// telling it (a 0→1 or 1→0 transition): the chain of Inserts being
// recognised (chain.go) ends there, as it would at a Pin or Unpin. A
// policy without chain runs ignores it.
func EndRun(pol Policy) {
	if r, ok := pol.(interface{ endRun() }); ok {
		r.endRun()
	}
}

// endRun is EndRun for the prefix-aware policies.
func (c *chainQueues) endRun() { c.run.reset() }

// Access counts one access into a block's deferred accesses.
func Access(accesses *uint8) {
	if *accesses < MaxAccesses {
		*accesses++
	}
}

// NextVictim is the node pol evicts next once shown the deferred accesses
// and pins of the nodes it proposes on the way (Reveal), or nil when none
// is evictable: of returns the owner's pin count, deferred accesses and
// shown flag of a node. The caller removes the node. The error is a policy
// that proposed a node it holds pinned (a broken contract).
func NextVictim(pol Policy, of func(*Node) (pins int32, accesses *uint8, shown *bool)) (*Node, error) {
	for {
		n := pol.Victim()
		if n == nil {
			return nil, nil
		}
		pins, accesses, shown := of(n)
		if *shown {
			return nil, fmt.Errorf("%s chose a pinned block", pol.Name())
		}
		if pins == 0 && *accesses == 0 {
			return n, nil
		}
		*shown = Reveal(pol, n, pins, accesses)
	}
}

// Reveal shows pol the deferred accesses of n, which pol holds unpinned:
// each as a Pin and an Unpin, in order, except that when the block is
// pinned (pins > 0) the last stays pinned (with no access left, it is
// pinned as one more access). It zeroes *accesses and reports whether pol
// now holds n pinned; the owner then calls pol.Unpin when the block's last
// pin is dropped.
func Reveal(pol Policy, n *Node, pins int32, accesses *uint8) (pinned bool) {
	for *accesses > 0 {
		*accesses--
		pol.Pin(n)
		if *accesses == 0 && pins > 0 {
			return true
		}
		pol.Unpin(n)
	}
	if pins > 0 {
		pol.Pin(n)
		return true
	}
	return false
}
