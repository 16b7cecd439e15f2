// Package failpoint names the pause points of the Manager that fault tests
// use (issue "operation semantics": ticket admission, reservation, copy
// submitted, copy complete, notification, publish acknowledgement) and its
// test clock.
//
// In an ordinary build Hit is an empty function the compiler removes and
// Clock is nil: nothing can be armed, and no endpoint exists. A build with
// the tag `failpoints` (make failpoint-manager; only tests use it) makes Hit
// consult the armed points and serves Handler under /debug/failpoints and
// /debug/clock on the Manager's loopback HTTP address.
package failpoint

// Name is a pause point.
type Name string

// The pause points, in the order an operation meets them.
const (
	TicketAdmission Name = "ticket-admission" // a QueryBundle with a ticket, before any check
	Reservation     Name = "reservation"      // a ticket about to take its lease and bytes
	CopySubmitted   Name = "copy-submitted"   // a restore job handed to the copy engine
	CopyComplete    Name = "copy-complete"    // copy completions drained, before they apply
	Notification    Name = "notification"     // a restore done, before the eventfd write
	PublishAck      Name = "publish-ack"      // a publish sealed, before its reply is posted
)

// All lists every pause point.
var All = []Name{TicketAdmission, Reservation, CopySubmitted, CopyComplete, Notification, PublishAck}

// RestoreDone is a hold point, not a pause: while held, restore copies
// complete but their terminal state is withheld (RestorePoll answers
// Loading) and the dispatcher keeps serving every other request, so a test
// can tell a client that waits for the terminal result from one that reads
// its pages earlier.
const RestoreDone Name = "restore-done"
