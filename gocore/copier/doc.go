// Package copier is the Go side of the copy engine (native/src/copy.c,
// driven through gocore/internal/native): it names the engine's types and
// turns a block's RAM tier chunks and an engine buffer's page into the
// copy segments of one job. Publish copies engine pages into the tier
// (D2H on a GPU host, host to host here); Restore copies them back.
//
// Threading: the engine's C worker threads run the copies; a finished job
// rings the dispatcher's control slot, and the dispatcher goroutine drains
// completions in one crossing. The engine's own calls are safe for
// concurrent use except Close (native.CopyEngine says which).
//
// Invariant: a job's memory (source and destination) must stay mapped
// until its completion is drained (docs/design.md §6 rule 3).
package copier
