// Package lease owns the leases of leased reads (docs/design.md §5.3) and their
// admission: a QueryBundle hit pins the blocks of the resident prefix under
// a lease that belongs to the issuing session, with the lease's bytes
// reserved, until Release, session teardown, or revocation of a lease
// idle past the cache's lease idle timeout.
//
// Table is the id map: ids are unique within a Manager incarnation and
// never reused, and a lease is usable only by the session that owns it, so
// a guessed id of another session's lease is refused. Book adds what
// admission needs on top of it: the per-session and per-Manager limits
// (leases per session, block references per session and in all), the byte
// budget shared with restores in flight, the FIFO queue of operations
// waiting for that budget (no overtaking: an untracked read that cannot
// wait is refused while anyone waits), and the block pins a lease holds.
// It also keeps the handed leases (given to a client) in order of their
// holder's last progress, so the cache revokes the ones idle past its
// lease idle timeout in O(revoked) (idle.go; docs/security.md, "Leases
// that make no progress are revoked").
//
// Invariants (checked by Book.Check): the bytes reserved are the sum of
// the live leases' bytes plus the bytes restores reserved; the block
// references counted, per owner and in all, are the sum of the live
// leases' block counts; every leased block holds one pin per lease that
// names it; the idle list holds live handed leases only, oldest progress
// first. Neither type is safe for concurrent use: the dispatcher
// goroutine owns them.
package lease
