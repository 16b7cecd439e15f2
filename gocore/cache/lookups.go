package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"time"

	"github.com/axiomhq/hyperloglog"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// lookupStats counts logical lookups and estimates how many were distinct
// with a HyperLogLog sketch (github.com/axiomhq/hyperloglog, precision 14:
// about 0.8% standard error in 16 KiB). A lookup is keyed by its namespace
// and the last block hash of its chain: block hashes are chained, so the
// last one names the whole prefix. Insert runs on the dispatcher goroutine,
// snapshot on any; a mutex (uncontended but for Health and /metrics reads)
// guards the sketch.
type lookupStats struct {
	mu     sync.Mutex
	sketch *hyperloglog.Sketch
	total  uint64
}

func (l *lookupStats) init() { l.sketch = hyperloglog.New14() }

func (l *lookupStats) add(key []byte) {
	l.mu.Lock()
	l.sketch.Insert(key)
	l.total++
	l.mu.Unlock()
}

// snapshot returns the lookups counted and the distinct estimate.
func (l *lookupStats) snapshot() (total, distinct uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.sketch.Estimate()
}

// CountLookup counts one logical lookup of the chain ending in last
// (ticket.Host).
func (s *Service) CountLookup(ns abi.Namespace, last abi.BlockHash) {
	var key [32]byte
	copy(key[:16], ns[:])
	copy(key[16:], last[:])
	s.lookups.add(key[:])
}

// idBase is the first lease and restore id of a Manager lifetime: the top
// 16 bits come from a hash of the epoch, so an id issued by an earlier
// lifetime is, but for a 2^-16 chance, unknown to this one (spec: "a Manager
// restart ... rejects every old lease and handle"); 2^48 ids per lifetime.
func idBase(epoch uint64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], epoch)
	h := sha256.Sum256(b[:])
	return uint64(binary.LittleEndian.Uint16(h[:]))<<48 | 1
}

func orDefault[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// tickEvery is how often the expiry sweep is offered a control event.
const tickEvery = time.Second

// tick rings the dispatcher's control event every tickEvery while
// something can expire (a ticket or an unpolled restore result: armExpiry)
// or completions are withheld (failpoint builds), so expiry runs without
// traffic (Complete calls sweep). An idle Manager is not woken.
func (s *Service) tick(ring func()) {
	defer close(s.tickDone)
	t := time.NewTicker(tickEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stopTick:
			return
		case <-t.C:
			if s.tickWanted.Load() {
				ring()
			}
		}
	}
}
