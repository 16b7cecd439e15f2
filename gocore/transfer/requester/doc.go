// Package requester is the requesting side of the transfer engine
// (gocore/transfer): an Engine opens segments that a transfer.Server
// registered, by address, id and capability, and reads them into
// registered local memory in batches of READ requests, with a status per
// request and a notification per batch. It speaks the frame and error
// table of gocore/transfer and imports gocore/transfer and gocore/limit
// only; the Manager's peer tier (gocore/manager) and the transfer bench
// use it.
//
// # Rails, slices and batches
//
// An Engine keeps a pool of endpoints, one per source address, bounded by
// EngineSpec.MaxEndpoints with SIEVE eviction (sieve.go): a hit sets a
// bit, eviction sweeps a hand over the insertion-ordered queue; it keeps
// the peers in steady use without LRU's reordering on every hit. An
// endpoint is EngineSpec.Rails TCP connections ("rails", default 4), dialled
// on the first batch that reads the peer. The requests of a batch are cut
// into slices of EngineSpec.SliceBytes (default DefaultSliceBytes, 256
// KiB): a request larger than a slice is cut, and consecutive requests
// whose segment ranges follow each other share slices (the blocks of one
// run are adjacent in their segment), each slice a list of pieces of
// their Dst, so small blocks travel as full READs wherever their
// destinations lie. The slices wait in the endpoint's queue; each rail
// keeps up to EngineSpec.Window (default 2) slices in flight, taking the
// next ones whenever answers free slots (their READ headers go out in
// one write), so the slices spread over the rails by how fast each
// drains. A rail reads the DATA of a slice with io.ReadFull from the
// socket into each piece of Dst in turn: the bytes land in the
// destination frames without an intermediate buffer. A rail
// that fails (read or write error, a frame that does not answer what was
// asked) dies; its slices in flight go back to the front of the queue for
// the other rails, at most EngineSpec.Retries times each. When the last
// rail of an endpoint dies (the source restarted, a connection blip, its
// idle timeout) the endpoint dials its rails again for the slices left,
// at most Retries times in a row without a slice landing in between; a
// batch also dials the rails its endpoint lacks before it starts. A batch ends when every slice is
// done or failed; its deadline is its ctx's (EngineSpec.DefaultTimeout
// when ctx has none): at the deadline, on Wait's ctx, on FreeBatch or on
// Close the batch is aborted, its queued slices fail, and the rails with
// one of its slices in flight are closed, so that a reader in the middle
// of a DATA stops. Wait and FreeBatch return only once no slice of the
// batch can write its Dst any more: Dst is never written after either
// returns. A slice whose batch ended before its DATA arrived has that
// DATA read and discarded, never written to Dst.
package requester
