// Package failpoint names the pause points of the Manager that fault tests
// use (the operations of docs/cache.md "Operation semantics": ticket
// admission, reservation, copy submitted, copy complete, notification,
// publish acknowledgement) and its test clock.
//
// A pause holds one operation, never the goroutine that meets the point:
// the Manager's dispatcher calls Pause with a resume function; when the
// point is armed Pause reports true, and the caller parks that one
// operation (its state, its deferred reply) and returns, so the dispatcher
// keeps serving every other request and session. Resume calls the stored
// function once, on the goroutine that resumes; it must only hand the
// operation back to its owner (gocore/cache queues it and rings the
// dispatcher, which finishes the operation on its own goroutine).
//
// In an ordinary build Enabled is false, Pause is an empty function that
// reports false and Clock is nil: callers guard each point with
// `failpoint.Enabled && ...`, so the compiler removes the point and its
// resume closure; nothing can be armed, and no endpoint exists. A build with
// the tag `failpoints` (test/integration and make e2e build one; only tests
// use it) makes Pause consult the armed points and serves Handler under
// /debug/failpoints and /debug/clock on the Manager's loopback HTTP address.
package failpoint
