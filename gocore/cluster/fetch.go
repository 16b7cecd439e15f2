package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/admission"
	"github.com/orbitkv/orbitkv/gocore/catalog"
	"github.com/orbitkv/orbitkv/gocore/peer"
	"github.com/orbitkv/orbitkv/gocore/transfer/requester"
)

// Owner is a peer that advertises a block: a candidate, not a promise (its
// copy may have gone by the time it is asked; then the fetch is a miss).
type Owner struct {
	NodeID string
	Addr   string // the peer's control address, host:port
	Epoch  uint64 // the owner's epoch the advertisement was made under; a fetch asks for exactly it
}

// Served is one block of the run a peer agreed to serve.
type Served struct {
	Length uint64 // block bytes
	// Layers the block spans; 0 when the peer does not say (the tier then
	// infers them, gocore/tier's peer tier).
	Layers uint32
	CRC32C uint32 // Castagnoli, over the block's Length bytes
}

// releaseTimeout bounds a ReleaseTransfer call; a release that does not
// get through is not retried: the source's lease expires on its own.
const releaseTimeout = time.Second

// PeerBackoff is how long a peer (node id at one epoch) whose fetch failed
// — unreachable, cut off, late, of another epoch; not one that refused for
// its per-peer bounds or our request — is not asked again: its blocks
// are misses at once meanwhile. Without it a dead or partitioned source
// stays listed until its catalog lease expires (--catalog-lease-ttl, 10 s
// by default), and every lookup of its blocks starts a fetch that fails
// and answers Loading again: thousands of failed dials, and a poller that
// never sees its Miss within the fetch deadline.
const PeerBackoff = time.Second

// peerKey names a peer at one epoch in Fetcher.down: a restarted peer (a
// new epoch) is asked again at once.
type peerKey struct {
	node  string
	epoch uint64
}

// Fetcher is the peer tier's network side (gocore/tier's Remote): owners
// from the catalog's Watch-fed index, a fetch through peer control
// (OpenTransfer, pins at the source) and the transfer engine (READs
// straight into the RAM tier frames the dispatcher placed), then
// ReleaseTransfer.
type Fetcher struct {
	cat    atomic.Pointer[catalog.Catalog] // nil until the catalog is open, and after it closed
	eng    *requester.Engine
	tls    *tls.Config
	log    *slog.Logger
	owners []Owner // Owners' scratch (dispatcher goroutine)

	mu       sync.Mutex
	clients  map[string]*peer.Client // by node id and peer control address
	releases sync.WaitGroup          // ReleaseTransfer calls in flight
	dataNode sync.Map                // transfer data address → node id, for the probes' labels
	down     sync.Map                // peerKey → time.Time: not asked before then (PeerBackoff)
	downs    atomic.Int64            // entries in down; Owners skips the map while 0
}

func newFetcher(eng *requester.Engine, cfg *tls.Config, log *slog.Logger) *Fetcher {
	return &Fetcher{eng: eng, tls: cfg, log: log, clients: make(map[string]*peer.Client)}
}

// Owners returns the live members advertising (ns, h), never this node,
// but for those in back-off; nil when none. The slice is valid until the
// next call (dispatcher goroutine).
func (r *Fetcher) Owners(ns abi.Namespace, h abi.BlockHash) []Owner {
	c := r.cat.Load()
	if c == nil {
		return nil
	}
	ms := c.Owners(ns, h)
	if len(ms) == 0 {
		return nil
	}
	r.owners = r.owners[:0]
	for _, m := range ms {
		if r.downs.Load() > 0 && r.isDown(peerKey{m.NodeID, m.Epoch}) {
			continue
		}
		r.owners = append(r.owners, Owner{NodeID: m.NodeID, Addr: m.PeerAddr, Epoch: m.Epoch})
	}
	if len(r.owners) == 0 {
		return nil
	}
	return r.owners
}

// isDown reports whether k failed a fetch less than PeerBackoff ago; an
// entry past its time goes.
func (r *Fetcher) isDown(k peerKey) bool {
	v, ok := r.down.Load(k)
	if !ok {
		return false
	}
	if time.Now().Before(v.(time.Time)) {
		return true
	}
	if r.down.CompareAndDelete(k, v) {
		r.downs.Add(-1)
	}
	return false
}

// markDown keeps o out of Owners for PeerBackoff (any goroutine).
func (r *Fetcher) markDown(o Owner) {
	if _, loaded := r.down.Swap(peerKey{o.NodeID, o.Epoch}, time.Now().Add(PeerBackoff)); !loaded {
		r.downs.Add(1)
	}
}

// client returns the peer control client of node o, dialling it once
// (the server's certificate must name o's node id).
func (r *Fetcher) client(o Owner) (*peer.Client, error) {
	key := o.NodeID + "@" + o.Addr
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.clients[key]; c != nil {
		return c, nil
	}
	c, err := peer.DialNode(o.Addr, o.NodeID, r.tls)
	if err != nil {
		return nil, err
	}
	r.clients[key] = c
	return c, nil
}

// Fetch opens a transfer of hashes at o, has the dispatcher place frames
// for the run the source serves, READs the run into them and releases the
// transfer (in the background). The transfer's deadline and ctx's bound
// it; it never writes a frame after it returned. The caller checks each
// block's CRC32C.
func (r *Fetcher) Fetch(ctx context.Context, o Owner, ns abi.Namespace, hashes []abi.BlockHash, maxBytes uint64,
	place func([]Served) [][][]byte) (landed int, err error) {
	defer func() {
		if err != nil && !errors.Is(err, peer.ErrPeerLimit) && !errors.Is(err, peer.ErrInvalidRequest) && ctx.Err() != context.Canceled {
			r.markDown(o)
		}
	}()
	cl, err := r.client(o)
	if err != nil {
		return 0, err
	}
	tr, err := cl.OpenTransfer(ctx, ns, hashes, maxBytes, o.Epoch)
	if err != nil {
		return 0, err
	}

	if tr.ID == 0 || len(tr.Blocks) == 0 {
		return 0, nil
	}
	defer r.release(cl, tr.ID)
	served := make([]Served, len(tr.Blocks))
	for i, b := range tr.Blocks {
		served[i] = Served{Length: b.Length, Layers: b.Layers, CRC32C: b.CRC32C}
	}
	dst := place(served)
	if len(dst) == 0 {
		return 0, nil
	}

	if d := tr.Deadline; !d.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	r.dataNode.Store(tr.DataAddr, o.NodeID)
	h, err := r.eng.OpenSegment(tr.DataAddr, tr.SegmentID, tr.Capability)
	if err != nil {
		return 0, err
	}
	defer r.eng.CloseSegment(h)
	var reqs []requester.Request
	first := make([]int, len(dst)+1) // block i's requests are reqs[first[i]:first[i+1]]
	for i, frames := range dst {
		first[i] = len(reqs)
		off := tr.Blocks[i].Offset
		for _, f := range frames {
			reqs = append(reqs, requester.Request{Segment: h, Offset: off, Dst: f})
			off += uint64(len(f))
		}
	}
	first[len(dst)] = len(reqs)
	b, err := r.eng.SubmitTransfer(ctx, reqs)
	if err != nil {
		return 0, err
	}
	werr := r.eng.Wait(ctx, b)
	st := r.eng.Status(b)
	r.eng.FreeBatch(b) // after it no byte lands in dst
	for landed < len(dst) {
		whole := true
		for _, s := range st[first[landed]:first[landed+1]] {
			whole = whole && s.State == requester.Done
		}
		if !whole {
			break
		}
		landed++
	}
	if werr != nil && landed < len(dst) {
		return landed, fmt.Errorf("transfer from %s (%s): %w", o.NodeID, tr.DataAddr, werr)
	}
	return landed, nil
}

// release ends transfer id at its source in the background: the fetch's
// answer does not wait for it.
func (r *Fetcher) release(cl *peer.Client, id uint64) {
	r.releases.Add(1)
	go func() {
		defer r.releases.Done()
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		if err := cl.ReleaseTransfer(ctx, id); err != nil && !errors.Is(err, peer.ErrUnknownTransfer) {
			r.log.Debug("peer: release not delivered; the source's lease ends it", slog.Uint64("transfer", id), slog.Any("err", err))
		}
	}()
}

// close waits for releases in flight, then closes every peer client.
func (r *Fetcher) close() {
	r.releases.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	for addr, c := range r.clients {
		c.Close()
		delete(r.clients, addr)
	}
}

// nodeOf is the node id whose transfer data address is addr (the
// address itself when no fetch named it).
func (r *Fetcher) nodeOf(addr string) string {
	if v, ok := r.dataNode.Load(addr); ok {
		return v.(string)
	}
	return admission.Host(addr)
}
