package catalog

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/orbitkv/orbitkv/gocore/limit"
)

// DefaultPrefix is Spec.Prefix's default: every key of the catalog lies
// under it.
const DefaultPrefix = "/orbitkv/"

// DefaultShards is Spec.Shards's default.
const DefaultShards = 64

// DefaultAdvertiseBudgetBytes is Spec.AdvertiseBudgetBytes's default:
// about a million blocks of one namespace (16 bytes each, doc.go).
const DefaultAdvertiseBudgetBytes = 16 << 20

// DefaultLeaseTTL is Spec.LeaseTTL's default.
const DefaultLeaseTTL = 10 * time.Second

// DefaultBatchInterval is Spec.BatchInterval's default.
const DefaultBatchInterval = time.Second

// DefaultDialTimeout is Spec.DialTimeout's default.
const DefaultDialTimeout = 3 * time.Second

// Limits of the Spec's fields and of what they become in etcd (doc.go
// gives the layout they bound).
const (
	MaxEndpoints     = 32
	MaxPrefixBytes   = 128
	MaxNodeIDBytes   = 64
	MaxPeerAddrBytes = 255
	// MaxShards bounds Spec.Shards; a shard number is 4 hex digits in a key.
	MaxShards = 4096
	// MaxShardValueBytes bounds one shard's value, below etcd's default
	// request limit (--max-request-bytes, 1.5 MiB) so that one shard
	// always fits one request.
	MaxShardValueBytes = 1 << 20
)

// The numeric limits of the Spec, declared once (limit.Range).
var (
	ShardsRange        = limit.Range[int]{Field: "catalog.Shards", Min: 1, Max: MaxShards, Zero: strconv.Itoa(DefaultShards)}
	BudgetRange        = limit.Range[uint64]{Field: "catalog.AdvertiseBudgetBytes", Min: 4 << 10, Max: 1 << 30, Bytes: true, Zero: limit.Size(DefaultAdvertiseBudgetBytes)}
	LeaseTTLRange      = limit.Range[time.Duration]{Field: "catalog.LeaseTTL", Min: 2 * time.Second, Max: 5 * time.Minute, Zero: limit.Format(DefaultLeaseTTL), Note: "whole seconds"}
	BatchIntervalRange = limit.Range[time.Duration]{Field: "catalog.BatchInterval", Min: 10 * time.Millisecond, Max: time.Minute, Zero: limit.Format(DefaultBatchInterval)}
	DialTimeoutRange   = limit.Range[time.Duration]{Field: "catalog.DialTimeout", Min: 100 * time.Millisecond, Max: time.Minute, Zero: limit.Format(DefaultDialTimeout)}
)

// Member is one Manager of the cluster as the catalog lists it.
type Member struct {
	// NodeID names the node: 1..MaxNodeIDBytes of [A-Za-z0-9._-], stable
	// across restarts of its Manager.
	NodeID string
	// PeerAddr is the host:port of the node's peer control (gRPC, mutual
	// TLS), at most MaxPeerAddrBytes.
	PeerAddr string
	// Epoch is the Manager process's epoch (nonzero); a restarted Manager
	// has a larger one.
	Epoch uint64
	// CapacityBytes is the bytes the node holds for the cluster (its RAM
	// tier), informational.
	CapacityBytes uint64
}

// Spec configures a Catalog; a plain value, checked by Validate.
type Spec struct {
	// Endpoints are the etcd client endpoints, host:port or
	// http(s)://host:port (1..MaxEndpoints).
	Endpoints []string
	// Prefix is the key prefix of the whole catalog; it starts and ends
	// with "/", at most MaxPrefixBytes printable ASCII ("": DefaultPrefix).
	// Every Manager of one cluster uses the same prefix.
	Prefix string
	// Self is this Manager: its membership record.
	Self Member
	// Shards is the number of inventory shards (1..MaxShards; 0:
	// DefaultShards). It fixes which key an advertisement lands in;
	// Managers with different values still read each other (each shard
	// value names its shard count).
	Shards int
	// AdvertiseBudgetBytes bounds the bytes of inventory keys and values
	// this node holds in etcd (doc.go, "Sizes"); past it Advertise drops
	// blocks and counts them (Stats.OverBudgetBlocks).
	AdvertiseBudgetBytes uint64
	// LeaseTTL is the membership lease's time to live, whole seconds: a
	// Manager that dies disappears from every other's catalog this long
	// after its last keep-alive.
	LeaseTTL time.Duration
	// BatchInterval is how often changed shards are written to etcd under
	// load, one transaction per batch of them; the first change after a
	// whole interval without a flush is written at once.
	BatchInterval time.Duration
	// DialTimeout bounds every etcd call the catalog makes in the
	// background, and Close's revoke.
	DialTimeout time.Duration
	// TLS, when set, is the client TLS configuration to etcd.
	TLS *tls.Config
	// Logger receives registration, lease, watch and decode events (nil:
	// slog.Default()).
	Logger *slog.Logger
}

// withDefaults returns s with every zero field that has a default set.
func (s Spec) withDefaults() Spec {
	s.Prefix = cmp.Or(s.Prefix, DefaultPrefix)
	s.Shards = cmp.Or(s.Shards, DefaultShards)
	s.AdvertiseBudgetBytes = cmp.Or(s.AdvertiseBudgetBytes, DefaultAdvertiseBudgetBytes)
	s.LeaseTTL = cmp.Or(s.LeaseTTL, DefaultLeaseTTL)
	s.BatchInterval = cmp.Or(s.BatchInterval, DefaultBatchInterval)
	s.DialTimeout = cmp.Or(s.DialTimeout, DefaultDialTimeout)
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return s
}

// Validate checks s; each field outside its limit is a *limit.Error
// naming it (catalog.Field), all of them joined.
func (s Spec) Validate() error {
	errs := []error{
		ShardsRange.Check(s.Shards),
		BudgetRange.Check(s.AdvertiseBudgetBytes),
		LeaseTTLRange.Check(s.LeaseTTL),
		limit.Check(s.LeaseTTL%time.Second == 0, "catalog.LeaseTTL", s.LeaseTTL, "whole seconds"),
		BatchIntervalRange.Check(s.BatchInterval),
		DialTimeoutRange.Check(s.DialTimeout),
		checkEndpoints(s.Endpoints),
		checkPrefix(s.Prefix),
		checkNodeID("catalog.Self.NodeID", s.Self.NodeID),
		checkPeerAddr("catalog.Self.PeerAddr", s.Self.PeerAddr),
		limit.Check(s.Self.Epoch != 0, "catalog.Self.Epoch", s.Self.Epoch, "nonzero"),
	}
	return errors.Join(errs...)
}

func checkEndpoints(eps []string) error {
	if len(eps) == 0 || len(eps) > MaxEndpoints {
		return &limit.Error{Field: "catalog.Endpoints", Value: len(eps), Want: fmt.Sprintf("1..%d endpoints", MaxEndpoints)}
	}
	for i, ep := range eps {
		hostport := ep
		if scheme, rest, ok := strings.Cut(ep, "://"); ok {
			if scheme != "http" && scheme != "https" {
				return &limit.Error{Field: fmt.Sprintf("catalog.Endpoints[%d]", i), Value: ep, Want: "host:port or http(s)://host:port"}
			}
			hostport = rest
		}
		if _, _, err := splitHostPort(hostport); err != nil {
			return &limit.Error{Field: fmt.Sprintf("catalog.Endpoints[%d]", i), Value: ep, Want: "host:port or http(s)://host:port; " + err.Error()}
		}
	}
	return nil
}

func checkPrefix(p string) error {
	if p == "" {
		return nil
	}
	ok := len(p) >= 1 && len(p) <= MaxPrefixBytes && strings.HasPrefix(p, "/") && strings.HasSuffix(p, "/") && printable(p)
	return limit.Check(ok, "catalog.Prefix", p, fmt.Sprintf("1..%d printable ASCII bytes without spaces, starting and ending with \"/\"", MaxPrefixBytes))
}

func checkNodeID(field, id string) error {
	return limit.Check(validNodeID(id), field, id, fmt.Sprintf("1..%d bytes of [A-Za-z0-9._-]", MaxNodeIDBytes))
}

func checkPeerAddr(field, addr string) error {
	if len(addr) == 0 || len(addr) > MaxPeerAddrBytes {
		return &limit.Error{Field: field, Value: addr, Want: fmt.Sprintf("host:port, 1..%d bytes", MaxPeerAddrBytes)}
	}
	if _, _, err := splitHostPort(addr); err != nil {
		return &limit.Error{Field: field, Value: addr, Want: "host:port; " + err.Error()}
	}
	return nil
}

// splitHostPort accepts host:port with a nonempty host and a port in
// 1..65535, and no spaces or control characters.
func splitHostPort(hp string) (string, int, error) {
	if !printable(hp) {
		return "", 0, errors.New("it has a space or control character")
	}
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, errors.New("it does not split into host and port")
	}
	if host == "" {
		return "", 0, errors.New("its host is empty")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("its port %q is not 1..65535", port)
	}
	return host, n, nil
}

func validNodeID(id string) bool {
	if len(id) == 0 || len(id) > MaxNodeIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// printable reports whether s is printable ASCII without spaces.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
