// Package lease owns the leases of leased reads (docs/design.md §5.3) and their
// admission: a QueryBundle hit pins the blocks of the resident prefix under
// a lease that belongs to the issuing session, with the lease's bytes
// reserved, until Release or session teardown.
//
// Table is the id map: ids are unique within a Manager incarnation and
// never reused, and a lease is usable only by the session that owns it, so
// a guessed id of another session's lease is refused. Book adds what
// admission needs on top of it: the per-session and per-Manager limits
// (leases per session, block references per session and in all), the byte
// budget shared with restores in flight, the FIFO queue of operations
// waiting for that budget (no overtaking: an untracked read that cannot
// wait is refused while anyone waits), and the block pins a lease holds.
//
// Invariants (checked by Book.Check): the bytes reserved are the sum of
// the live leases' bytes plus the bytes restores reserved; the block
// references counted, per owner and in all, are the sum of the live
// leases' block counts; every leased block holds one pin per lease that
// names it. Neither type is safe for concurrent use: the dispatcher
// goroutine owns them.
package lease
