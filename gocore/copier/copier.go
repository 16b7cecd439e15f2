package copier

import (
	"fmt"
	"runtime"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
)

// Engine is the native copy engine: Submit(token, segments), Drain, Close.
type Engine = native.CopyEngine

// Seg is one contiguous copy (source, destination, bytes).
type Seg = native.CopySeg

// Completion is one finished job: its token and status (0 or -errno).
type Completion = native.CopyCompletion

// Poller is the dispatcher's poll loop, whose control slot finished jobs ring.
type Poller = native.Server

// MaxSegments is the most segments one job takes (OKVI_COPY_MAX_SEGS).
const MaxSegments = native.MaxCopySegments

// MaxWorkers bounds New's worker count.
const MaxWorkers = 64

// DefaultWorkers is the worker count of an engine whose user sets none
// (the Manager's --copy-workers default): one copy thread per CPU beyond
// the dispatcher's, at least 2 (so one large job is split across two
// threads) and at most 4.
func DefaultWorkers() int { return max(2, min(4, runtime.NumCPU()-1)) }

// New starts an engine of workers threads (1..MaxWorkers) whose finished
// jobs ring p's control slot; p must outlive it.
func New(p *Poller, workers int) (*Engine, error) {
	if workers < 1 || workers > MaxWorkers {
		return nil, fmt.Errorf("copy engine: %d workers, want 1..%d", workers, MaxWorkers)
	}
	e, err := native.NewCopyEngineFor(p, workers)
	if err != nil {
		return nil, fmt.Errorf("copy engine: %w", err)
	}
	return e, nil
}

// CUDA is the CUDA copy backend (native/src/copy_cuda.c): device jobs on
// per-(session, device) streams, host jobs on the engine's workers.
type CUDA = native.CUDA

// The copy backends Open takes (the Manager's --copy-backend).
const (
	BackendHost = "host" // memcpy on the worker threads (also "")
	BackendCUDA = "cuda" // the CUDA driver, or an error when it has no device
	BackendAuto = "auto" // cuda when the driver loads and has a device, else host
)

// Open starts an engine of workers threads over backend (BackendHost or
// "", BackendCUDA, BackendAuto) whose finished jobs ring p's control slot.
// cu is the CUDA backend when one was chosen (close it after the engine),
// else nil; why says in words why auto chose what it chose. BackendCUDA
// without a usable driver fails with OpenCUDA's error (the library and
// the dlopen or driver call that failed, e.g. "cuInit:
// CUDA_ERROR_NO_DEVICE (100)"); the library is $ORBITKV_LIBCUDA, else
// libcuda.so.1.
func Open(p *Poller, workers int, backend string) (e *Engine, cu *CUDA, why string, err error) {
	switch backend {
	case "", BackendHost:
		e, err = New(p, workers)
		return e, nil, "host backend requested", err
	case BackendCUDA, BackendAuto:
	default:
		return nil, nil, "", fmt.Errorf("copy backend %q: want host, cuda or auto", backend)
	}
	if workers < 1 || workers > MaxWorkers {
		return nil, nil, "", fmt.Errorf("copy engine: %d workers, want 1..%d", workers, MaxWorkers)
	}
	cu, err = native.OpenCUDA("")
	if err != nil {
		if backend == BackendAuto {
			e, err2 := New(p, workers)
			return e, nil, "host: no usable CUDA driver (" + err.Error() + ")", err2
		}
		return nil, nil, "", err
	}
	e, err = native.NewCopyEngineForCUDA(p, workers, cu)
	if err != nil {
		cu.Close()
		return nil, nil, "", fmt.Errorf("copy engine: %w", err)
	}
	return e, cu, fmt.Sprintf("cuda: %d device(s)", cu.Devices()), nil
}

// GPU maps clients' CUDA memory through a CUDA backend for registration
// (session.GPUMapper).
type GPU struct{ CU *CUDA }

// MapIPC implements session.GPUMapper with CUDA.MapIPC.
func (g GPU) MapIPC(uuid [16]byte, handle []byte, offset, n uint64) (session.DeviceMapping, error) {
	m, err := g.CU.MapIPC(uuid, handle, offset, n)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// MapVMM implements session.GPUMapper with CUDA.MapVMM.
func (g GPU) MapVMM(uuid [16]byte, fd int, allocBytes, offset, n uint64) (session.DeviceMapping, error) {
	m, err := g.CU.MapVMM(uuid, fd, allocBytes, offset, n)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Direction of a job.
type Direction bool

// Directions.
const (
	ToTier   Direction = true  // publish: engine page → RAM tier chunks
	FromTier Direction = false // restore: RAM tier chunks → engine page
)

// AppendBlock appends the segments between blk's chunks in arena and page
// `page` of every layer of buf. A block's bytes are its layers in order,
// each buf.PageBytes long, laid over its chunks in order; segments split at
// chunk boundaries.
func AppendBlock(segs []Seg, arena *ram.Arena, blk *index.Block, buf *session.Buffer, page uint32, dir Direction) []Seg {
	cb := arena.ChunkBytes()
	base := buf.Addr()
	var off uint64 // byte offset in the block
	for l := uint64(0); l < uint64(buf.Layers); l++ {
		pageAddr := base + uintptr((l*buf.PageCount+uint64(page))*buf.PageBytes)
		for done := uint64(0); done < buf.PageBytes; {
			c := off / cb
			in := off % cb
			n := min(cb-in, buf.PageBytes-done)
			tier := arena.Addr(blk.Chunks[c]) + uintptr(in)
			eng := pageAddr + uintptr(done)
			if dir == ToTier {
				segs = append(segs, Seg{Src: eng, Dst: tier, Len: n})
			} else {
				segs = append(segs, Seg{Src: tier, Dst: eng, Len: n})
			}
			done += n
			off += n
		}
	}
	return segs
}

// CheckBatch refuses a batch of n blocks of buffer bufID whose job would
// exceed MaxSegments, before anything is evicted or marked; the error
// names the count field and the most entries that fit.
func CheckBatch(n int, buf *session.Buffer, bufID uint32, chunkBytes uint64) *abi.DescError {
	perLayer := (buf.PageBytes+chunkBytes-1)/chunkBytes + 1 // a page straddles at most this many chunks
	segs := uint64(n) * uint64(buf.Layers) * perLayer
	if segs > MaxSegments {
		limit := uint64(MaxSegments) / (uint64(buf.Layers) * perLayer)
		return abi.Invalid(abi.FieldCount, 0, "%d entries of buffer %d need up to %d copy segments, the limit is %d: send at most %d entries per request", n, bufID, segs, MaxSegments, limit)
	}
	return nil
}
