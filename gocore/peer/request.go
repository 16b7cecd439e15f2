package peer

import (
	"fmt"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/proto/peerpb"
)

// MaxHashes is the most hashes one OpenTransfer may name (64 KiB of
// hashes: a chain far longer than any run worth one transfer).
const MaxHashes = 4096

// openRequest is an OpenTransferRequest checked and decoded.
type openRequest struct {
	ns          abi.Namespace
	hashes      []abi.BlockHash
	maxBytes    uint64
	expectEpoch uint64
}

// parseOpen checks req against the limits; an error is ErrInvalidRequest
// naming the first field out of its limit.
func parseOpen(req *peerpb.OpenTransferRequest) (openRequest, error) {
	var r openRequest
	if n := len(req.GetNamespace()); n != len(r.ns) {
		return r, fmt.Errorf("%w: namespace: %d bytes, want %d", ErrInvalidRequest, n, len(r.ns))
	}
	copy(r.ns[:], req.GetNamespace())
	hs := req.GetHashes()
	if len(hs) < 1 || len(hs) > MaxHashes {
		return r, fmt.Errorf("%w: hashes: %d of them, want 1..%d", ErrInvalidRequest, len(hs), MaxHashes)
	}
	r.hashes = make([]abi.BlockHash, len(hs))
	for i, h := range hs {
		if len(h) != len(r.hashes[i]) {
			return r, fmt.Errorf("%w: hashes[%d]: %d bytes, want %d", ErrInvalidRequest, i, len(h), len(r.hashes[i]))
		}
		copy(r.hashes[i][:], h)
	}
	if r.maxBytes = req.GetMaxBytes(); r.maxBytes == 0 {
		return r, fmt.Errorf("%w: max_bytes: 0, want at least 1", ErrInvalidRequest)
	}
	if r.expectEpoch = req.GetExpectEpoch(); r.expectEpoch == 0 {
		return r, fmt.Errorf("%w: expect_epoch: 0, want the source's epoch (at least 1)", ErrInvalidRequest)
	}
	return r, nil
}
