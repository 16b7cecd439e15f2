package peer

import (
	"context"
	"fmt"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/proto/peerpb"
)

// Limits of a LookupRequest, checked by the server (ErrInvalidRequest
// naming the field) and by the client before it sends.
const (
	MaxLookupHashes = 1 << 16  // engine_hashes
	MaxLookupTokens = 16 << 20 // token_ids (gRPC's 4 MiB message bound comes first)
)

// Held counts the leading blocks of a chain a node holds: in RAM (CPU),
// on SSD (Storage), on either (Any ≥ both).
type Held struct {
	CPU, Storage, Any int
}

// Lookup is the handler Lookup calls are served to: the Manager's KV
// events' block records (gocore/manager's adapter over kvevents.Tracker).
// Its methods are called from gRPC handler goroutines, concurrently; they
// take no pin and do not block on I/O. ns nil matches any namespace.
type Lookup interface {
	LookupHashes(ns *abi.Namespace, engineHashes []uint64) Held
	LookupTokens(ns *abi.Namespace, tokens []uint32, blockSize int) Held
}

// Lookup serves one LookupRequest (proto/peer.proto) from an
// authenticated peer.
func (v service) Lookup(ctx context.Context, req *peerpb.LookupRequest) (*peerpb.LookupReply, error) {
	if _, err := connOf(ctx); err != nil {
		return nil, toStatus(err)
	}
	l := v.s.spec.Lookup
	if l == nil {
		return nil, toStatus(fmt.Errorf("%w: this node answers no lookups: its KV events are off (--kv-events) or it has tenants (--tenant), whose caches it shows no peer", ErrUnavailable))
	}
	ns, err := checkLookup(req.GetNamespace(), req.GetEngineHashes(), req.GetTokenIds(), int(req.GetBlockSize()))
	if err != nil {
		return nil, toStatus(err)
	}
	var h Held
	if req.GetTokenIds() != nil {
		h = l.LookupTokens(ns, req.GetTokenIds(), int(req.GetBlockSize()))
	} else {
		h = l.LookupHashes(ns, req.GetEngineHashes())
	}
	return &peerpb.LookupReply{Cpu: uint32(h.CPU), Storage: uint32(h.Storage), Any: uint32(h.Any)}, nil
}

// checkLookup checks a lookup's fields against their limits: a namespace
// of 16 bytes or none, at most MaxLookupHashes hashes or
// MaxLookupTokens tokens (not both) and, with tokens, a block size
// 1..abi.RecordMaxTokens. Errors wrap ErrInvalidRequest naming the field.
func checkLookup(nsb []byte, hashes []uint64, tokens []uint32, blockSize int) (*abi.Namespace, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, a...))
	}
	var ns *abi.Namespace
	switch len(nsb) {
	case 0:
	case len(abi.Namespace{}):
		ns = (*abi.Namespace)(nsb)
	default:
		return nil, bad("namespace: %d bytes, want 16 or none", len(nsb))
	}
	switch {
	case len(hashes) > 0 && len(tokens) > 0:
		return nil, bad("engine_hashes and token_ids: give one, not both")
	case len(hashes) > MaxLookupHashes:
		return nil, bad("engine_hashes: %d, at most %d", len(hashes), MaxLookupHashes)
	case len(tokens) > MaxLookupTokens:
		return nil, bad("token_ids: %d, at most %d", len(tokens), MaxLookupTokens)
	case len(tokens) > 0 && (blockSize < 1 || blockSize > abi.RecordMaxTokens):
		return nil, bad("block_size: %d, want 1..%d with token_ids", blockSize, abi.RecordMaxTokens)
	case len(tokens) == 0 && blockSize != 0:
		return nil, bad("block_size: %d without token_ids, want 0", blockSize)
	}
	return ns, nil
}

// Lookup asks the peer how many leading blocks of a chain it holds: the
// engine hashes, or tokens cut into blocks of blockSize (tokens non-nil).
// ns nil matches any namespace. Errors: this package's Err… values
// (errors.Is): ErrInvalidRequest for a field outside its limit (checked
// before sending), ErrUnavailable when the peer's KV events are off or it
// cannot be reached, ErrBadReply for counts that do not fit the chain.
func (c *Client) Lookup(ctx context.Context, ns *abi.Namespace, hashes []uint64, tokens []uint32, blockSize int) (Held, error) {
	req := &peerpb.LookupRequest{EngineHashes: hashes}
	if len(tokens) > 0 { // no tokens: an empty chain, as no hashes
		req = &peerpb.LookupRequest{TokenIds: tokens, BlockSize: uint32(blockSize)}
	}
	if ns != nil {
		req.Namespace = ns[:]
	}
	if _, err := checkLookup(req.Namespace, req.EngineHashes, req.TokenIds, int(req.BlockSize)); err != nil {
		return Held{}, fmt.Errorf("peer %s: Lookup: %w", c.addr, err)
	}
	rep, err := c.pc.Lookup(ctx, req)
	if err != nil {
		return Held{}, fmt.Errorf("peer %s: Lookup: %w", c.addr, fromStatus(err))
	}
	blocks := len(hashes)
	if len(tokens) > 0 {
		blocks = len(tokens) / blockSize
	}
	h := Held{CPU: int(rep.GetCpu()), Storage: int(rep.GetStorage()), Any: int(rep.GetAny())}
	if h.Any > blocks || h.CPU > h.Any || h.Storage > h.Any {
		return Held{}, fmt.Errorf("peer %s: Lookup: %w: cpu %d, storage %d, any %d of %d blocks", c.addr, ErrBadReply, h.CPU, h.Storage, h.Any, blocks)
	}
	return h, nil
}
