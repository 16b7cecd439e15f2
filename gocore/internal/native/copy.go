//go:build cgo

package native

/*
#include <errno.h>
#include "copy.h"
#include "server.h"
*/
import "C"

import (
	"fmt"
	"math"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// Err returns nil for a successful job, or its status as a wrapped
// unix.Errno.
func (c CopyCompletion) Err() error {
	if c.Status == 0 {
		return nil
	}
	return fmt.Errorf("native: copy job %d: %w", c.Token, unix.Errno(-c.Status))
}

// Limits of copy.h: worker threads per engine, segments per job.
const (
	maxCopyWorkers = C.OKVI_COPY_MAX_WORKERS
	maxCopySegs    = C.OKVI_COPY_MAX_SEGS
)

// CopyEngine moves bytes between mappings on a pool of C worker threads
// (native/src/copy.c) with the host (memcpy) backend. Submit, Drain and
// Inflight are safe for concurrent use; Close must not run concurrently with
// them. Worker threads sleep while nothing is queued.
type CopyEngine struct {
	e *C.struct_okvi_copy_engine // owned; nil after Close
}

// NewCopyEngineFor starts an engine whose completions wake srv's poll loop
// through its doorbell and its private control word (okvi_server_ctl_word),
// so a client scribbling on the shared doorbell cannot lose a completion's
// wakeup, and through its wake eventfd in iceoryx2 mode (UseIceoryx2 must
// come first). srv must outlive the engine (Close the engine first).
func NewCopyEngineFor(srv *Server, workers int) (*CopyEngine, error) {
	e, err := newCopyEngine(nil, srv.db, workers)
	if err != nil {
		return nil, err
	}
	C.okvi_copy_set_ring_word(e.e, srv.ctlWord())
	C.okvi_copy_set_wake_fd(e.e, C.okvi_server_wake_fd(srv.s))
	return e, nil
}

// NewCopyEngine starts an engine with workers threads (1..64).
// db is the doorbell mapping (at least abi.DoorbellSize bytes of mmap'd
// memory, borrowed: it must stay mapped until Close) whose control slot a
// completion rings when the completion queue goes from empty to non-empty,
// or nil for no ring. Errors wrap unix.EINVAL, unix.ENOMEM or
// pthread_create's errno.
func NewCopyEngine(db []byte, workers int) (*CopyEngine, error) {
	var cdb *C.struct_okv_doorbell
	if db != nil {
		if len(db) < abi.DoorbellSize {
			return nil, fmt.Errorf("native: copy engine doorbell of %d bytes (want >= %d): %w", len(db), abi.DoorbellSize, unix.EINVAL)
		}
		cdb = (*C.struct_okv_doorbell)(unsafe.Pointer(&db[0]))
	}
	return newCopyEngine(nil, cdb, workers)
}

// newCopyEngine starts an engine over backend (nil: host).
func newCopyEngine(backend *C.struct_okvi_copy_backend, cdb *C.struct_okv_doorbell, workers int) (*CopyEngine, error) {
	if workers < 1 || workers > maxCopyWorkers {
		return nil, fmt.Errorf("native: copy engine with %d workers (want 1..%d): %w", workers, maxCopyWorkers, unix.EINVAL)
	}
	e, err := C.okvi_copy_engine_new(backend, C.int(workers), cdb)
	if e == nil {
		if err == nil {
			err = unix.ENOMEM
		}
		return nil, fmt.Errorf("native: starting copy engine with %d workers: %w", workers, err)
	}
	return &CopyEngine{e: e}, nil
}

// Submit queues one job of 1..1<<20 segments under token, in one cgo
// call; it returns before the bytes move. The engine copies segs, so the
// slice is free once Submit returns, but the memory it addresses must stay
// mapped until the job's completion is drained. A job whose segments are all
// empty completes at once. No allocation on success. Errors wrap
// unix.EINVAL (no segments, too many, a NULL address, a wrapping or
// overlapping range), unix.ENOMEM or unix.ESHUTDOWN (after Close).
func (e *CopyEngine) Submit(token uint64, segs []CopySeg) error {
	return e.SubmitLane(token, 0, segs)
}

// SubmitLane is Submit on stream set lane of a device backend: the CUDA
// backend keeps one H2D and one D2H stream per (lane, device), and the
// cache passes the session id, so sessions do not queue behind each other
// on one stream. The host backend ignores lane. Errors as Submit, plus
// unix.EINVAL for a segment straddling the end of announced device memory
// or a job spanning two devices, and unix.EIO when the driver refused the
// job before anything was issued.
func (e *CopyEngine) SubmitLane(token, lane uint64, segs []CopySeg) error {
	if e.e == nil {
		return fmt.Errorf("native: copy submit on a closed engine: %w", unix.ESHUTDOWN)
	}
	if len(segs) == 0 || len(segs) > maxCopySegs {
		return fmt.Errorf("native: copy submit of %d segments (want 1..%d): %w", len(segs), maxCopySegs, unix.EINVAL)
	}
	// segs holds no Go pointers (addresses are uintptrs into mmap'd
	// memory), so it may be passed directly; C copies it before returning.
	rc := C.okvi_copy_submit_lane(e.e, C.uint64_t(token), C.uint64_t(lane), (*C.struct_okvi_copy_seg)(unsafe.Pointer(&segs[0])), C.size_t(len(segs)))
	if rc != 0 {
		return fmt.Errorf("native: copy submit of %d segments: %w", len(segs), unix.Errno(-rc))
	}
	return nil
}

// Drain moves up to len(out) completions, oldest first, into out in one cgo
// call and returns how many. It never waits for a copy. When the engine has
// a doorbell, a completion queued onto an empty queue rings its control
// slot; call Drain until it returns less than len(out), since completions
// that arrive behind an undrained one do not ring again. Returns 0 after
// Close. No allocation.
func (e *CopyEngine) Drain(out []CopyCompletion) int {
	if e.e == nil || len(out) == 0 {
		return 0
	}
	n := min(len(out), math.MaxInt32)
	return int(C.okvi_copy_drain(e.e, (*C.struct_okvi_copy_completion)(unsafe.Pointer(&out[0])), C.int(n)))
}

// Inflight returns the number of jobs submitted and not yet drained (a
// snapshot). Returns 0 after Close.
func (e *CopyEngine) Inflight() uint64 {
	if e.e == nil {
		return 0
	}
	return uint64(C.okvi_copy_inflight(e.e))
}

// Backend returns the name of the engine's copy backend ("host" or "cuda").
func (e *CopyEngine) Backend() string {
	if e.e == nil {
		return ""
	}
	return C.GoString(C.okvi_copy_backend_name(e.e))
}

// Close finishes every queued job, stops the workers and frees the engine;
// completions not yet drained are dropped. Calling it again does nothing.
func (e *CopyEngine) Close() {
	if e.e == nil {
		return
	}
	C.okvi_copy_engine_free(e.e)
	e.e = nil
}

// MemcpyBench is the baseline for Bench: it copies n bytes from src to dst
// (addresses in mmap'd memory) iters times in one C loop on the calling
// thread and returns the elapsed time.
func MemcpyBench(dst, src uintptr, n uint64, iters int) time.Duration {
	return time.Duration(C.okvi_memcpy_bench(C.uint64_t(dst), C.uint64_t(src), C.uint64_t(n), C.int(iters)))
}

// Bench submits the job segs iters times, one after another, each time
// waiting in C (a busy drain loop that yields the CPU) for its completion,
// and returns the elapsed time: the engine's throughput including the
// handoff to its workers. Meant for an otherwise idle engine: completions of
// other jobs that arrive meanwhile are dropped. Returns 0 if a submit or a
// copy failed (or segs is empty, or the engine is closed).
func (e *CopyEngine) Bench(segs []CopySeg, iters int) time.Duration {
	if e.e == nil || len(segs) == 0 {
		return 0
	}
	return time.Duration(C.okvi_copy_bench(e.e, (*C.struct_okvi_copy_seg)(unsafe.Pointer(&segs[0])), C.size_t(len(segs)), C.int(iters)))
}

// MaxCopySegments is the most segments one Submit takes (OKVI_COPY_MAX_SEGS).
const MaxCopySegments = maxCopySegs
