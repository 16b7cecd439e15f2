package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
)

// KV events in the replay (bench/README.md "replay", bench/cluster/README.md
// "Routing"): with --kv-events on, the bench starts each Manager with
// --kv-events on an ipc:// socket in a private directory, the clients
// publish every block with a block record, and the bench subscribes; with
// --route events, each client subscribes to every node's stream itself and
// sends each request to the node whose events say it holds the longest
// prefix.

// Event modes (--kv-events) and routes (--route).
const (
	eventsOff     = "off"
	eventsOn      = "on"
	eventsCompare = "compare"
	routeRR       = "round-robin"
	routeEvents   = "events"
)

// eventsDir makes the private directory of the Managers' event sockets.
func eventsDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "orbitkv-events-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// eventEndpoint is node i's event socket in dir.
func eventEndpoint(dir string, i int) string {
	return "ipc://" + filepath.Join(dir, fmt.Sprintf("node%d.events", i))
}

// recordOf fills r as the block record of trace block id at chain
// position pos of ids: the engine hash is the trace's hash id, the parent
// the id before it, and the token ids tokens made from the id (the trace
// has no tokens; routers match on hashes).
func recordOf(r *client.BlockRecord, ids []uint64, pos int, tokens []uint32) {
	id := ids[pos]
	r.EngineHash, r.HasParent, r.ParentHash = id, pos > 0, 0
	if pos > 0 {
		r.ParentHash = ids[pos-1]
	}
	for j := range tokens {
		tokens[j] = uint32(id*2654435761) + uint32(j)
	}
	r.Tokens = tokens
}

// eventIndex is a client's view of which node holds which block in RAM,
// fed by every node's event stream: a bit per node for each engine hash.
type eventIndex struct {
	mu     sync.Mutex
	held   map[uint64]uint32
	socks  []*kvevents.Subscriber
	events atomic.Uint64
	errs   atomic.Pointer[error]
}

// subscribeAll subscribes to every endpoint (node i at endpoints[i]) and
// applies their events until close.
func subscribeAll(endpoints []string) (*eventIndex, error) {
	x := &eventIndex{held: map[uint64]uint32{}}
	for i, e := range endpoints {
		sub, err := kvevents.Subscribe(e, subscribeTimeout)
		if err != nil {
			x.close()
			return nil, fmt.Errorf("subscribing to node %d's events: %w", i, err)
		}
		x.socks = append(x.socks, sub)
		go x.apply(i, sub)
	}
	return x, nil
}

// subscribeTimeout bounds a subscription's connect and handshake.
const subscribeTimeout = 10 * time.Second

func (x *eventIndex) apply(node int, sub *kvevents.Subscriber) {
	bit := uint32(1) << node
	for {
		_, payload, err := sub.Next()
		if err != nil {
			return // closed
		}
		b, err := kvevents.DecodeBatch(payload)
		if err != nil {
			err = fmt.Errorf("node %d: %w", node, err)
			x.errs.Store(&err)
			continue
		}
		x.mu.Lock()
		for _, ev := range b.Events {
			x.events.Add(1)
			switch {
			case ev.Kind == kvevents.KindCleared:
				for h, m := range x.held {
					if m &^= bit; m == 0 {
						delete(x.held, h)
					} else {
						x.held[h] = m
					}
				}
			case ev.Medium != kvevents.CPU:
			case ev.Kind == kvevents.KindStored:
				for _, h := range ev.Hashes {
					x.held[h] |= bit
				}
			case ev.Kind == kvevents.KindRemoved:
				for _, h := range ev.Hashes {
					if m := x.held[h] &^ bit; m == 0 {
						delete(x.held, h)
					} else {
						x.held[h] = m
					}
				}
			}
		}
		x.mu.Unlock()
	}
}

// choose is the node for a request of trace blocks ids, by the cost a KV
// router weighs (as Dynamo's does: blocks to compute plus load): the
// blocks of ids the node's events do not show it holding as a prefix,
// plus loadWeight blocks for each request this client sent it beyond the
// node it sent the fewest; the lowest cost wins, ties to the lower
// index. Without the load term every request whose first blocks (a
// shared system prompt) one node holds would go there, and that node
// alone would serve, with a third of the RAM.
func (x *eventIndex) choose(ids []uint64, load []int) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	least := load[0]
	for _, l := range load {
		least = min(least, l)
	}
	best, bestCost := 0, 0
	for n := range load {
		bit := uint32(1) << n
		k := 0
		for k < len(ids) && x.held[ids[k]]&bit != 0 {
			k++
		}
		cost := len(ids) - k + loadWeight*(load[n]-least)
		if n == 0 || cost < bestCost {
			best, bestCost = n, cost
		}
	}
	return best
}

// loadWeight is the blocks of prefix one request of load imbalance is
// worth to choose.
const loadWeight = 1

func (x *eventIndex) close() {
	for _, s := range x.socks {
		s.Close()
	}
}

// err is the first malformed message seen, nil when none.
func (x *eventIndex) err() error {
	if p := x.errs.Load(); p != nil {
		return *p
	}
	return nil
}

// eventsSeen is the bench's own subscriber with --kv-events on: a real
// consumer connected to the stream while it is measured, so the Manager
// encodes and sends every batch. It checks every message's frames and
// that the sequence numbers run on without a gap, and decodes one
// message in decodeEvery (DecodeBatch) to count the events: decoding all
// of them is a router's work, which on this 2-vCPU VM would compete with
// the clients and the Manager measured.
type eventsSeen struct {
	sub      *kvevents.Subscriber
	done     chan struct{}
	messages atomic.Uint64
	events   atomic.Uint64 // in the messages decoded, scaled by decodeEvery
	errs     atomic.Pointer[error]
}

// decodeEvery is how many messages eventsSeen takes per one it decodes.
const decodeEvery = 16

func watchEvents(endpoints []string) (*eventsSeen, error) {
	sub, err := kvevents.Subscribe(endpoints[0], subscribeTimeout)
	if err != nil {
		return nil, fmt.Errorf("subscribing to the Manager's events: %w", err)
	}
	s := &eventsSeen{sub: sub, done: make(chan struct{})}
	go s.read()
	return s, nil
}

func (s *eventsSeen) read() {
	defer close(s.done)
	fail := func(err error) { s.errs.CompareAndSwap(nil, &err) }
	last := int64(-1)
	for {
		seq, payload, err := s.sub.Next()
		if err != nil {
			return // closed
		}
		if last >= 0 && seq != last+1 {
			fail(fmt.Errorf("sequence %d after %d: a gap", seq, last))
		}
		last = seq
		if n := s.messages.Add(1); n%decodeEvery == 1 {
			b, err := kvevents.DecodeBatch(payload)
			if err != nil {
				fail(err)
				continue
			}
			s.events.Add(uint64(len(b.Events)) * decodeEvery)
		}
	}
}

// stop ends the subscription and returns the events received (estimated
// from the messages decoded) and the first error.
func (s *eventsSeen) stop() (uint64, error) {
	s.sub.Close()
	<-s.done
	if p := s.errs.Load(); p != nil {
		return s.events.Load(), *p
	}
	return s.events.Load(), nil
}
