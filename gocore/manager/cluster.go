package manager

import (
	"context"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/catalog"
	"github.com/orbitkv/orbitkv/gocore/cluster"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/peer"
)

// The Manager's wiring of gocore/cluster: the cluster's Fetcher and
// Advertiser go to the tiers at their creation, the cache's transfer pins
// (run on the dispatcher) to peer control at Start, and every transfer
// data connection to the eBPF probes when they are loaded.

// newCluster makes the cluster's requester side (Spec.Cluster is set).
func (m *Manager) newCluster(s Spec) (*cluster.Cluster, error) {
	var onConn func(net.Conn, string)
	if m.probes != nil {
		onConn = m.registerTransfer
	}
	cs := *s.Cluster
	if m.events != nil && s.Tenants == nil {
		// With tenants no lookup is answered (as POST /v1/lookup): a peer's
		// question may come from anyone who reaches its HTTP listener.
		cs.Peer.Lookup = eventsLookup{m.events}
	}
	return cluster.New(cs, s.Logger, onConn)
}

// eventsLookup is peer control's peer.Lookup over the KV events' Tracker
// (safe from any goroutine: one mutex).
type eventsLookup struct{ t *kvevents.Tracker }

func (e eventsLookup) LookupHashes(ns *abi.Namespace, hashes []uint64) peer.Held {
	return peer.Held(e.t.LookupHashes(ns, hashes))
}

func (e eventsLookup) LookupTokens(ns *abi.Namespace, tokens []uint32, blockSize int) peer.Held {
	return peer.Held(e.t.LookupTokens(ns, tokens, blockSize))
}

// LookupPeerTimeout bounds each peer's answer to POST /v1/lookup with
// "nodes": a peer slower than this is reported with its error.
const LookupPeerTimeout = 2 * time.Second

// lookupPeers asks every live peer of the cluster q's chain
// (cluster.Cluster.LookupPeers) for POST /v1/lookup's "nodes".
func (m *Manager) lookupPeers(ctx context.Context, q *lookupQuery) []nodeHeld {
	out := []nodeHeld{}
	for _, p := range m.cluster.LookupPeers(ctx, q.NS, q.Hashes, q.Tokens, q.BlockSize, LookupPeerTimeout) {
		n := nodeHeld{Node: p.Node}
		if p.Err != nil {
			n.Error = p.Err.Error()
		} else {
			n.Held = &kvevents.Held{CPU: p.Held.CPU, Storage: p.Held.Storage, Any: p.Held.Any}
		}
		out = append(out, n)
	}
	return out
}

// registerTransfer hands a transfer data connection to the eBPF probes;
// peer labels its histograms.
func (m *Manager) registerTransfer(conn net.Conn, peer string) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return
	}
	if err := m.probes.RegisterTransfer(sc, peer); err != nil {
		m.log.Debug("ebpf: transfer connection not registered", slog.String("peer", peer), slog.Any("err", err))
	}
}

// startCluster joins the cluster; the dispatcher must run (peer control
// pins through it).
func (m *Manager) startCluster(s Spec) error {
	pins := cluster.Pins{Do: m.Dispatcher.Do, Pin: m.Cache.PinRun, Unpin: m.Cache.UnpinRun}
	return m.cluster.Start(m.Cache.RAMMemory(), pins, s.Epoch, m.Cache.Stats().CapacityBytes)
}

// PeerAddr is peer control's bound host:port ("" without a cluster).
func (m *Manager) PeerAddr() string {
	if m.cluster == nil {
		return ""
	}
	return m.cluster.PeerAddr()
}

// Catalog is the cluster catalog (nil without a cluster), for tests.
func (m *Manager) Catalog() *catalog.Catalog {
	if m.cluster == nil {
		return nil
	}
	return m.cluster.Catalog()
}

// stopCluster leaves the cluster while the dispatcher still runs
// (cluster.Cluster.Leave).
func (m *Manager) stopCluster() {
	if m.cluster != nil {
		m.cluster.Leave()
	}
}

// closeEngine closes the cluster's requester side once the cache stopped
// (no fetch runs any more).
func (m *Manager) closeEngine() {
	if m.cluster != nil {
		m.cluster.Close()
	}
	m.closeEvents()
}
