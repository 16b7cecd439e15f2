package peer

import (
	"cmp"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/orbitkv/orbitkv/gocore/limit"
)

// ServerSpec configures the peer control server of one Manager; a plain
// value (Validate checks it without touching the network).
type ServerSpec struct {
	// Listen is the host:port to serve on ("127.0.0.1:0" picks a port).
	Listen string
	// TLS is the server side of the cluster's mutual TLS (LoadTLS's server
	// config): a certificate, ClientCAs and tls.RequireAndVerifyClientCert.
	// Serve uses a clone at TLS 1.3 at least.
	TLS *tls.Config
	// Source pins the blocks transfers serve (the Manager's dispatcher).
	Source Source
	// Lookup answers Lookup calls (the Manager's KV events); nil: they
	// answer ErrUnavailable, the events being off.
	Lookup Lookup
	// Transfer is the transfer engine's server the runs are registered on.
	Transfer SegmentServer
	// Epoch is this Manager's epoch (at least 1); OpenTransfer refuses any
	// other expect_epoch.
	Epoch uint64
	// NodeID is this Manager's node id (CheckNodeID), for its logs.
	NodeID string
	// MaxTransferBytes is the most bytes one transfer pins (0:
	// DefaultMaxTransferBytes); a request's max_bytes above it is lowered.
	MaxTransferBytes uint64
	// MaxPeerTransfers is how many transfers one peer (node id) may hold
	// open at once (0: DefaultMaxPeerTransfers).
	MaxPeerTransfers int
	// MaxPeerBytes is how many bytes one peer's open transfers may pin
	// together (0: DefaultMaxPeerBytes); at least MaxTransferBytes.
	MaxPeerBytes uint64
	// LeaseTTL is how long a transfer lasts after its answer unless released
	// first (0: DefaultLeaseTTL).
	LeaseTTL time.Duration
	// MaxConns bounds the open connections of peer control, TLS handshakes
	// included (0: DefaultMaxConns): past it a new connection waits in the
	// kernel's accept queue, holding no descriptor here, until one closes
	// or, when one is still in its TLS handshake, one such is closed to
	// admit it (as for MaxHandshakes).
	MaxConns int
	// MaxHandshakes bounds the connections still in their TLS handshake
	// (0: DefaultMaxHandshakes, or MaxConns if less; at most MaxConns):
	// past it one is closed (its handshake fails) to admit a new one: the
	// oldest that has sent no byte yet, else the oldest, of the host with
	// the most in their handshake. A connection leaves the bound once
	// mutual TLS authenticated it and is never closed for a newcomer, so
	// clients that never send a TLS byte hold at most MaxHandshakes
	// descriptors however fast they redial.
	MaxHandshakes int
	// MaxHandshakesPerHost bounds the connections in their TLS handshake
	// from one remote IP address (an IPv4-mapped IPv6 one as IPv4; 0:
	// DefaultMaxHandshakesPerHost, or MaxHandshakes if less; at most
	// MaxHandshakes): past it the host's own one is closed (chosen as for
	// MaxHandshakes) to admit its new one.
	MaxHandshakesPerHost int
	// MaxConcurrentStreams bounds the calls in flight on one connection
	// (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; 0:
	// DefaultMaxConcurrentStreams); a client queues the calls past it.
	MaxConcurrentStreams int
	// Logger gets connections, refusals and contract breaks (nil:
	// slog.Default()).
	Logger *slog.Logger
}

// Defaults of ServerSpec's zero fields.
const (
	DefaultMaxTransferBytes = 64 << 20
	DefaultMaxPeerTransfers = 64
	DefaultMaxPeerBytes     = 256 << 20
	DefaultLeaseTTL         = 5 * time.Second
	// DefaultMaxConns is four times the nodes of a large cluster: each peer
	// holds one connection to a node, more only while it redials.
	DefaultMaxConns = 256
	// DefaultMaxHandshakes is a quarter of DefaultMaxConns: a handshake
	// takes milliseconds, so 64 cover a cluster's nodes all redialling at
	// once after a restart.
	DefaultMaxHandshakes = 64
	// DefaultMaxHandshakesPerHost is half of DefaultMaxHandshakes: one host
	// holds at most half the pool, and one redialling from a peer's own
	// address must win a race of 32 accepts against the peer's hello.
	DefaultMaxHandshakesPerHost = 32
	// DefaultMaxConcurrentStreams is twice DefaultMaxPeerTransfers: a
	// peer's calls beyond its transfers' bound are refused anyway.
	DefaultMaxConcurrentStreams = 128
)

// The limits of ServerSpec's fields.
var (
	MaxTransferBytesRange  = limit.Range[uint64]{Field: "peer.MaxTransferBytes", Min: 4 << 10, Max: 64 << 30, Bytes: true, Zero: "64MiB"}
	MaxPeerTransfersRange  = limit.Range[int]{Field: "peer.MaxPeerTransfers", Min: 1, Max: 1 << 16, Zero: "64"}
	MaxPeerBytesRange      = limit.Range[uint64]{Field: "peer.MaxPeerBytes", Min: 4 << 10, Max: 1 << 40, Bytes: true, Zero: "256MiB"}
	LeaseTTLRange          = limit.Range[time.Duration]{Field: "peer.LeaseTTL", Min: 10 * time.Millisecond, Max: 10 * time.Minute, Zero: "5s"}
	MaxConnsRange          = limit.Range[int]{Field: "peer.MaxConns", Min: 1, Max: 65536, Zero: "256"}
	MaxHandshakesRange     = limit.Range[int]{Field: "peer.MaxHandshakes", Min: 1, Max: 65536, Zero: "64"}
	MaxHandshakesHostRange = limit.Range[int]{Field: "peer.MaxHandshakesPerHost", Min: 1, Max: 65536, Zero: "32"}
	MaxStreamsRange        = limit.Range[int]{Field: "peer.MaxConcurrentStreams", Min: 1, Max: 1 << 16, Zero: "128"}
)

// withDefaults is s with its zero fields at their defaults.
func (s ServerSpec) withDefaults() ServerSpec {
	s.MaxTransferBytes = cmp.Or(s.MaxTransferBytes, DefaultMaxTransferBytes)
	s.MaxPeerTransfers = cmp.Or(s.MaxPeerTransfers, DefaultMaxPeerTransfers)
	s.MaxPeerBytes = cmp.Or(s.MaxPeerBytes, DefaultMaxPeerBytes)
	s.LeaseTTL = cmp.Or(s.LeaseTTL, DefaultLeaseTTL)
	s.MaxConns = cmp.Or(s.MaxConns, DefaultMaxConns)
	s.MaxHandshakes = cmp.Or(s.MaxHandshakes, min(DefaultMaxHandshakes, s.MaxConns))
	s.MaxHandshakesPerHost = cmp.Or(s.MaxHandshakesPerHost, min(DefaultMaxHandshakesPerHost, s.MaxHandshakes))
	s.MaxConcurrentStreams = cmp.Or(s.MaxConcurrentStreams, DefaultMaxConcurrentStreams)
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return s
}

// Validate checks every field and returns all the *limit.Error values
// found (errors.Join), nil when s is good.
func (s ServerSpec) Validate() error {
	errs := []error{
		s.CheckLimits(),
		limit.Check(s.Epoch >= 1, "peer.Epoch", s.Epoch, "at least 1"),
		limit.Check(s.Source != nil, "peer.Source", "nil", "the Manager's Source"),
		limit.Check(s.Transfer != nil, "peer.Transfer", "nil", "the transfer engine's server"),
		checkTLSServer(s.TLS),
	}
	if err := CheckNodeID(s.NodeID); err != nil {
		errs = append(errs, &limit.Error{Field: "peer.NodeID", Value: s.NodeID, Want: nodeIDWant})
	}
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		errs = append(errs, &limit.Error{Field: "peer.Listen", Value: s.Listen, Want: "host:port"})
	}
	return errors.Join(errs...)
}

// CheckLimits checks the numeric limits alone (MaxTransferBytes,
// MaxPeerTransfers, MaxPeerBytes and MaxPeerBytes ≥ MaxTransferBytes,
// LeaseTTL, MaxConns, MaxHandshakes ≤ MaxConns, MaxHandshakesPerHost ≤
// MaxHandshakes, MaxConcurrentStreams), which need nothing live, so
// that a command line is checked before anything starts; Validate
// includes it. It returns the *limit.Error values found (errors.Join).
func (s ServerSpec) CheckLimits() error {
	errs := []error{
		MaxTransferBytesRange.Check(s.MaxTransferBytes),
		MaxPeerTransfersRange.Check(s.MaxPeerTransfers),
		MaxPeerBytesRange.Check(s.MaxPeerBytes),
		LeaseTTLRange.Check(s.LeaseTTL),
		MaxConnsRange.Check(s.MaxConns),
		MaxStreamsRange.Check(s.MaxConcurrentStreams),
		MaxHandshakesRange.Check(s.MaxHandshakes), MaxHandshakesHostRange.Check(s.MaxHandshakesPerHost),
	}
	if d := s.withDefaults(); d.MaxHandshakes > d.MaxConns && s.MaxHandshakes > 0 {
		r := MaxHandshakesRange
		r.Max, r.Note = d.MaxConns, "at most peer.MaxConns"
		errs = append(errs, r.CheckSet(d.MaxHandshakes))
	}
	if d := s.withDefaults(); d.MaxHandshakesPerHost > d.MaxHandshakes && s.MaxHandshakesPerHost > 0 {
		r := MaxHandshakesHostRange
		r.Max, r.Note = d.MaxHandshakes, "at most peer.MaxHandshakes"
		errs = append(errs, r.CheckSet(d.MaxHandshakesPerHost))
	}
	if d := s.withDefaults(); d.MaxPeerBytes < d.MaxTransferBytes {
		r := MaxPeerBytesRange
		r.Min, r.Note = d.MaxTransferBytes, "at least peer.MaxTransferBytes"
		errs = append(errs, r.CheckSet(d.MaxPeerBytes))
	}
	return errors.Join(errs...)
}

// checkTLSServer refuses a server config that would let a peer in without
// a client certificate the CA signed.
func checkTLSServer(c *tls.Config) error {
	const f = "peer.TLS"
	switch {
	case c == nil:
		return &limit.Error{Field: f, Value: "nil", Want: "the server side of mutual TLS (LoadTLS)"}
	case c.ClientAuth != tls.RequireAndVerifyClientCert:
		return &limit.Error{Field: f + ".ClientAuth", Value: c.ClientAuth.String(), Want: "RequireAndVerifyClientCert"}
	case c.ClientCAs == nil:
		return &limit.Error{Field: f + ".ClientCAs", Value: "nil", Want: "the cluster CA"}
	case len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetConfigForClient == nil:
		return &limit.Error{Field: f + ".Certificates", Value: "none", Want: "this node's certificate"}
	case c.MinVersion != 0 && c.MinVersion < tls.VersionTLS13:
		return &limit.Error{Field: f + ".MinVersion", Value: tls.VersionName(c.MinVersion), Want: "TLS 1.3"}
	}
	return nil
}
