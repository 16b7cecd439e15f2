package channel

// Do runs f on the dispatcher goroutine, between batches, and returns once
// f returned: nil, or ErrStopped when the dispatcher stopped before f ran
// (f then never runs). It is the one way for code off the dispatcher (the
// operator socket) to read or change the handler's state, which only the
// dispatcher goroutine touches. f must not block and must not call back
// into the dispatcher (Attach, Detach, SessionHealth or Do would
// deadlock); one call costs a control event (microseconds), so it is for
// operator commands, not hot paths.
func (d *Dispatcher) Do(f func()) error {
	return d.control(controlOp{fn: f})
}
