package replay

import (
	"os"
	"sync"
	"testing"
	"time"
)

// Two mappings of one start-order file are two clients' views of one
// counter: a client whose request is not next waits until the request
// before it started, and clients that take turns reach the end together.
func TestStartOrderGatesRequestsInTraceOrder(t *testing.T) {
	path, err := newOrderFile()
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	const clients, each = 3, 200
	gates := make([]*orderGate, clients)
	for i := range gates {
		if gates[i], err = openOrderGate(path); err != nil {
			t.Fatal(err)
		}
		defer gates[i].close()
	}

	t.Run("a request waits for the one before it", func(t *testing.T) {
		started := make(chan struct{})
		go func() { gates[1].start(1); close(started) }()
		select {
		case <-started:
			t.Fatal("request 1 started before request 0")
		case <-time.After(50 * time.Millisecond):
		}
		gates[0].start(0)
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("request 1 did not start after request 0")
		}
		if got := gates[2].started.Load(); got != 2 {
			t.Fatalf("the third mapping reads %d started, want 2", got)
		}
	})

	t.Run("clients taking turns start every request once", func(t *testing.T) {
		var mu sync.Mutex
		var order []uint64
		var wg sync.WaitGroup
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range each {
					g := uint64(2 + i + j*clients)
					gates[i].start(g)
					mu.Lock()
					order = append(order, g)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if got, want := gates[0].started.Load(), uint64(2+clients*each); got != want {
			t.Fatalf("%d requests started, want %d", got, want)
		}
		seen := make(map[uint64]bool, len(order))
		for _, g := range order {
			if seen[g] {
				t.Fatalf("request %d started twice", g)
			}
			seen[g] = true
		}
		if len(seen) != clients*each {
			t.Fatalf("%d distinct requests started, want %d", len(seen), clients*each)
		}
	})
}
