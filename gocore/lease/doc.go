// Package lease keeps the leases of leased reads (DESIGN.md §5.3): a
// QueryBundle hit pins the blocks of the resident prefix under a lease that
// belongs to the issuing session, with the lease's bytes reserved, until
// Release or session teardown.
//
// Lease ids are unique within a Manager incarnation and never reused; a
// lease is usable only by the session that owns it, so a guessed id of
// another session's lease is refused. A Table is not safe for concurrent
// use: the dispatcher goroutine owns it.
package lease
