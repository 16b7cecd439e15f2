package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/orbitkv/orbitkv/gocore/catalog"
	"github.com/orbitkv/orbitkv/gocore/cluster"
	"github.com/orbitkv/orbitkv/gocore/manager"
	"github.com/orbitkv/orbitkv/gocore/peer"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/transfer"
	"github.com/orbitkv/orbitkv/gocore/transfer/requester"
)

// clusterConfig holds the cluster settings (cluster.Spec) as text
// and values before they become a Spec.
type clusterConfig struct {
	nodeID         string
	etcdEndpoints  string
	etcdPrefix     string
	peerListen     string
	transferListen string
	peerCA         string
	peerCert       string
	peerKey        string
	advertiseBytes string
	transferBytes  string
	peerBytes      string
	fetchTimeout   time.Duration
	transferLease  time.Duration
	catalogTTL     time.Duration
	advertiseEvery time.Duration
	rails          int
	sliceBytes     string
	transferHost   int
	transferProve  time.Duration
	peerConns      int
	peerShakes     int
	peerShakesHost int
	peerStreams    int
}

// clusterFlagOf maps the cluster Spec fields to their flags (merged into
// flagOf).
var clusterFlagOf = map[string]string{
	"manager.Cluster.NodeID": "node-id", "manager.Cluster.Catalog.Endpoints": "etcd-endpoints",
	"manager.Cluster.PeerListen": "peer-listen", "manager.Cluster.TransferListen": "transfer-listen",
	"manager.Cluster.ServerTLS": "peer-cert", "catalog.Prefix": "etcd-prefix",
	"catalog.AdvertiseBudgetBytes": "advertise-budget", "catalog.LeaseTTL": "catalog-lease-ttl",
	"catalog.BatchInterval": "advertise-interval",
	"tier.PeerTimeout":      "peer-fetch-timeout", "peer.MaxTransferBytes": "peer-max-transfer-bytes",
	"peer.MaxPeerBytes": "peer-max-peer-bytes", "peer.LeaseTTL": "peer-transfer-lease",
	"requester.EngineSpec.Rails": "transfer-rails", "requester.EngineSpec.SliceBytes": "transfer-slice-bytes",
	"transfer.ServerSpec.MaxConnsPerHost": "transfer-max-conns-per-host",
	"transfer.ServerSpec.ProveTimeout":    "transfer-prove-timeout",
	"peer.MaxConns":                       "peer-max-conns", "peer.MaxConcurrentStreams": "peer-max-streams",
	"peer.MaxHandshakes": "peer-max-handshakes", "peer.MaxHandshakesPerHost": "peer-max-handshakes-per-host",
}

func init() {
	for k, v := range clusterFlagOf {
		flagOf[k] = v
	}
}

// defineClusterFlags declares the cluster flags on fs, bound to c.
func defineClusterFlags(fs *pflag.FlagSet, c *clusterConfig) {
	fs.StringVar(&c.nodeID, "node-id", "", "join a cluster as this node `id` (1..64 of A-Z a-z 0-9 . _ -, stable across restarts; the common name of --peer-cert); empty: a single host, no cluster")
	fs.StringVar(&c.etcdEndpoints, "etcd-endpoints", "", "comma-separated etcd client `endpoints` (host:port or http(s)://host:port) of the cluster catalog; needed with --node-id")
	fs.StringVar(&c.etcdPrefix, "etcd-prefix", catalog.DefaultPrefix, "etcd key `prefix` of the catalog, shared by every Manager of the cluster")
	fs.StringVar(&c.peerListen, "peer-listen", "127.0.0.1:7472", "`host:port` of peer control (gRPC, mutual TLS); the address is advertised as given, so name an address peers can dial (not 0.0.0.0)")
	fs.StringVar(&c.transferListen, "transfer-listen", "127.0.0.1:7473", "`host:port` of the transfer engine's data connections (each READ carries a per-transfer capability issued over peer control); advertised as given")
	fs.StringVar(&c.peerCA, "peer-ca", "", "cluster CA certificate `file` (PEM): peers must present a certificate it signed (orbitkvctl certs makes one)")
	fs.StringVar(&c.peerCert, "peer-cert", "", "this node's certificate `file` (PEM), signed by --peer-ca, for both sides of mutual TLS")
	fs.StringVar(&c.peerKey, "peer-key", "", "this node's private key `file` (PEM, mode 0600)")
	fs.StringVar(&c.advertiseBytes, "advertise-budget", "16MiB", "bytes of inventory keys and values this node may hold in etcd (`size`, 4KiB..1GiB); blocks past it are not advertised")
	fs.StringVar(&c.transferBytes, "peer-max-transfer-bytes", "64MiB", "most bytes one transfer pins, served to a peer or asked of one (`size`, 4KiB..64GiB)")
	fs.StringVar(&c.peerBytes, "peer-max-peer-bytes", "256MiB", "most bytes one peer's open transfers may pin together on this node (`size`, at least --peer-max-transfer-bytes)")
	fs.DurationVar(&c.fetchTimeout, "peer-fetch-timeout", tier.DefaultPeerTimeout, "deadline of one fetch from a peer (`duration`, 10ms..1m); past it the blocks are a miss")
	fs.DurationVar(&c.transferLease, "peer-transfer-lease", peer.DefaultLeaseTTL, "how long a transfer served to a peer pins its blocks unless released first (`duration`, 10ms..10m)")
	fs.DurationVar(&c.catalogTTL, "catalog-lease-ttl", catalog.DefaultLeaseTTL, "membership lease of this node in etcd (`duration`, whole seconds, 2s..5m): a Manager that dies disappears this long after")
	fs.DurationVar(&c.advertiseEvery, "advertise-interval", catalog.DefaultBatchInterval, "how often advertisements and withdrawals are written to etcd, one transaction per batch (`duration`, 10ms..1m): a block published here is visible to peers about this long after")
	fs.IntVar(&c.rails, "transfer-rails", 4, "data connections per peer (`count`, 1..64)")
	fs.StringVar(&c.sliceBytes, "transfer-slice-bytes", "256KiB", "most bytes one READ asks for (`size`, 4KiB..); a block is cut into slices spread over the rails")
	fs.IntVar(&c.transferHost, "transfer-max-conns-per-host", 64, "most data connections open from one remote IP address (`count`, 1..65536; 256 in all): a host without a capability cannot take them all")
	fs.DurationVar(&c.transferProve, "transfer-prove-timeout", 5*time.Second, "how long a data connection may stay open before one of its READs is admitted (`duration`, 1ms..1h): longer only keeps connections without a capability, since a requester sends its first READ right after it connects; half of the 256 connections at most are such, the oldest closed for a new one")
	fs.IntVar(&c.peerConns, "peer-max-conns", peer.DefaultMaxConns, "most peer control connections open, TLS handshakes included (`count`, 1..65536); more wait in the kernel's accept queue")
	fs.IntVar(&c.peerShakes, "peer-max-handshakes", peer.DefaultMaxHandshakes, "most peer control connections still in their TLS handshake (`count`, 1..--peer-max-conns): past it the oldest of the host with the most is closed for the new one, so connections without a certificate cannot keep peers out")
	fs.IntVar(&c.peerShakesHost, "peer-max-handshakes-per-host", peer.DefaultMaxHandshakesPerHost, "most peer control connections in their TLS handshake from one remote IP address (`count`, 1..--peer-max-handshakes): past it that host's oldest is closed for its new one")
	fs.IntVar(&c.peerStreams, "peer-max-streams", peer.DefaultMaxConcurrentStreams, "most peer control calls in flight on one connection (`count`, 1..65536; HTTP/2 max concurrent streams)")
}

// clusterSpec turns the cluster settings into s.Cluster (nil without
// --node-id); the TLS files are loaded here so a bad file is named with
// the other errors.
func clusterSpec(o *options, k *checks, s *manager.Spec) {
	c := &o.c.cluster
	advertise := k.size("advertise-budget", c.advertiseBytes, "16MiB, 256MiB")
	maxTransfer := k.size("peer-max-transfer-bytes", c.transferBytes, "64MiB, 1GiB")
	maxPeer := k.size("peer-max-peer-bytes", c.peerBytes, "256MiB, 4GiB")
	slice := k.size("transfer-slice-bytes", c.sliceBytes, "256KiB, 1MiB")
	k.add(errors.Join(
		catalog.BudgetRange.CheckSet(advertise),
		peer.MaxTransferBytesRange.CheckSet(maxTransfer), peer.MaxPeerBytesRange.CheckSet(maxPeer),
		peer.LeaseTTLRange.CheckSet(c.transferLease), catalog.LeaseTTLRange.CheckSet(c.catalogTTL),
		catalog.BatchIntervalRange.CheckSet(c.advertiseEvery),
		tier.PeerTimeoutRange.CheckSet(c.fetchTimeout), requester.RailsRange.CheckSet(c.rails),
		transfer.MaxConnsPerHostRange.CheckSet(c.transferHost), transfer.ProveTimeoutRange.CheckSet(c.transferProve),
		peer.MaxConnsRange.CheckSet(c.peerConns), peer.MaxStreamsRange.CheckSet(c.peerStreams),
		peer.MaxHandshakesRange.CheckSet(c.peerShakes), peer.MaxHandshakesHostRange.CheckSet(c.peerShakesHost),
	))
	peerSpec := peer.ServerSpec{MaxTransferBytes: maxTransfer, MaxPeerBytes: maxPeer, LeaseTTL: c.transferLease,
		MaxConns: c.peerConns, MaxConcurrentStreams: c.peerStreams, MaxHandshakes: c.peerShakes, MaxHandshakesPerHost: c.peerShakesHost}
	k.add(peerSpec.CheckLimits()) // what Serve would refuse, refused before anything starts
	if c.nodeID == "" {
		for _, name := range []string{"etcd-endpoints", "peer-ca", "peer-cert", "peer-key"} {
			if o.fs.Changed(name) {
				k.fail(name, strconv.Quote(o.fs.Lookup(name).Value.String()), "needs --node-id (the node's id in the cluster)")
			}
		}
		return
	}
	for _, name := range []string{"peer-listen", "transfer-listen"} {
		addr := o.fs.Lookup(name).Value.String()
		host, port, err := net.SplitHostPort(addr)
		_, perr := strconv.ParseUint(port, 10, 16)
		switch {
		case err != nil:
			k.fail(name, strconv.Quote(addr), "want host:port")
		case perr != nil:
			k.fail(name, strconv.Quote(addr), "want a port number 0..65535 after the colon")
		case host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified():
			k.fail(name, strconv.Quote(addr), "want an address peers can dial (it is advertised as given), not a wildcard")
		}
	}
	var endpoints []string
	for _, e := range strings.Split(c.etcdEndpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			endpoints = append(endpoints, e)
		}
	}
	cs := &cluster.Spec{NodeID: c.nodeID, PeerListen: c.peerListen, TransferListen: c.transferListen,
		Catalog: catalog.Spec{Endpoints: endpoints, Prefix: c.etcdPrefix, AdvertiseBudgetBytes: advertise, LeaseTTL: c.catalogTTL,
			BatchInterval: c.advertiseEvery},
		Peer:     peerSpec,
		Engine:   requester.EngineSpec{Rails: c.rails, SliceBytes: int(min(slice, 1<<30))},
		Transfer: transfer.ServerSpec{MaxConnsPerHost: c.transferHost, ProveTimeout: c.transferProve},
	}
	tlsFlags := []struct{ name, file string }{{"peer-ca", c.peerCA}, {"peer-cert", c.peerCert}, {"peer-key", c.peerKey}}
	for _, f := range tlsFlags {
		if f.file == "" {
			k.fail(f.name, `""`, "--node-id needs --peer-ca, --peer-cert and --peer-key (orbitkvctl certs makes them)")
		}
	}
	if c.peerCA != "" && c.peerCert != "" && c.peerKey != "" {
		srv, cli, err := peer.LoadTLS(c.peerCA, c.peerCert, c.peerKey)
		var fe *peer.TLSFileError
		switch {
		case errors.As(err, &fe):
			f := tlsFlags[fe.File-peer.TLSFileCA]
			k.fail(f.name, strconv.Quote(f.file), err.Error())
		case err != nil:
			k.fail("peer-cert", strconv.Quote(c.peerCert), err.Error())
		default:
			// Peers know this node by its certificate's common name: a
			// --node-id that differs would advertise one id and answer
			// with another.
			if id, err := peer.ConfigNodeID(srv); peer.CheckNodeID(c.nodeID) == nil && (err != nil || id != c.nodeID) {
				k.fail("node-id", strconv.Quote(c.nodeID), fmt.Sprintf("--peer-cert %s names node %q (its subject common name): the two must be the same", c.peerCert, id))
			}
		}
		cs.ServerTLS, cs.ClientTLS = srv, cli
	}
	if s.Cache != nil {
		s.Cache.Tiers.PeerTimeout = c.fetchTimeout
		s.Cache.Tiers.PeerRunBytes = maxTransfer
	}
	s.Cluster = cs
}
