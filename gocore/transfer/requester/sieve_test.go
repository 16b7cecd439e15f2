package requester

import (
	"slices"
	"testing"
)

func TestSieveEvictsInSieveOrder(t *testing.T) {
	// Each step: "+k" adds k (evicting when full), "k" is a hit on k.
	cases := []struct {
		name    string
		cap     int
		steps   []string
		evicted []string // in order
		left    []string // newest first
	}{
		{"without hits it evicts the oldest first, like FIFO", 3,
			[]string{"+a", "+b", "+c", "+d", "+e"}, []string{"a", "b"}, []string{"e", "d", "c"}},
		{"a visited entry survives one pass of the hand", 3,
			[]string{"+a", "+b", "+c", "a", "+d"}, []string{"b"}, []string{"d", "c", "a"}},
		{"the hand stays where it stopped, not at the oldest entry", 3,
			// +d evicts a and leaves the hand on b; +e clears b, evicts c,
			// leaves the hand on d; d is hit; +f clears d and evicts e (a
			// hand restarting at the oldest would evict b instead).
			[]string{"+a", "+b", "+c", "b", "+d", "+e", "d", "+f"}, []string{"a", "c", "e"}, []string{"f", "d", "b"}},
		{"when every entry is visited the hand wraps and evicts the oldest", 2,
			[]string{"+a", "+b", "a", "b", "+c"}, []string{"a"}, []string{"c", "b"}},
		{"a hit never reorders: the SIEVE paper's example", 4,
			// hits on a and c; +e sweeps a (clear), evicts b; +f: c (clear)... evicts d.
			[]string{"+a", "+b", "+c", "+d", "a", "c", "+e", "+f"}, []string{"b", "d"}, []string{"f", "e", "c", "a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSieve[string, string](c.cap)
			var evicted []string
			for _, st := range c.steps {
				if k, ok := added(st); ok {
					if v, ev := s.Add(k, k); ev {
						evicted = append(evicted, v)
					}
				} else if _, hit := s.Get(st); !hit {
					t.Fatalf("hit on %s: not present", st)
				}
				if s.Len() > c.cap {
					t.Fatalf("%d entries, capacity %d", s.Len(), c.cap)
				}
			}
			if !slices.Equal(evicted, c.evicted) {
				t.Errorf("evicted %v, want %v", evicted, c.evicted)
			}
			if got := s.Values(); !slices.Equal(got, c.left) {
				t.Errorf("left %v, want %v", got, c.left)
			}
		})
	}
}

func TestSieveRemoveKeepsTheHandValid(t *testing.T) {
	s := newSieve[int, int](3)
	s.Add(1, 1)
	s.Add(2, 2)
	s.Add(3, 3)
	s.Get(1)
	s.Add(4, 4) // clears 1, evicts 2; hand on 3
	if _, ok := s.Remove(3); !ok {
		t.Fatal("Remove(3): not present")
	}
	s.Add(5, 5)
	if v, ok := s.Add(6, 6); !ok || v != 4 {
		t.Errorf("evicted %d %v, want 4 (the hand moved from the removed 3 to 4)", v, ok)
	}
	if _, ok := s.Remove(42); ok {
		t.Error("Remove of an absent key reported a value")
	}
}

func added(st string) (string, bool) {
	if len(st) > 1 && st[0] == '+' {
		return st[1:], true
	}
	return "", false
}
