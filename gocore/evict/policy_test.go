package evict

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// block is a test block: the node embedded as gocore/index embeds it.
type block struct {
	node Node
	id   int
}

func newBlock(id int, depth uint32) *block {
	b := &block{id: id}
	b.node = Node{Key: uint64(id), Depth: depth, Owner: b}
	return b
}

func owner(n *Node) *block {
	if n == nil {
		return nil
	}
	return n.Owner.(*block)
}

// newPolicy returns a fresh policy by name for capacity blocks.
func newPolicy(t testing.TB, name string, capacity int) Policy {
	t.Helper()
	p, err := New(name, capacity)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != name {
		t.Fatalf("New(%q) made %q", name, p.Name())
	}
	return p
}

// breakRun is a call that is not an Insert, so the next Insert starts a new
// chain (a Pin/Unpin pair of a block the test does not care about).
func breakRun(p Policy, b *block) {
	p.Pin(&b.node)
	p.Unpin(&b.node)
}

func TestNewKnowsEveryNameAndRefusesOthers(t *testing.T) {
	names := Names()
	for _, want := range []string{NameLRU, NameS3FIFO, NameSLRU} {
		if !slices.Contains(names, want) {
			t.Errorf("Names() = %v, missing %q", names, want)
		}
	}
	if names[0] != NameLRU {
		t.Errorf("Names() = %v, want lru first", names)
	}
	if !slices.Contains(names, Default) {
		t.Errorf("Default %q is not among %v", Default, names)
	}
	for _, n := range names {
		newPolicy(t, n, 100)
		newPolicy(t, n, 0) // capacity unknown
	}
	_, err := New("mru", 10)
	if !errors.Is(err, ErrUnknownPolicy) {
		t.Fatalf("New(mru): %v, want ErrUnknownPolicy", err)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not list %q", err, n)
		}
	}
}

func TestEveryPolicy(t *testing.T) {
	for _, name := range Names() {
		t.Run(name+" never returns a pinned block and ends with nil when all are pinned", func(t *testing.T) {
			p := newPolicy(t, name, 64)
			bs := make([]*block, 64)
			for i := range bs {
				bs[i] = newBlock(i, uint32(i%8))
				p.Insert(&bs[i].node)
			}
			for i := 0; i < 64; i += 3 {
				p.Pin(&bs[i].node)
			}
			evicted := 0
			for v := p.Victim(); v != nil; v = p.Victim() {
				if v.pinned || owner(v).id%3 == 0 {
					t.Fatalf("Victim returned pinned block %d", owner(v).id)
				}
				p.Remove(v)
				evicted++
			}
			if want := 64 - 22; evicted != want {
				t.Errorf("evicted %d blocks, want every unpinned one (%d)", evicted, want)
			}
			if p.Len() != 22 {
				t.Errorf("Len %d after evicting all unpinned blocks, want the 22 pinned", p.Len())
			}
			// Unpinned again, they are evictable again.
			for i := 0; i < 64; i += 3 {
				p.Unpin(&bs[i].node)
			}
			for v := p.Victim(); v != nil; v = p.Victim() {
				p.Remove(v)
			}
			if p.Len() != 0 {
				t.Errorf("Len %d after evicting everything", p.Len())
			}
		})
		t.Run(name+" returns nil when empty", func(t *testing.T) {
			if v := newPolicy(t, name, 8).Victim(); v != nil {
				t.Errorf("Victim of an empty policy: %v", v)
			}
		})
		t.Run(name+" lets a removed node be inserted again", func(t *testing.T) {
			p := newPolicy(t, name, 8)
			b := newBlock(1, 0)
			p.Insert(&b.node)
			p.Remove(&b.node)
			p.Insert(&b.node)
			if v := p.Victim(); owner(v) != b || p.Len() != 1 {
				t.Errorf("Victim %v, Len %d: want the reinserted block", v, p.Len())
			}
		})
		t.Run(name+" panics on an owner's misuse", func(t *testing.T) {
			p := newPolicy(t, name, 8)
			b := newBlock(1, 0)
			mustPanic(t, "Pin of a node not held", func() { p.Pin(&b.node) })
			p.Insert(&b.node)
			mustPanic(t, "double Insert", func() { p.Insert(&b.node) })
			mustPanic(t, "Unpin of an unpinned node", func() { p.Unpin(&b.node) })
		})
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func TestLRUOrder(t *testing.T) {
	p := NewLRU()
	a, b, c, d := newBlock(1, 0), newBlock(2, 1), newBlock(3, 2), newBlock(4, 0)
	for _, x := range []*block{a, b, c} {
		p.Insert(&x.node)
	}
	if v := owner(p.Victim()); v != a {
		t.Fatalf("victim %v, want the least recent insert a", v)
	}
	p.Pin(&a.node) // a is off the list while pinned
	if v := owner(p.Victim()); v != b {
		t.Fatalf("victim %v with a pinned, want b", v)
	}
	p.Unpin(&a.node) // a becomes the most recent
	p.Insert(&d.node)
	want := []*block{b, c, a, d}
	for i, w := range want {
		v := p.Victim()
		if owner(v) != w {
			t.Fatalf("victim %d is %v, want block %d", i, owner(v), w.id)
		}
		p.Remove(v)
	}
	if p.Victim() != nil || p.Len() != 0 {
		t.Errorf("not empty after evicting everything")
	}
}

// oneHitWondersLeaveFirst inserts hot blocks, accesses them, floods the
// policy with blocks never accessed and checks that the flood is evicted
// before any hot block.
func oneHitWondersLeaveFirst(t *testing.T, name string) {
	const hot, cold = 50, 450
	p := newPolicy(t, name, hot+cold)
	var hots []*block
	for i := range hot {
		b := newBlock(i, 0) // each its own one-block chain
		p.Insert(&b.node)
		hots = append(hots, b)
	}
	for range 2 { // two leases each
		for _, b := range hots {
			p.Pin(&b.node)
			p.Unpin(&b.node)
		}
	}
	for i := range cold {
		b := newBlock(hot+i, 0)
		p.Insert(&b.node)
		breakRun(p, hots[i%hot]) // hot blocks stay in use meanwhile
	}
	for i := range cold {
		v := p.Victim()
		if v == nil {
			t.Fatalf("no victim after %d evictions", i)
		}
		if owner(v).id < hot {
			t.Fatalf("eviction %d took hot block %d while one-hit blocks remained", i, owner(v).id)
		}
		p.Remove(v)
	}
}

func TestS3FIFOOneHitWondersLeaveFirst(t *testing.T) { oneHitWondersLeaveFirst(t, NameS3FIFO) }
func TestSLRUOneHitWondersLeaveFirst(t *testing.T)   { oneHitWondersLeaveFirst(t, NameSLRU) }

func TestS3FIFOKeepsAPinnedBlocksFrequency(t *testing.T) {
	p := NewS3FIFO(0).(*s3fifo)
	hot := newBlock(0, 0)
	p.Insert(&hot.node)
	p.Pin(&hot.node) // accessed, and pinned while Victim runs
	for i := 1; i <= 20; i++ {
		p.Insert(&newBlock(i, 0).node)
	}
	for range 10 {
		p.Remove(p.Victim())
	}
	if hot.node.queue != 0 || hot.node.freq != 1 {
		t.Fatalf("pinned block: queue %d freq %d, want set aside with its frequency 1", hot.node.queue, hot.node.freq)
	}
	p.Unpin(&hot.node)
	for p.Len() > 1 {
		p.Remove(p.Victim())
	}
	// Its access moves it to main when Victim reaches it; there it is the
	// only block left, so it is returned.
	if v := p.Victim(); owner(v) != hot || hot.node.home != qMain {
		t.Errorf("victim %v, the accessed block's home %d: want it, promoted to main", owner(v), hot.node.home)
	}
}

func TestChainTailLeavesFirst(t *testing.T) {
	for _, name := range []string{NameS3FIFO, NameSLRU} {
		t.Run(name+" evicts a chain tail first and the head last", func(t *testing.T) {
			p := newPolicy(t, name, 0)
			other := newBlock(100, 0)
			p.Insert(&other.node)
			p.Pin(&other.node) // keep it out of the way
			var chain []*block
			for d := range 5 {
				b := newBlock(d, uint32(d))
				p.Insert(&b.node)
				chain = append(chain, b)
			}
			for d := 4; d >= 0; d-- {
				v := p.Victim()
				if owner(v) != chain[d] {
					t.Fatalf("victim %v, want depth %d", owner(v), d)
				}
				p.Remove(v)
			}
		})
	}
}

// TestRandomEventSequences drives every policy with random owner-legal
// events and checks Len, that Victim never returns a pinned or removed
// block, and that it returns nil only when every resident block is pinned.
func TestRandomEventSequences(t *testing.T) {
	for _, name := range Names() {
		for seed := range uint64(20) {
			r := rand.New(rand.NewPCG(seed, 7))
			ops := make([]byte, 4000)
			for i := range ops {
				ops[i] = byte(r.UintN(256))
			}
			checkEvents(t, name, ops)
		}
	}
}

// FuzzPolicyEvents is TestRandomEventSequences with fuzzed event bytes.
func FuzzPolicyEvents(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{0, 0, 0, 0, 1, 1, 1, 1, 3, 3, 3, 3, 2, 2, 3})
	f.Add([]byte("insert pin unpin victim remove"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		for _, name := range Names() {
			checkEvents(t, name, ops)
		}
	})
}

func checkEvents(t *testing.T, name string, ops []byte) {
	t.Helper()
	p := newPolicy(t, name, 16)
	type state struct {
		b    *block
		pins int
	}
	var resident []*state
	held := map[*block]*state{}
	next := 0
	pick := func(arg byte, want func(*state) bool) *state {
		var c []*state
		for _, s := range resident {
			if want(s) {
				c = append(c, s)
			}
		}
		if len(c) == 0 {
			return nil
		}
		return c[int(arg)%len(c)]
	}
	drop := func(s *state) {
		resident = slices.DeleteFunc(resident, func(x *state) bool { return x == s })
		delete(held, s.b)
	}
	for i := 0; i+1 < len(ops); i += 2 {
		op, arg := ops[i]%6, ops[i+1]
		switch op {
		case 0, 1: // insert, sometimes continuing a chain
			b := newBlock(next, uint32(arg%4))
			next++
			s := &state{b: b}
			p.Insert(&b.node)
			resident = append(resident, s)
			held[b] = s
		case 2: // pin (0→1 only reaches the policy)
			if s := pick(arg, func(*state) bool { return true }); s != nil {
				s.pins++
				if s.pins == 1 {
					p.Pin(&s.b.node)
				}
			}
		case 3: // unpin
			if s := pick(arg, func(s *state) bool { return s.pins > 0 }); s != nil {
				s.pins--
				if s.pins == 0 {
					p.Unpin(&s.b.node)
				}
			}
		case 4: // evict
			v := p.Victim()
			evictable := slices.ContainsFunc(resident, func(s *state) bool { return s.pins == 0 })
			if v == nil {
				if evictable {
					t.Fatalf("%s: Victim nil with unpinned blocks resident", name)
				}
				continue
			}
			s := held[owner(v)]
			switch {
			case s == nil:
				t.Fatalf("%s: Victim returned block %d, not resident", name, owner(v).id)
			case s.pins > 0:
				t.Fatalf("%s: Victim returned pinned block %d", name, owner(v).id)
			}
			p.Remove(v)
			drop(s)
		case 5: // drop an unpinned block for another reason
			if s := pick(arg, func(s *state) bool { return s.pins == 0 }); s != nil {
				p.Remove(&s.b.node)
				drop(s)
			}
		}
		if p.Len() != len(resident) {
			t.Fatalf("%s: Len %d, %d resident", name, p.Len(), len(resident))
		}
	}
}
