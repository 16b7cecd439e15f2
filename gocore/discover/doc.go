// Package discover keeps the Manager's shared-memory discovery indexes: per
// namespace a session asked for, a table of the digests (Digest) of the
// block hashes resident in the RAM tier that clients map read-only and read with no syscall and no
// Manager wake-up (okv_discover_local in liborbitkv).
//
// It owns each table's memfd, the Manager's writable mapping of it, the
// seals and the writer side of the per-bucket seqlock; the byte layout and
// the reader are native/include/orbitkv/discover.h's (the single source of
// truth; header and bucket offsets are mirrored below). The offsets are
// checked three ways: discover.h's _Static_asserts (sizes and field
// offsets, in C), the compile-time size checks of the Go mirrors in
// table.go, and gocore/internal/native's discover_e2e_test.go, where
// liborbitkv's okv_discover_local reads the tables a real Manager wrote
// (hashes, counts, the retired flag) and must find what was published.
// The digest function is checked the same ways: TestDigestIsPinned here
// and native/tests/test_discover.c pin one vector, and
// TestDigestsAgreeWithLiborbitkv (gocore/internal/native) compares Digest
// with both of liborbitkv's AES paths on random namespaces and hashes.
// The Registry is fed by the block index (an index.Observer: Sealed and
// Removed, on the dispatcher goroutine) and answers the bootstrap
// server's MapDiscovery frames (Open).
//
// # Layout
//
//	offset  size  field       (struct okv_discover_header)
//	     0     4  magic       0x58564B4F "OKVX"
//	     4     2  version     3
//	     6     2  flags       FlagComplete, FlagRetired (set once, atomically)
//	     8     8  buckets     a power of two
//	    16     8  seed        keys the bucket choice, random per table
//	    24     8  generation  updates written (atomic add after each)
//	    32    16  namespace
//	    48     8  entries     hashes present
//	    56     8  dropped     inserts refused: both buckets full
//	    64     -  buckets[]   64 bytes each (struct okv_discover_bucket):
//	                          seq (8, odd while written), used (8, a bit per
//	                          way), 3 ways of 16-byte digests
//	                          AES-128_K(h) XOR h of block hashes h, K =
//	                          DigestKey(namespace) (Digest), never the
//	                          block hash, which would let any session of
//	                          the namespace restore blocks it never
//	                          computed
//
// # Consistency
//
// One writer: the dispatcher goroutine (Sealed, Removed and the population
// of a new table all run there). An update makes the bucket's seq odd with
// atomic.AddUint64 (sequentially consistent: no store of the update moves
// before it), stores the way and used with atomic stores, then makes seq
// even with another atomic.AddUint64 (the release half). Readers retry
// while seq is odd or changed across their reads (discover.h). Hashes never
// move between buckets, so a reader misses a present hash only while that
// hash's own update is in flight: an answer is stale by at most one update.
//
// # Scoping and threat model
//
// A session gets a namespace's table only by naming the namespace
// (lifecycle frame MapDiscovery, one fd by SCM_RIGHTS); a table holds one
// namespace's hashes and nothing else, so a session learns nothing of the
// occupancy of namespaces it cannot name. The namespace fingerprint
// (docs/design.md §5.4, which a tenant salt makes unguessable) is the
// capability. Every process on the socket runs as the Manager's uid
// (bootstrap's peer check), and such a process is assumed hostile toward
// other tenants: it could ptrace, but it must not be able to corrupt what
// other sessions read through OrbitKV. The memfd is therefore sealed with
// F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_FUTURE_WRITE after the Manager mapped
// it: a writable shared mapping, write(2) and a resize fail (EPERM), a
// read-only mapping cannot be mprotect'ed writable, and the Manager's own
// mapping cannot be truncated under it (no SIGBUS in the dispatcher).
// Tables count against Spec.Bytes (--discover-bytes); past it Open refuses
// with ErrBudget. Open takes a reference and Release gives it back (the
// bootstrap server holds one per namespace a session mapped, at most 16 a
// session, and releases them when the session closes); the last Release
// retires the table (FlagRetired in the header, which readers check on
// every read), closes it and returns its bytes to the budget.
package discover
