package native

// Namespace mirrors struct okv_namespace: the 16-byte fingerprint of a cache
// identity (gocore/identity.Namespace has the same bytes).
type Namespace [16]byte

// BlockHash mirrors struct okv_block_hash: 16 bytes chosen by the engine.
type BlockHash [16]byte

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
