package native

import "github.com/orbitkv/orbitkv/gocore/abi"

// Namespace is struct okv_namespace: the 16-byte fingerprint of a cache
// identity (the one type is abi.Namespace; gocore/identity computes it).
type Namespace = abi.Namespace

// BlockHash is struct okv_block_hash: 16 bytes chosen by the engine
// (abi.BlockHash).
type BlockHash = abi.BlockHash

// NamespaceSpec mirrors struct okv_namespace_spec (gocore/identity.Spec has
// the same fields): the cache identity Fingerprint hashes.
type NamespaceSpec struct {
	ModelID, WeightsRevision, Dtype, KVLayout string
	BlockTokens                               uint32
	TPRank, TPSize, PPRank, PPSize            uint32
	CPRank, CPSize                            uint32
	AdapterID, TenantSalt                     string
}

// Lease is the answer of Query (struct okv_lease). Hits 0 means no lease
// (ID 0, nothing to release).
type Lease struct {
	ID         uint64 // lease id for Restore and Release; 0 when Hits is 0
	Hits       uint32 // leading hashes resident, pinned by the lease
	Bytes      uint64 // bytes the lease pins and reserves
	BlockBytes uint64 // bytes of one leased block (all layers)
}

// BlockRecord is what the engine knows of a published block (struct
// okv_block_info): its own block hash (vLLM's 64-bit form), its parent's
// (HasParent false: the first block of its chain; ParentHash is then
// ignored and sent as 0) and its token ids (1..OKV_RECORD_MAX_TOKENS).
type BlockRecord struct {
	EngineHash uint64
	ParentHash uint64
	HasParent  bool
	Tokens     []uint32
}

// PublishResult mirrors struct okv_publish_result, summed over the chunks
// of one Publish.
type PublishResult struct {
	Stored  uint32 // blocks copied in and made visible
	Present uint32 // blocks already resident (not copied)
}

// RestoreEntry mirrors struct okv_restore_entry (8 bytes; checked against C
// by TestCacheTypesMatchC): copy lease block Block into page Page of every
// layer of the destination buffer.
type RestoreEntry struct {
	Block uint32 // index into the lease, < Lease.Hits
	Page  uint32 // destination page, < the buffer's page count
}

// Query flags of a ticket (QuerySpec.Flags; abi.h enum okv_query_flags,
// checked against C by TestEnumsMatchC). Every flag needs a ticket
// (Submit, not Query). Allowed sets: 0, WaitForFullPrefix, Discover,
// Warmup, Recovery, Prepare, Prepare|WaitForFullPrefix, Prepare|Recovery;
// the Manager answers any other set CodeInvalid (field desc_flags).
const (
	// QueryWaitForFullPrefix awaits pending SSD reads of the chain
	// (Loading until the whole available prefix is resident) instead of
	// answering the RAM prefix.
	QueryWaitForFullPrefix uint32 = 1 << 0
	// QueryWarmup prefetches into RAM without a lease: answered at once
	// with StatusOK, LeaseID 0 and Hits = blocks warming (0 = skipped).
	QueryWarmup uint32 = 1 << 1
	// QueryDiscover asks metadata only: StatusCandidates (Hits = leading
	// blocks available locally), never a lease, retired at once.
	QueryDiscover uint32 = 1 << 2
	// QueryRecovery leases exactly hashes [RecoveryFirst, +RecoveryCount)
	// of the view: all of it or StatusMiss, never part.
	QueryRecovery uint32 = 1 << 3
	// QueryPrepare keeps the result at the Manager until Claim (exact
	// revision) or expiry; Poll reports readiness (StatusCandidates)
	// without consuming it.
	QueryPrepare uint32 = 1 << 4
)

// Statuses of a QueryAnswer (abi.h enum okv_status, the ones a query
// answers with; checked against C by TestEnumsMatchC).
const (
	StatusOK         uint16 = 0 // leased (Hits ≥ 1, LeaseID ≠ 0), or a Warmup answer (LeaseID 0)
	StatusLoading    uint16 = 1 // still reading from SSD or preparing: poll again
	StatusMiss       uint16 = 2 // nothing leased (Hits 0, LeaseID 0)
	StatusCandidates uint16 = 3 // Discover answer, or a Prepare ticket ready to Claim
)

// QuerySpec is what a ticket asks (struct okv_query_spec): the view
// Hashes[0..PrefixLen) of a batch under NS with Flags. RequestID and Group
// are the ticket's for its whole life: Revise ignores new values.
type QuerySpec struct {
	NS            Namespace
	Hashes        *BlockHashes // the batch; a ticket keeps its own reference
	PrefixLen     uint32       // hashes sent from the batch's start; 0 = all
	Flags         uint32       // Query* flags
	RequestID     uint64       // engine request (informational)
	Group         uint64       // request group (informational)
	RecoveryFirst uint32       // QueryRecovery: first leased chain position
	RecoveryCount uint32       // QueryRecovery: blocks leased, ≥ 1
}

// QueryAnswer is a ticket's answer (struct okv_query_answer: the Manager's
// okv_query_result plus the response status). Fields other than Status,
// OpID and Revision are zero unless Status is StatusOK, StatusMiss or
// StatusCandidates; for StatusLoading, Hits counts the hits so far.
type QueryAnswer struct {
	Status     uint16 // StatusOK, StatusLoading, StatusMiss or StatusCandidates
	Hits       uint32 // Ok: blocks leased; Candidates: leading blocks available locally; Warmup: blocks warming
	RAMHits    uint32 // leading blocks resident in RAM now
	First      uint32 // chain position of lease block 0 (RecoveryFirst for a recovery lease, else 0)
	LeaseID    uint64 // Ok with a lease: end it with Release
	LeaseBytes uint64 // bytes the lease pins and reserves
	BlockBytes uint64 // bytes of one leased block (all layers)
	OpID       uint64 // the ticket's op id (0: untracked)
	Revision   uint32 // the revision answered
}

// Error codes of query tickets and the publish fence (client.h enum
// okv_error; checked against C by TestEnumsMatchC), for comparisons
// with ClientError.Code.
const (
	// CodeExpired: the Manager answered Timeout — the ticket (or restore)
	// expired there. A Manager answer, unlike CodeTimedOut (no reply).
	CodeExpired = -1016
	// CodeFenced: a publish's acknowledgement was ambiguous, so the
	// Manager may still read the buffer's pages; they stay pinned until it
	// exits, and later Publish and Restore naming that buffer are refused
	// locally with CodeFenced.
	CodeFenced = -1017
	// CodeDiscoverBusy: a discovery index bucket stayed mid-update for the
	// reader's whole spin budget (DiscoverLocal); nothing was sent to the
	// Manager, unlike CodeTimedOut: take the round trip.
	CodeDiscoverBusy = -1019
)
