package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/peer"
)

// PeerHeld is one live peer's answer to LookupPeers: its node id and the
// blocks it holds, or the error that kept it from answering.
type PeerHeld struct {
	Node string
	Held peer.Held
	Err  error
}

// LookupPeers asks every live member of the catalog but this node, at
// once, how many leading blocks of a chain it holds (peer.Client.Lookup:
// the engine hashes, or tokens cut into blocks of blockSize when tokens is
// non-nil), each call bounded by timeout and ctx. A peer that fails is
// reported with its error; the answers come in the catalog's member order.
// Nil before Start. Safe from any goroutine.
func (c *Cluster) LookupPeers(ctx context.Context, ns *abi.Namespace, hashes []uint64, tokens []uint32, blockSize int, timeout time.Duration) []PeerHeld {
	cat := c.fetcher.cat.Load()
	if cat == nil {
		return nil
	}
	var out []PeerHeld
	var owners []Owner
	for _, m := range cat.Members() {
		if m.NodeID == c.spec.NodeID {
			continue
		}
		out = append(out, PeerHeld{Node: m.NodeID})
		owners = append(owners, Owner{NodeID: m.NodeID, Addr: m.PeerAddr, Epoch: m.Epoch})
	}
	var wg sync.WaitGroup
	for i := range owners {
		wg.Go(func() {
			cl, err := c.fetcher.client(owners[i])
			if err != nil {
				out[i].Err = err
				return
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out[i].Held, out[i].Err = cl.Lookup(cctx, ns, hashes, tokens, blockSize)
		})
	}
	wg.Wait()
	return out
}
