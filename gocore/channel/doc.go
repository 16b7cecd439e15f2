// Package channel is the Manager's dispatcher for the shared-memory channel.
//
// One goroutine, locked to its OS thread, runs Dispatcher.Run: it crosses
// into C once per batch (native.Server.Step posts the previous batch's
// replies and returns the next batch of requests), validates each request
// (gocore/abi.ValidateRequest) and handles it inline. Nothing on the hot path
// hands work to another goroutine: here a hand-off between locked OS threads
// costs over 100 µs, fifty times a whole round trip.
//
// The doorbell (abi.h struct okv_doorbell) is one sealed memfd per Manager,
// mapped here and shared read-write with every client. A client sets its
// slot's bit and the word's summary bit; the poll loop exchanges the summary
// and the flagged words with zero, so its cost per poll is independent of the
// number of idle sessions (two loads when nothing is pending).
//
// Attach and Detach come from bootstrap goroutines. They are queued, the
// control slot is rung, and the dispatcher applies them between batches and
// acknowledges; after Detach returns the dispatcher never touches the slot
// mapping again, so the session may unmap it.
//
// Importers: cmd/orbitkv-manager, gocore/bootstrap.
package channel
