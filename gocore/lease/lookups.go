package lease

import (
	"sync"

	"github.com/axiomhq/hyperloglog"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// Lookups counts the logical lookups of the lookup path and estimates how
// many were distinct with a HyperLogLog sketch (github.com/axiomhq/
// hyperloglog, precision 14: about 0.8% standard error in 16 KiB). A
// lookup is keyed by its namespace and the last block hash of its chain:
// block hashes are chained, so the last one names the whole prefix. Add
// runs on the dispatcher goroutine, Snapshot on any; a mutex (uncontended
// but for Health and /metrics reads) guards the sketch.
type Lookups struct {
	mu     sync.Mutex
	sketch *hyperloglog.Sketch
	total  uint64
}

// NewLookups returns an empty counter.
func NewLookups() *Lookups { return &Lookups{sketch: hyperloglog.New14()} }

// Add counts one lookup of the chain of ns ending in last.
func (l *Lookups) Add(ns abi.Namespace, last abi.BlockHash) {
	var key [32]byte
	copy(key[:16], ns[:])
	copy(key[16:], last[:])
	l.mu.Lock()
	l.sketch.Insert(key[:])
	l.total++
	l.mu.Unlock()
}

// Snapshot returns the lookups counted and the distinct estimate.
func (l *Lookups) Snapshot() (total, distinct uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.sketch.Estimate()
}
