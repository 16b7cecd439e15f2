package replay

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The start order of a cluster comparison (runClusterReplay): the clients
// start the trace's requests in trace order, at most one request per
// client at once. Without it each client runs its share as fast as it
// can, and the clients of different Managers drift apart (by hundreds of
// requests over the Mooncake trace when fetches from peers make one node's
// requests slower than another's), so the three runs would replay three
// different request orders and their hit ratios would differ by the order
// as much as by the cache; the clients of one Manager keep pace with each
// other through its dispatcher and drift little.
//
// The gate is one 8-byte counter in a shared file mapping: the number of
// requests started, in trace order. Client i (of n) starts its j-th
// request, trace request g = i + j×n, when the counter reads g, and
// stores g+1 (release) as it starts: the one client whose turn it is
// writes, the others only read (acquire), so a plain atomic load and store
// suffice.

// orderWaitPoll is how long a client sleeps between reads of the counter
// while it waits for its turn.
const orderWaitPoll = 20 * time.Microsecond

// orderFileBytes is the size of the gate's file: the counter, a page.
const orderFileBytes = 4096

// newOrderFile creates the gate's file, zeroed, in the temporary
// directory and returns its path; the caller removes it.
func newOrderFile() (string, error) {
	f, err := os.CreateTemp("", "orbitkv-replay-order-")
	if err != nil {
		return "", fmt.Errorf("creating the start-order file: %w", err)
	}
	err = f.Truncate(orderFileBytes)
	err = errors.Join(err, f.Close())
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("sizing the start-order file: %w", err)
	}
	return f.Name(), nil
}

// orderGate is a worker's view of the start-order counter.
type orderGate struct {
	mem     []byte
	started *atomic.Uint64 // in mem
}

// openOrderGate maps the file at path (newOrderFile) shared.
func openOrderGate(path string) (*orderGate, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the start-order file: %w", err)
	}
	defer f.Close() // the mapping outlives the descriptor
	mem, err := syscall.Mmap(int(f.Fd()), 0, orderFileBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the start-order file: %w", err)
	}
	return &orderGate{mem: mem, started: (*atomic.Uint64)(unsafe.Pointer(&mem[0]))}, nil
}

// start waits until trace request g is next to start, then counts it
// started. A client that never comes (its process failed) leaves the
// others waiting: the parent kills them when it hears of the failure.
func (o *orderGate) start(g uint64) {
	for o.started.Load() != g {
		time.Sleep(orderWaitPoll)
	}
	o.started.Store(g + 1)
}

// close unmaps the counter.
func (o *orderGate) close() error { return syscall.Munmap(o.mem) }
