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
