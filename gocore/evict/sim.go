package evict

import (
	"errors"
	"fmt"
)

// ErrBadCapacity is wrapped by Simulate's error for a capacity below one block.
var ErrBadCapacity = errors.New("capacity must be at least one block")

// simBlock is a resident block of a simulation: the node the policy holds,
// and the pin count and deferred accesses the owner keeps (gocore/index
// keeps the same in its slots; deferred.go).
type simBlock struct {
	node     Node
	pins     int32
	accesses uint8
	shown    bool // the policy holds it pinned
}

// simCache drives a Policy with the Manager's event sequence.
type simCache struct {
	pol    Policy
	m      map[uint64]*simBlock
	pinned int  // resident blocks with pins
	moved  bool // a pin transition since the last Insert: EndRun before the next
}

// insert hands the policy a fresh block, ending the chain run first when a
// pin transition came since the last Insert (deferred.go, EndRun).
func (c *simCache) insert(n *Node) {
	if c.moved {
		EndRun(c.pol)
		c.moved = false
	}
	c.pol.Insert(n)
}

func (c *simCache) pin(b *simBlock) {
	b.pins++
	if b.pins == 1 {
		Access(&b.accesses)
		c.pinned++
		c.moved = true
	}
}

func (c *simCache) unpin(b *simBlock) {
	b.pins--
	if b.pins == 0 {
		c.moved = true
		if b.shown {
			b.shown = false
			c.pol.Unpin(&b.node)
		}
		c.pinned--
	}
}

// simDeferred is NextVictim's view of a simulated block.
func simDeferred(n *Node) (int32, *uint8, *bool) {
	b := n.Owner.(*simBlock)
	return b.pins, &b.accesses, &b.shown
}

// Simulate replays reqs (the hash ids of each request, in trace order) as
// one client against a cache of capacityBlocks blocks that evicts with the
// policy named policyName, and returns the blocks that hit and all blocks.
// The policy sees exactly the Manager's events (gocore/cache, ops.go) for
// the replay's client (cmd/orbitkv-bench/internal/replay/worker.go), so
// that a live replay at the same capacity agrees with it:
//
//  1. query: walk the ids while resident; these are the hit prefix (counted
//     as hits), each pinned (the lease; the policy is shown the access
//     lazily, as the Manager shows it: deferred.go);
//  2. publish of the ids after the hit prefix: a resident one is present and
//     pinned; the fresh ones are the distinct non-resident ids; if evicting
//     every unpinned block cannot make room for them, nothing is stored (the
//     Manager answers Unadmitted); else NextVictim and Remove until they
//     fit, the present blocks are unpinned (the publish call returns) and
//     the fresh ones inserted in order (their copy completes) with Depth =
//     position in the publish batch, as the Manager knows it;
//  3. release: the hit prefix is unpinned in order.
//
// Pins nest; the owner counts them, with the accesses, and shows them as
// gocore/index does (NextVictim, EndRun). Node.Key is the hash id. Errors: an unknown policy (wrapping ErrUnknownPolicy), a capacity
// below 1 (wrapping ErrBadCapacity), or a policy that broke its contract
// (chose a pinned block, found none while unpinned blocks were resident, or
// miscounted its blocks). reqs is only read; each call builds its own
// policy, so calls may run concurrently.
func Simulate(reqs [][]uint64, capacityBlocks int, policyName string) (hits, blocks uint64, err error) {
	if capacityBlocks < 1 {
		return 0, 0, fmt.Errorf("simulate: %d blocks: %w", capacityBlocks, ErrBadCapacity)
	}
	pol, err := New(policyName, capacityBlocks)
	if err != nil {
		return 0, 0, err
	}
	return simulate(reqs, capacityBlocks, pol, nil)
}

// simulate runs Simulate's replay with pol. depth, if not nil, rewrites the
// Depth of each inserted block, given the block's position in the flattened
// trace (tests use it to hand a policy oracle knowledge).
func simulate(reqs [][]uint64, capacity int, pol Policy, depth func(pos int, d uint32) uint32) (hits, blocks uint64, err error) {
	c := &simCache{pol: pol, m: make(map[uint64]*simBlock, capacity)}
	var hit, present []*simBlock
	type freshBlock struct {
		id    uint64
		depth uint32
	}
	var fresh []freshBlock
	batch := make(map[uint64]struct{})
	pos := 0 // position of h[0] in the flattened trace
	for r, h := range reqs {
		blocks += uint64(len(h))
		hit = hit[:0]
		for _, id := range h {
			b := c.m[id]
			if b == nil {
				break
			}
			c.pin(b)
			hit = append(hit, b)
		}
		hits += uint64(len(hit))

		present, fresh = present[:0], fresh[:0]
		for i, id := range h[len(hit):] {
			if b := c.m[id]; b != nil {
				c.pin(b)
				present = append(present, b)
			} else if _, dup := batch[id]; !dup {
				batch[id] = struct{}{}
				d := uint32(i)
				if depth != nil {
					d = depth(pos+len(hit)+i, d)
				}
				fresh = append(fresh, freshBlock{id, d})
			}
		}
		clear(batch)
		// Free slots plus unpinned residents must hold the fresh blocks.
		admitted := capacity-c.pinned >= len(fresh)
		if len(fresh) > 0 && admitted {
			for len(c.m)+len(fresh) > capacity {
				v, err := NextVictim(pol, simDeferred)
				if err != nil {
					return hits, blocks, fmt.Errorf("simulate: trace request %d: %w", r+1, err)
				}
				if v == nil {
					return hits, blocks, fmt.Errorf("simulate: trace request %d: %s found no victim among %d unpinned blocks", r+1, pol.Name(), len(c.m)-c.pinned)
				}
				b := v.Owner.(*simBlock)
				pol.Remove(v)
				delete(c.m, b.node.Key)
			}
		}
		for _, b := range present {
			c.unpin(b)
		}
		if admitted {
			for _, f := range fresh {
				b := &simBlock{}
				b.node = Node{Key: f.id, Depth: f.depth, Owner: b}
				c.m[f.id] = b
				c.insert(&b.node)
			}
		}
		for _, b := range hit {
			c.unpin(b)
		}
		if pol.Len() != len(c.m) {
			return hits, blocks, fmt.Errorf("simulate: trace request %d: %s holds %d blocks, %d are resident", r+1, pol.Name(), pol.Len(), len(c.m))
		}
		pos += len(h)
	}
	return hits, blocks, nil
}
