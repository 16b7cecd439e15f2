package channel

import "github.com/orbitkv/orbitkv/gocore/abi"

// Operation counts: every request the dispatcher reads is counted once,
// by its command (OpNames) and by how the Manager answered it
// (ResultNames), when the answer is known: at once for most commands,
// when the deferred answer is posted for a Publish (its copy completed),
// or as ResultUnanswered when the session detached before a deferred
// answer was posted. An answer the client no longer waits for (it timed
// out and sent a newer request) is counted all the same.
//
// The dispatcher goroutine alone writes the counts, as plain integers
// (no atomic operation on the request path); Operations reads them on
// that goroutine through a control event.

// Indexes of OpCounts' first dimension: the request's command. OpOther is
// a code no command has (such a request is answered Invalid); the others
// are abi's command codes.
const (
	OpOther = 0
	// NumOps is the length of OpCounts' first dimension.
	NumOps = int(abi.CmdShutdown) + 1
)

// OpNames are the metric label values of the ops, by index: snake_case
// names of abi's commands ("query" is QueryBundle, "cancel" CancelQuery),
// "other" for an unknown code.
var OpNames = [NumOps]string{"other", "ping", "query", "poll", "claim", "cancel",
	"publish", "restore", "restore_poll", "release", "shutdown"}

// Indexes of OpCounts' second dimension: abi's status codes (the answer's
// status), then ResultUnanswered.
const (
	// ResultUnanswered counts deferred requests (a Publish waiting for its
	// copy) whose session detached before the answer was posted.
	ResultUnanswered = int(abi.StatusUnsupported) + 1
	// NumResults is the length of OpCounts' second dimension.
	NumResults = ResultUnanswered + 1
)

// ResultNames are the metric label values of the results, by index:
// snake_case names of abi's statuses, then "unanswered".
var ResultNames = [NumResults]string{"ok", "loading", "miss", "candidates", "unadmitted", "invalid",
	"stale_session", "stale_generation", "timeout", "internal", "unsupported", "unanswered"}

// OpCounts are requests counted by [op][result] since the dispatcher
// was made; see OpNames and ResultNames.
type OpCounts [NumOps][NumResults]uint64

// Total is the sum of every count.
func (c *OpCounts) Total() uint64 {
	var n uint64
	for op := range c {
		for _, v := range c[op] {
			n += v
		}
	}
	return n
}

// opIndex is the OpCounts index of a request's command code.
func opIndex(code uint16) int {
	if code == 0 || int(code) >= NumOps {
		return OpOther
	}
	return int(code)
}

// resultIndex is the OpCounts index of a response's status code; a code
// past abi's statuses (which the Manager never answers) counts as
// internal.
func resultIndex(code uint16) int {
	if int(code) >= ResultUnanswered {
		return int(abi.StatusInternal)
	}
	return int(code)
}

// Operations copies the counts into out. It reads them on the dispatcher
// goroutine (one control event, microseconds: for a metrics scrape, not a
// hot path), or directly once Run has returned.
func (d *Dispatcher) Operations(out *OpCounts) {
	if d.control(controlOp{fn: func() { *out = d.counts }}) != nil {
		// ErrStopped: control returned after Run did (d.done closed), so
		// nothing writes the counts any more.
		*out = d.counts
	}
}
