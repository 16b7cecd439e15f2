package cache

import (
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// Op is an operation whose duration the Service reports to its
// OpObserver.
type Op uint8

// Ops. RestorePoll and CancelQuery are not reported.
const (
	OpQuery   Op = iota // QueryBundle: an untracked query, or a ticket's submission
	OpPoll              // Poll of a ticket (each Poll is one sample: Loading, then Ok, are two)
	OpClaim             // Claim of a ticket's result
	OpPublish           // Publish, until its copy completed and the reply was posted
	OpRestore           // Restore, until it was accepted (the copy completes later; RestorePoll sees it)
	OpRelease           // Release of a lease
	NumOps              // the number of Ops
)

var opNames = [NumOps]string{"query", "poll", "claim", "publish", "restore", "release"}

// String is the op's label value: query, poll, claim, publish, restore or
// release.
func (o Op) String() string {
	if o < NumOps {
		return opNames[o]
	}
	return "unknown"
}

// OpObserver records how long the Service took to answer one operation,
// from the dispatcher handing it the request to the response (for a
// Publish, to the posting of its deferred response once the copy
// completed). It is called on the dispatcher goroutine, for one request
// in TimedEvery of each Op:
// it must not block, and should not allocate. gocore/manager implements it
// with Prometheus histograms; this package does not import Prometheus.
type OpObserver interface {
	ObserveOp(op Op, d time.Duration)
}

// TimedEvery is how many operations of each Op pass for one that is timed
// and reported to the OpObserver. Timing one costs two clock reads and a
// histogram sample, about 130 ns on a VM: more than a Poll's own time in
// the Manager, and outside the benches' noise when every request pays it.
// One in 8 keeps the distribution (every 8th request of each kind, so no
// kind of traffic is skipped) at an eighth of the cost; the per-command
// counters still count every request.
const TimedEvery = 8

// clockBase is the origin of mono; one nanosecond in the past, so that
// mono is never 0 (0 marks an untimed operation).
var clockBase = time.Now().Add(-time.Nanosecond)

// mono is the monotonic clock since clockBase. time.Since of a time with a
// monotonic reading reads only the monotonic clock, where time.Now reads
// the wall clock too: half the cost on every timed request.
func mono() time.Duration { return time.Since(clockBase) }

// opOf maps a cache command to the Op reported for it; false for the
// commands not reported.
func opOf(code uint16) (Op, bool) {
	switch abi.Command(code) {
	case abi.CmdQueryBundle:
		return OpQuery, true
	case abi.CmdPoll:
		return OpPoll, true
	case abi.CmdClaim:
		return OpClaim, true
	case abi.CmdPublish:
		return OpPublish, true
	case abi.CmdRestore:
		return OpRestore, true
	case abi.CmdRelease:
		return OpRelease, true
	}
	return 0, false
}
