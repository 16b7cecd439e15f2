package peer

import (
	"context"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/transfer"
)

// PinnedBlock is one block a Source pinned: its hash, its length in bytes,
// the layers it spans, and its bytes in RAM as the chunks that hold them,
// in order. The chunks together are exactly Length bytes (the last one cut
// to the block's end), and they stay valid and unchanged until
// Source.Unpin of the pin that returned them.
type PinnedBlock struct {
	Hash   abi.BlockHash
	Length uint64
	Layers uint32 // 0: not known
	Bufs   [][]byte
}

// Source is the source side's hold on its RAM tier: the handler peer
// control serves OpenTransfer and ReleaseTransfer to (gocore/cluster's,
// over the cache's transfer pins run on the dispatcher). Its methods are
// called from gRPC handler goroutines, concurrently.
type Source interface {
	// Pin pins the longest resident leading run of hashes in namespace ns
	// (it stops at the first block not resident in RAM, or before the block
	// that would take the run past maxBytes) and returns a token for Unpin
	// and the run, maybe empty. Pinned blocks are not evicted or changed
	// until Unpin. An error pins nothing; Pin returns early with ctx's
	// error when ctx ends.
	Pin(ctx context.Context, ns abi.Namespace, hashes []abi.BlockHash, maxBytes uint64) (pin uint64, run []PinnedBlock, err error)
	// Unpin drops the pins of a token Pin returned; the blocks' chunks may
	// change after it returns. It is called exactly once for every Pin that
	// returned no error, an empty run's too (whose token the Source may
	// have made 0: then it does nothing).
	Unpin(pin uint64)
}

// Capability is the 128-bit secret that authorises READs of one segment of
// the transfer server: transfer.Capability, which Engine.OpenSegment takes.
type Capability = transfer.Capability

// SegmentServer is the source side of the transfer engine as peer control
// uses it: *transfer.Server (gocore/transfer) is the one the Manager passes;
// the interface keeps the server's other methods out of this package's
// reach.
type SegmentServer interface {
	// RegisterSegment makes the concatenation of bufs readable by whoever
	// presents id and the capability, until UnregisterSegment or deadline.
	RegisterSegment(bufs [][]byte, deadline time.Time) (id uint64, c Capability, err error)
	// UnregisterSegment ends segment id; after it returns no READ touches
	// its bufs. An id that already ended (its deadline passed) is a no-op.
	UnregisterSegment(id uint64)
	// Addr is the host:port requesters' data connections dial.
	Addr() string
}

var _ SegmentServer = (*transfer.Server)(nil)
