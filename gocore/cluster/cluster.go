package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/admission"
	"github.com/orbitkv/orbitkv/gocore/catalog"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/peer"
	"github.com/orbitkv/orbitkv/gocore/transfer"
	"github.com/orbitkv/orbitkv/gocore/transfer/requester"
)

// catalogOpenTimeout bounds opening the catalog at Start (etcd reachable,
// membership registered).
const catalogOpenTimeout = 10 * time.Second

// Cluster is the live part of a Spec (package doc).
type Cluster struct {
	spec    Spec
	log     *slog.Logger
	onConn  func(conn net.Conn, peer string)
	engine  *requester.Engine
	fetcher *Fetcher
	adv     *Advertiser
	data    *transfer.Server
	ctl     *peer.Server
	cat     *catalog.Catalog
	// live holds ctl once it serves, for Stats (read from any goroutine).
	live atomic.Pointer[peer.Server]
}

// New makes the transfer engine and the Fetcher and Advertiser the tiers
// take at their creation; Start joins the cluster. onConn, when set,
// hears of every transfer data connection with the peer it talks to: the
// node id on the requester side, the host address on the source side (a
// data connection is admitted by the capability its first READ carries,
// after it is accepted, so the requester's node is not known yet; never
// the ephemeral port, which would make a label per connection). The
// spec must have passed Validate.
func New(s Spec, log *slog.Logger, onConn func(conn net.Conn, peer string)) (*Cluster, error) {
	c := &Cluster{spec: s, log: log.With(slog.String("component", "cluster")), onConn: onConn, adv: &Advertiser{}}
	es := s.Engine
	if onConn != nil {
		es.OnConn = func(conn net.Conn, to string) { onConn(conn, c.fetcher.nodeOf(to)) }
	}
	if es.Logger == nil {
		es.Logger = log
	}
	eng, err := requester.NewEngine(es)
	if err != nil {
		return nil, err
	}
	c.engine = eng
	c.fetcher = newFetcher(eng, s.ClientTLS, log)
	return c, nil
}

// Fetcher is the peer tier's network side; Advertiser the tiers'
// advertisements' way to the catalog.
func (c *Cluster) Fetcher() *Fetcher       { return c.fetcher }
func (c *Cluster) Advertiser() *Advertiser { return c.adv }

// Start registers ram (the RAM tier's whole mapping) with the transfer
// engine, binds the data and peer control listeners, serves this node's
// blocks to peers through pins, and opens the catalog under epoch with
// capacityBytes (the RAM tier's). The dispatcher must run: peer control
// pins through it. A listener that cannot bind, or a catalog that cannot
// be opened (etcd unreachable or refusing), is a *limit.Refused naming its
// field; on any error nothing stays bound.
func (c *Cluster) Start(ram []byte, pins Pins, epoch, capacityBytes uint64) error {
	if err := c.engine.RegisterLocalMemory(ram); err != nil {
		return fmt.Errorf("cluster: registering the RAM tier with the transfer engine: %w", err)
	}
	ts := c.spec.Transfer
	ts.Addr = c.spec.TransferListen
	if ts.Logger == nil {
		ts.Logger = c.log
	}
	if c.onConn != nil {
		ts.OnConn = func(conn net.Conn) { c.onConn(conn, admission.HostOf(conn.RemoteAddr())) }
	}
	var err error
	if c.data, err = transfer.Listen(ts); err != nil {
		return &limit.Refused{Field: "manager.Cluster.TransferListen", Value: ts.Addr, Err: err}
	}
	ps := c.spec.Peer
	ps.Listen, ps.TLS, ps.Transfer, ps.Epoch, ps.NodeID = c.spec.PeerListen, c.spec.ServerTLS, c.data, epoch, c.spec.NodeID
	ps.Source = source{pins}
	if ps.Logger == nil {
		ps.Logger = c.log
	}
	if c.ctl, err = peer.Serve(ps); err != nil {
		c.data.Close()
		return &limit.Refused{Field: "manager.Cluster.PeerListen", Value: ps.Listen, Err: err}
	}
	ks := c.spec.Catalog
	ks.Self = catalog.Member{NodeID: c.spec.NodeID, PeerAddr: c.ctl.Addr(), Epoch: epoch, CapacityBytes: capacityBytes}
	if ks.Logger == nil {
		ks.Logger = c.log
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogOpenTimeout)
	defer cancel()
	if c.cat, err = catalog.Open(ctx, ks); err != nil {
		c.ctl.Close()
		c.data.Close()
		return &limit.Refused{Field: "manager.Cluster.Catalog.Endpoints", Value: strings.Join(ks.Endpoints, ","), Err: err}
	}
	c.fetcher.cat.Store(c.cat)
	c.adv.cat.Store(c.cat)
	c.live.Store(c.ctl)
	c.log.Info("start: cluster joined", slog.String("node", c.spec.NodeID), slog.String("peer_addr", c.ctl.Addr()),
		slog.String("data_addr", c.data.Addr()), slog.Any("etcd", ks.Endpoints))
	return nil
}

// PeerAddr is peer control's bound host:port ("" before Start).
func (c *Cluster) PeerAddr() string {
	if c.ctl == nil {
		return ""
	}
	return c.ctl.Addr()
}

// Catalog is the cluster catalog (nil before Start), for tests.
func (c *Cluster) Catalog() *catalog.Catalog { return c.cat }

// Stats are the cluster's figures for /metrics; zero values for a part not
// serving yet.
type Stats struct {
	Catalog  catalog.Stats
	Peer     peer.Stats
	Transfer transfer.ServerStats
}

// Stats samples the catalog, peer control and the data server; safe from
// any goroutine.
func (c *Cluster) Stats() Stats {
	var s Stats
	if cat := c.fetcher.cat.Load(); cat != nil {
		s.Catalog = cat.Stats()
	}
	if ctl := c.live.Load(); ctl != nil {
		s.Peer = ctl.Stats()
		s.Transfer = c.data.Stats() // set before live was stored
	}
	return s
}

// Leave leaves the cluster while the dispatcher still runs: the catalog
// lease is revoked (this node's advertisements go at once), peer control
// stops (every open transfer is released, its pins dropped through the
// dispatcher), and the data listener closes.
func (c *Cluster) Leave() {
	c.adv.cat.Store(nil)
	c.fetcher.cat.Store(nil)
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

// Close closes the requester side once the cache stopped (no fetch runs
// any more): releases in flight finish, peer clients and the engine close.
func (c *Cluster) Close() {
	c.fetcher.close()
	c.engine.Close()
}
