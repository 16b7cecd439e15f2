package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/catalog"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/peer"
	"github.com/orbitkv/orbitkv/gocore/transfer"
	"github.com/orbitkv/orbitkv/gocore/transfer/requester"
)

// ClusterSpec is the Manager's part in a cluster of Managers: the catalog
// on etcd that advertises which blocks each holds (gocore/catalog), peer
// control that authorises and pins a transfer (gocore/peer, mutual TLS
// under the cluster CA), and the transfer engine that moves the bytes
// (gocore/transfer: data connections carrying the per-transfer capability
// peer control issued). A plain value; nil in Spec: a single node.
type ClusterSpec struct {
	// NodeID names this node in the catalog and in its certificate
	// (peer.CheckNodeID: 1..64 of [A-Za-z0-9._-]).
	NodeID string
	// Catalog is the etcd catalog (Endpoints at least); New fills Self
	// (NodeID, PeerAddr: the peer control address bound, Epoch, the RAM
	// tier's capacity) and Logger.
	Catalog catalog.Spec
	// PeerListen is peer control's host:port ("127.0.0.1:0" picks a port);
	// the address peers dial is the one bound.
	PeerListen string
	// TransferListen is the data connections' host:port.
	TransferListen string
	// ServerTLS and ClientTLS are the two sides of this node's mutual TLS
	// (peer.LoadTLS).
	ServerTLS, ClientTLS *tls.Config
	// Peer carries peer control's limits (MaxTransferBytes, MaxPeerBytes,
	// MaxPeerTransfers, LeaseTTL); New fills the rest.
	Peer peer.ServerSpec
	// Engine and Transfer are the transfer engine's requester and source
	// sides (Rails, SliceBytes, ...); New fills OnConn, Addr and Logger.
	Engine   requester.EngineSpec
	Transfer transfer.ServerSpec
}

// Validate checks what New cannot fill in; each error names its field.
func (c *ClusterSpec) Validate(cache bool) error {
	errs := []error{
		limit.Check(cache, "manager.Cluster", "set", "a cache (Spec.Cache): peers fetch from and into its RAM tier"),
		limit.Check(peer.CheckNodeID(c.NodeID) == nil, "manager.Cluster.NodeID", c.NodeID, "1..64 of [A-Za-z0-9._-]"),
		limit.Check(len(c.Catalog.Endpoints) > 0, "manager.Cluster.Catalog.Endpoints", c.Catalog.Endpoints, "at least one etcd endpoint"),
		checkHostPort("manager.Cluster.PeerListen", c.PeerListen),
		checkHostPort("manager.Cluster.TransferListen", c.TransferListen),
		limit.Check(c.ServerTLS != nil && c.ClientTLS != nil, "manager.Cluster.ServerTLS", "unset",
			"both sides of the node's mutual TLS (peer.LoadTLS; --peer-ca, --peer-cert, --peer-key)"),
		c.Engine.Validate(),
	}
	return errors.Join(errs...)
}

func checkHostPort(field, addr string) error {
	_, _, err := net.SplitHostPort(addr)
	return limit.Check(err == nil, field, addr, "host:port")
}

// cluster is the live part of a ClusterSpec.
type cluster struct {
	spec   ClusterSpec
	log    *slog.Logger
	engine *requester.Engine
	remote *remote
	adv    *advertiser
	data   *transfer.Server
	ctl    *peer.Server
	cat    *catalog.Catalog
	// live holds ctl once it serves, for /metrics (read from any goroutine;
	// the catalog is remote.cat).
	live atomic.Pointer[peer.Server]
}

// newCluster makes the transfer engine and the late-bound Remote and
// Advertiser the cache's tiers take at their creation (the catalog is
// opened once the peer control address is bound, after the cache).
func (m *Manager) newCluster(s Spec) (*cluster, error) {
	cs := *s.Cluster
	es := cs.Engine
	c := &cluster{spec: cs, log: s.Logger.With(slog.String("component", "cluster"))}
	if m.probes != nil {
		// Requester side: the peer's node id labels its histograms.
		es.OnConn = func(conn net.Conn, to string) { m.registerTransfer(conn, c.remote.nodeOf(to)) }
	}
	if es.Logger == nil {
		es.Logger = s.Logger
	}
	eng, err := requester.NewEngine(es)
	if err != nil {
		return nil, err
	}
	c.engine = eng
	c.remote = newRemote(eng, cs.ClientTLS, s.Logger)
	c.adv = &advertiser{}
	return c, nil
}

// hostOf is addr without its port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// registerTransfer hands a transfer data connection to the eBPF probes.
func (m *Manager) registerTransfer(conn net.Conn, to string) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return
	}
	if err := m.probes.RegisterTransfer(sc, to); err != nil {
		m.log.Debug("ebpf: transfer connection not registered", slog.String("peer", to), slog.Any("err", err))
	}
}

// startCluster binds the data and peer control listeners and opens the
// catalog; the dispatcher must run (peer control pins through it).
func (m *Manager) startCluster(s Spec) error {
	c := m.cluster
	if err := c.engine.RegisterLocalMemory(m.Cache.RAMMemory()); err != nil {
		return fmt.Errorf("cluster: registering the RAM tier with the transfer engine: %w", err)
	}
	ts := c.spec.Transfer
	ts.Addr = c.spec.TransferListen
	if ts.Logger == nil {
		ts.Logger = s.Logger
	}
	if m.probes != nil {
		// Source side: a data connection is admitted by the capability its
		// first READ carries, after OnConn, so the requester's node is not
		// known yet: its host address labels the histograms (never the
		// ephemeral port, which would make a label per connection).
		ts.OnConn = func(conn net.Conn) { m.registerTransfer(conn, hostOf(conn.RemoteAddr().String())) }
	}
	var err error
	if c.data, err = transfer.Listen(ts); err != nil {
		return &limit.Refused{Field: "manager.Cluster.TransferListen", Value: ts.Addr, Err: err}
	}
	ps := c.spec.Peer
	ps.Listen, ps.TLS, ps.Transfer, ps.Epoch, ps.NodeID = c.spec.PeerListen, c.spec.ServerTLS, c.data, s.Epoch, c.spec.NodeID
	ps.Source = &source{disp: m.Dispatcher, svc: m.Cache}
	if ps.Logger == nil {
		ps.Logger = s.Logger
	}
	if c.ctl, err = peer.Serve(ps); err != nil {
		c.data.Close()
		return &limit.Refused{Field: "manager.Cluster.PeerListen", Value: ps.Listen, Err: err}
	}
	ks := c.spec.Catalog
	ks.Self = catalog.Member{NodeID: c.spec.NodeID, PeerAddr: c.ctl.Addr(), Epoch: s.Epoch, CapacityBytes: m.Cache.Stats().CapacityBytes}
	if ks.Logger == nil {
		ks.Logger = s.Logger
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c.cat, err = catalog.Open(ctx, ks); err != nil {
		c.ctl.Close()
		c.data.Close()
		return err
	}
	c.remote.cat.Store(c.cat)
	c.adv.cat.Store(c.cat)
	c.live.Store(c.ctl)
	c.log.Info("start: cluster joined", slog.String("node", c.spec.NodeID), slog.String("peer_addr", c.ctl.Addr()),
		slog.String("data_addr", c.data.Addr()), slog.Any("etcd", ks.Endpoints))
	return nil
}

// PeerAddr is peer control's bound host:port ("" without a cluster).
func (m *Manager) PeerAddr() string {
	if m.cluster == nil || m.cluster.ctl == nil {
		return ""
	}
	return m.cluster.ctl.Addr()
}

// Catalog is the cluster catalog (nil without a cluster), for tests and
// metrics.
func (m *Manager) Catalog() *catalog.Catalog {
	if m.cluster == nil {
		return nil
	}
	return m.cluster.cat
}

// stopCluster leaves the cluster while the dispatcher still runs: the
// catalog lease is revoked (this node's advertisements go at once), peer
// control stops (every open transfer is released, its pins dropped
// through the dispatcher), and the data listener closes.
func (m *Manager) stopCluster() {
	c := m.cluster
	if c == nil {
		return
	}
	c.adv.cat.Store(nil)
	c.remote.cat.Store(nil)
	if c.cat != nil {
		if err := c.cat.Close(); err != nil {
			c.log.Warn("catalog close", slog.Any("err", err))
		}
	}
	if c.ctl != nil {
		c.ctl.Close()
	}
	if c.data != nil {
		c.data.Close()
	}
}

// closeEngine closes the requester side once the cache stopped (no fetch
// runs any more).
func (m *Manager) closeEngine() {
	if c := m.cluster; c != nil {
		c.remote.close()
		c.engine.Close()
	}
}

// advertiser forwards the tiers' advertisements to the catalog once it is
// open (tier.Advertiser; dispatcher goroutine).
type advertiser struct {
	cat atomic.Pointer[catalog.Catalog]
}

func (a *advertiser) Advertise(ns abi.Namespace, hashes []abi.BlockHash) {
	if c := a.cat.Load(); c != nil {
		c.Advertise(ns, hashes)
	}
}

func (a *advertiser) Withdraw(ns abi.Namespace, hashes []abi.BlockHash) {
	if c := a.cat.Load(); c != nil {
		c.Withdraw(ns, hashes)
	}
}
