// Package cache serves the cache commands of the channel (docs/design.md §5.3):
// QueryBundle (an untracked leased read, or a ticket: gocore/ticket), Poll,
// Claim, CancelQuery, Publish, Restore, RestorePoll and Release, over the
// tiers (gocore/tier), leases (gocore/lease) and the copy engine
// (gocore/copier, native/src/copy.c).
//
// Threading: a Service is owned by the dispatcher goroutine
// (gocore/channel); every method except Stats runs there, so the cache
// state needs no locks. Copies run on the copy engine's threads; a finished
// copy rings the control slot and the dispatcher calls Complete, which
// posts the deferred Publish replies and signals restore completions on the
// session eventfd.
//
// Pause points (gocore/failpoint, failpoint builds only) hold one
// operation, never the dispatcher: the operation is parked (its reply
// deferred, its ticket or restore left pending) and every other request and
// session is served meanwhile; its continuation runs from Complete
// (failpoint.Queue) and checks that its session is still attached and not
// closing before it answers or touches the slot.
//
// Rules kept here (docs/design.md §6): a block becomes visible only after its
// publish copy completed (rule 2); restore destination pages are the copy
// engine's until RestorePoll reports a terminal state, and teardown waits
// for a session's copies to drain before its buffers may be unmapped
// (rule 3); a leased or in-copy block is never evicted (rule 4); with no
// sessions, leases, pins, reserved bytes and operations are zero (rule 8,
// checked with the accounting relations by Service.Check). Descriptors are
// copied out of the shared slot before they are decoded.
package cache
