package evict

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/trace"
)

// conversationTrace is bench/traces/mooncake-conversation.jsonl.gz as hash
// id lists, its unique blocks and its infinite-cache bound, loaded once.
var conversationTrace = sync.OnceValues(func() (*traceData, error) {
	reqs, err := trace.Load("../../bench/traces/mooncake-conversation.jsonl.gz")
	if err != nil {
		return nil, err
	}
	d := &traceData{bound: trace.InfiniteCacheBound(reqs)}
	seen := make(map[uint64]struct{})
	for _, r := range reqs {
		d.ids = append(d.ids, r.HashIDs)
		for _, h := range r.HashIDs {
			seen[h] = struct{}{}
		}
	}
	d.unique = len(seen)
	return d, nil
})

type traceData struct {
	ids    [][]uint64
	unique int
	bound  trace.Bound
}

func loadConversation(t *testing.T) *traceData {
	t.Helper()
	d, err := conversationTrace()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// recorder is a Policy that records its events and delegates to an LRU.
type recorder struct {
	Policy
	events []string
}

func key(n *Node) uint64 { return n.Key }

func (r *recorder) Insert(n *Node) {
	r.events = append(r.events, fmt.Sprintf("I%d/%d", key(n), n.Depth))
	r.Policy.Insert(n)
}
func (r *recorder) Pin(n *Node) {
	r.events = append(r.events, fmt.Sprintf("P%d", key(n)))
	r.Policy.Pin(n)
}
func (r *recorder) Unpin(n *Node) {
	r.events = append(r.events, fmt.Sprintf("U%d", key(n)))
	r.Policy.Unpin(n)
}
func (r *recorder) Victim() *Node {
	n := r.Policy.Victim()
	r.events = append(r.events, fmt.Sprintf("V%d", key(n)))
	return n
}
func (r *recorder) Remove(n *Node) {
	r.events = append(r.events, fmt.Sprintf("R%d", key(n)))
	r.Policy.Remove(n)
}

func TestSimulateSendsTheManagersEvents(t *testing.T) {
	for _, c := range []struct {
		name     string
		reqs     [][]uint64
		capacity int
		hits     uint64
		events   string
	}{
		{
			name:     "a miss publishes its blocks with their batch depth; a hit prefix is pinned and released without the policy seeing it (the accesses wait for eviction)",
			reqs:     [][]uint64{{1, 2, 3}, {1, 2, 4}},
			capacity: 4, hits: 2,
			events: "I1/0 I2/1 I3/2 | I4/0",
		},
		{
			name:     "victims accessed since the policy saw them are shown their accesses, a pinned one its pin, until an untouched one is evicted; a present block is unpinned before the fresh blocks are inserted",
			reqs:     [][]uint64{{1, 2, 3}, {1, 2, 4}, {5, 6, 3}},
			capacity: 4, hits: 2,
			events: "I1/0 I2/1 I3/2 | I4/0 | V1 P1 U1 V2 P2 U2 V3 P3 V4 R4 V1 R1 U3 I5/0 I6/1",
		},
		{
			name:     "a publish that cannot be made room for stores nothing (Unadmitted)",
			reqs:     [][]uint64{{1, 2}, {1, 3, 4}},
			capacity: 2, hits: 1,
			events: "I1/0 I2/1 |",
		},
		{
			name:     "a hash repeated in a request takes one block",
			reqs:     [][]uint64{{7, 7, 8}, {7, 7, 8}},
			capacity: 2, hits: 3,
			events: "I7/0 I8/2 |",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Replaying each prefix of the trace on a fresh policy cuts
			// the events per request.
			var got []string
			var hits uint64
			seen := 0
			for i := range c.reqs {
				rec := &recorder{Policy: NewLRU()}
				h, _, err := simulate(c.reqs[:i+1], c.capacity, rec, nil)
				if err != nil {
					t.Fatal(err)
				}
				if i > 0 {
					got = append(got, "|")
				}
				got = append(got, rec.events[seen:]...)
				seen, hits = len(rec.events), h
			}
			if s := strings.Join(got, " "); s != c.events {
				t.Errorf("events\n got %s\nwant %s", s, c.events)
			}
			if hits != c.hits {
				t.Errorf("hits %d, want %d", hits, c.hits)
			}
		})
	}
}

func TestSimulateRefusesBadArguments(t *testing.T) {
	if _, _, err := Simulate([][]uint64{{1}}, 0, NameLRU); !errors.Is(err, ErrBadCapacity) {
		t.Errorf("capacity 0: %v, want ErrBadCapacity", err)
	}
	if _, _, err := Simulate([][]uint64{{1}}, 4, "fifo"); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("unknown policy: %v, want ErrUnknownPolicy", err)
	}
}

func TestAtInfiniteCapacityEveryPolicyAndTheOptimumReachTheBound(t *testing.T) {
	d := loadConversation(t)
	if d.bound.HitBlocks != 105710 || d.bound.Blocks != 288500 {
		t.Fatalf("the conversation trace's bound is %+v, want 105710 of 288500 blocks", d.bound)
	}
	for _, name := range Names() {
		hits, blocks, err := Simulate(d.ids, d.unique, name)
		if err != nil {
			t.Fatal(err)
		}
		if hits != d.bound.HitBlocks || blocks != d.bound.Blocks {
			t.Errorf("%s: %d of %d blocks hit, want the bound %d of %d", name, hits, blocks, d.bound.HitBlocks, d.bound.Blocks)
		}
	}
	hits, blocks := Optimum(d.ids, d.unique)
	if hits != d.bound.HitBlocks || blocks != d.bound.Blocks {
		t.Errorf("optimum: %d of %d blocks hit, want the bound", hits, blocks)
	}
}

func TestTheOptimumBoundsEveryPolicy(t *testing.T) {
	d := loadConversation(t)
	reqs := d.ids[:3000]
	unique := map[uint64]bool{}
	for _, r := range reqs {
		for _, h := range r {
			unique[h] = true
		}
	}
	for _, f := range []float64{0.01, 0.05, 0.10, 0.25, 0.50} {
		c := max(1, int(f*float64(len(unique))))
		opt, _ := Optimum(reqs, c)
		for _, name := range Names() {
			hits, _, err := Simulate(reqs, c, name)
			if err != nil {
				t.Fatal(err)
			}
			if hits > opt {
				t.Errorf("capacity %d (%.0f%%): %s hits %d blocks, more than the optimum's %d", c, 100*f, name, hits, opt)
			}
		}
	}
}

func TestOptimumEvictsTheBlockUsedLast(t *testing.T) {
	// Capacity 2. After {1},{2}: 1 and 2 resident. {3} arrives: 1 is used
	// next (request 4), 2 later (request 5), 3 never: 3 is bypassed.
	// Then {1} hits, {2} hits, {3} misses.
	reqs := [][]uint64{{1}, {2}, {3}, {1}, {2}, {3}}
	hits, blocks := Optimum(reqs, 2)
	if hits != 2 || blocks != 6 {
		t.Errorf("got %d of %d, want 2 of 6", hits, blocks)
	}
	// A chain: the head is used before the tail within a request, so with
	// room for one block the optimum keeps the head.
	hits, _ = Optimum([][]uint64{{1, 2}, {1, 2}}, 1)
	if hits != 1 {
		t.Errorf("chain at capacity 1: %d hits, want 1 (the head)", hits)
	}
	if hits, blocks := Optimum(reqs, 0); hits != 0 || blocks != 6 {
		t.Errorf("capacity 0: %d of %d, want 0 of 6", hits, blocks)
	}
}

func TestNextUsesSkipAccessesThatCannotHit(t *testing.T) {
	// Block 9 at position 3 follows block 8, never seen before: it cannot
	// hit there, so the next use of the 9 at position 1 is position 5.
	reqs := [][]uint64{{1, 9}, {8, 9}, {1, 9}}
	if got, want := nextUses(reqs), []int{4, 5, never, 5, never, never}; !slices.Equal(got, want) {
		t.Errorf("next uses %v, want %v", got, want)
	}
}
