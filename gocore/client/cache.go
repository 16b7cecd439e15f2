package client

import (
	"time"

	"github.com/orbitkv/orbitkv/gocore/internal/native"
)

// The cache API of liborbitkv (docs/design.md §5.3, §5.4), re-exported for the Go
// tools outside gocore/ (cmd/ may not import gocore/internal/...). The
// methods Query, Publish, Restore, RestorePoll, RestoreWait, Release,
// RegisterBuffer and MaxQueryHashes, and the ticket methods Submit, Poll,
// Revise, Claim, Cancel, FreeTicket, OpSubmit, OpPoll, OpClaim and
// OpCancel come with Client, an alias of native.Client; their
// documentation is there.

// Namespace is the 16-byte fingerprint of a cache identity.
type Namespace = native.Namespace

// BlockHash is a 16-byte block hash chosen by the engine.
type BlockHash = native.BlockHash

// NamespaceSpec is the cache identity that Fingerprint hashes.
type NamespaceSpec = native.NamespaceSpec

// Buffer is an engine KV buffer in sealed memfd shared memory (layer-major:
// page p of layer l at (l*PageCount+p)*PageBytes); Free releases it, and a
// registered buffer must stay allocated until its session is closed.
type Buffer = native.Buffer

// Lease is the answer of Query; Hits 0 means ID 0, nothing to release.
type Lease = native.Lease

// BlockRecord is a published block's record (Client.PublishRecords): the
// engine's hash, its parent's and its token ids.
type BlockRecord = native.BlockRecord

// PublishResult counts the blocks a Publish stored and found present.
type PublishResult = native.PublishResult

// RestoreEntry copies lease block Block into page Page of every layer.
type RestoreEntry = native.RestoreEntry

// BlockHashes is an immutable batch of block hashes in C memory, shared by
// reference with the tickets that use it; NewBlockHashes makes one, Free
// drops the caller's reference.
type BlockHashes = native.BlockHashes

// NewBlockHashes copies hashes into a new batch (okv_block_hashes_new).
// Errors: *Error (-EINVAL for an empty slice).
func NewBlockHashes(hashes []BlockHash) (*BlockHashes, error) { return native.NewBlockHashes(hashes) }

// QuerySpec is what a query ticket asks: a prefix view of a batch under a
// namespace, with Query* flags.
type QuerySpec = native.QuerySpec

// QueryAnswer is a ticket's answer: the status and the Manager's result.
type QueryAnswer = native.QueryAnswer

// Ticket is a query ticket; free it with Client.FreeTicket.
type Ticket = native.Ticket

// Query flags of QuerySpec.Flags (abi.h enum okv_query_flags).
const (
	QueryWaitForFullPrefix = native.QueryWaitForFullPrefix // await SSD reads of the whole available prefix
	QueryWarmup            = native.QueryWarmup            // prefetch into RAM, no lease
	QueryDiscover          = native.QueryDiscover          // metadata only: Candidates, no lease
	QueryRecovery          = native.QueryRecovery          // lease exactly the recovery range, or Miss
	QueryPrepare           = native.QueryPrepare           // keep the result until Claim
)

// Statuses of QueryAnswer.Status (abi.h enum okv_status).
const (
	StatusOK         = native.StatusOK         // leased, or a Warmup answer (LeaseID 0)
	StatusLoading    = native.StatusLoading    // still loading or preparing: poll again
	StatusMiss       = native.StatusMiss       // nothing leased
	StatusCandidates = native.StatusCandidates // Discover answer, or a Prepare ticket ready to Claim
)

// Error codes of the cache operations, for comparisons with Error.Code.
const (
	CodeUnadmitted  = native.CodeUnadmitted  // no capacity now, nothing done; retry later
	CodePending     = native.CodePending     // a restore is still copying
	CodeExpired     = native.CodeExpired     // the Manager answered Timeout: the ticket or restore expired
	CodeFenced      = native.CodeFenced      // a publish was ambiguous: the buffer's pages stay pinned until the Manager exits
	CodeTimedOut    = native.CodeTimedOut    // no reply within the deadline; outcome unknown
	CodeProto       = native.CodeProto       // malformed reply from the Manager
	CodeClosed      = native.CodeClosed      // client closed or session ended
	CodeManagerDied = native.CodeManagerDied // the Manager process exited (its pidfd became readable)
	// CodeDiscoverBusy: a local discovery (DiscoverLocalMode) met an index
	// bucket that stayed mid-update for its whole spin budget; nothing was
	// sent, so ask again or fall back to the round-trip discovery.
	CodeDiscoverBusy = native.CodeDiscoverBusy
)

// Fingerprint computes the Namespace of s (okv_namespace_fingerprint).
// Errors: *Error for an invalid spec (block tokens 0, a size 0, a rank ≥
// its size, a string over 1024 bytes), or a NUL byte in a string.
func Fingerprint(s NamespaceSpec) (Namespace, error) { return native.Fingerprint(s) }

// AllocBuffer allocates an engine buffer of layers × pageCount pages of
// pageBytes bytes (a multiple of 64), pre-faulted (okv_buffer_alloc).
// Errors: *Error.
func AllocBuffer(layers uint32, pageBytes, pageCount uint64) (*Buffer, error) {
	return native.AllocBuffer(layers, pageBytes, pageCount)
}

// MemcpyBench copies n bytes from src to dst iters times in one C loop
// (memcpy(3)) and returns the elapsed time: the baseline of the copy bench.
// src and dst must each address n bytes of mapped memory.
func MemcpyBench(dst, src uintptr, n uint64, iters int) time.Duration {
	return native.MemcpyBench(dst, src, n, iters)
}

// DiscoverMode is a subject of BenchDiscover; see native.DiscoverMode.
type DiscoverMode = native.DiscoverMode

// Subjects of BenchDiscover.
const (
	DiscoverLocalMode = native.DiscoverLocalMode // okv_discover_local from the mapped index
	DiscoverRTTMode   = native.DiscoverRTTMode   // a QueryBundle ticket with QueryDiscover
	DiscoverEmptyMode = native.DiscoverEmptyMode // an empty call: the timer's floor
)

// BenchDiscover times discoveries in one cgo call; see native.BenchDiscover.
func BenchDiscover(c *Client, ns Namespace, hashes []BlockHash, want uint32, mode DiscoverMode, warmup int, period time.Duration, out []uint64) error {
	return native.BenchDiscover(c, ns, hashes, want, mode, warmup, period, out)
}
