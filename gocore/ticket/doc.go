// Package ticket owns query tickets (abi.h "Query tickets"; docs/design.md §6
// rules 1, 5, 6; spec "Channel ABI 5"): a QueryBundle with op_id ≠ 0, its
// revisions, its expiry and tombstones, discovery and warm-up (answered and
// retired at once), preparation (PREPARE, consumed by Claim), Poll and
// CancelQuery. A ticket's life:
//
//	submit ─► resolve ─┬─► terminal answer delivered ─► retired
//	                   ├─► pending (SSD reads, byte budget) ─► resolved ─► delivered on Poll
//	                   └─► ready (PREPARE) ─► delivered on Claim
//	live ─► Cancel / expiry / disconnect ─► revoked (draining while its SSD reads finish)
//
// Every live or draining ticket holds one operation permit (bounds per
// session and per Manager, shared with restores: the Host grants them).
// Op ids only grow within a session, so "retired" needs no memory: an id at
// or below the session's highest that is neither live nor tombstoned is
// retired. Expired ids are remembered in a bounded per-session tombstone
// ring (Tombs) so a late Poll answers Timeout.
//
// Resolution — the resident prefix, SSD reads, the byte budget, the lease —
// is the Host's (gocore/cache): the same pin → prefetch → lease path serves
// untracked queries. This package keeps the state machine and the answers.
//
// Threading: everything runs on the dispatcher goroutine but Set.Stats.
package ticket
