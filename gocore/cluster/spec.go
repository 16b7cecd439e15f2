package cluster

import (
	"crypto/tls"
	"errors"
	"net"

	"github.com/orbitkv/orbitkv/gocore/catalog"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/peer"
	"github.com/orbitkv/orbitkv/gocore/transfer"
	"github.com/orbitkv/orbitkv/gocore/transfer/requester"
)

// Spec is the Manager's part in a cluster; a plain value. Errors name its
// fields as the Manager's Spec reaches them (manager.Cluster.*).
type Spec struct {
	// NodeID names this node in the catalog and in its certificate
	// (peer.CheckNodeID: 1..64 of [A-Za-z0-9._-]).
	NodeID string
	// Catalog is the etcd catalog (Endpoints at least); Start fills Self
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
	// MaxPeerTransfers, LeaseTTL); Start fills the rest.
	Peer peer.ServerSpec
	// Engine and Transfer are the transfer engine's requester and source
	// sides (Rails, SliceBytes, ...); New and Start fill OnConn, Addr and
	// Logger.
	Engine   requester.EngineSpec
	Transfer transfer.ServerSpec
}

// Validate checks what New and Start cannot fill in; each error names its
// field.
func (c *Spec) Validate() error {
	errs := []error{
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
