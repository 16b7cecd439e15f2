// Package failpoint names the pause points of the Manager that fault tests
// use (issue "operation semantics": ticket admission, reservation, copy
// submitted, copy complete, notification, publish acknowledgement) and its
// test clock.
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

// Name is a pause point.
type Name string

// The pause points, in the order an operation meets them. Each holds only
// the operation named here; what the client sees meanwhile is given after
// the dash.
const (
	TicketAdmission Name = "ticket-admission" // a QueryBundle with a ticket, before any check — no reply yet
	Reservation     Name = "reservation"      // a ticket about to take its lease and bytes — Poll answers Loading
	CopySubmitted   Name = "copy-submitted"   // a restore job handed to the copy engine — no reply yet
	CopyComplete    Name = "copy-complete"    // a drained copy completion, before it applies — the copy's operation is unfinished
	Notification    Name = "notification"     // a restore done, before the eventfd write — RestorePoll answers Loading
	PublishAck      Name = "publish-ack"      // a publish sealed, before its reply is posted — no reply yet
)

// All lists every pause point.
var All = []Name{TicketAdmission, Reservation, CopySubmitted, CopyComplete, Notification, PublishAck}

// RestoreDone is a hold point, not a pause: while held, restore copies
// complete but their terminal state is withheld (RestorePoll answers
// Loading) and the dispatcher keeps serving every other request, so a test
// can tell a client that waits for the terminal result from one that reads
// its pages earlier. Unlike a pause it holds every restore that completes
// while it is on, not one.
const RestoreDone Name = "restore-done"

// TransferServe is a hold point of the source side of the transfer engine:
// while held, each data connection reads its next READ and withholds the
// answer (no DATA is written, the segment is not touched, so
// UnregisterSegment and the release of its pins never wait for it) until
// the hold ends or the Server closes; peer control goes on meanwhile, so
// a test can hold a remote restore open mid-transfer and kill either end.
const TransferServe Name = "transfer-serve"
