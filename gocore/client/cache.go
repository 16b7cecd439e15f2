package client

import (
	"time"

	"github.com/orbitkv/orbitkv/gocore/internal/native"
)

// The cache API of liborbitkv (DESIGN.md §5.3, §5.4), re-exported for the Go
// tools outside gocore/ (cmd/ may not import gocore/internal/...). The
// methods Query, Publish, Restore, RestorePoll, RestoreWait, Release,
// RegisterBuffer and MaxQueryHashes come with Client, an alias of
// native.Client; their documentation is there.

// Namespace is the 16-byte fingerprint of a cache identity.
type Namespace = native.Namespace

// BlockHash is a 16-byte block hash chosen by the engine.
type BlockHash = native.BlockHash

// NamespaceSpec is the cache identity that Fingerprint hashes.
type NamespaceSpec = native.NamespaceSpec

// Buffer is an engine KV buffer in sealed memfd shared memory (layer-major:
// page p of layer l at (l*PageCount+p)*PageBytes); Free releases it, and a
// registered buffer must stay allocated until its session is closed.
type Buffer = native.Buffer

// Lease is the answer of Query; Hits 0 means ID 0, nothing to release.
type Lease = native.Lease

// PublishResult counts the blocks a Publish stored and found present.
type PublishResult = native.PublishResult

// RestoreEntry copies lease block Block into page Page of every layer.
type RestoreEntry = native.RestoreEntry

// Error codes of the cache operations, for comparisons with Error.Code.
const (
	CodeUnadmitted = native.CodeUnadmitted // no capacity now, nothing done; retry later
	CodePending    = native.CodePending    // a restore is still copying
)

// Fingerprint computes the Namespace of s (okv_namespace_fingerprint).
// Errors: *Error for an invalid spec (block tokens 0, a size 0, a rank ≥
// its size, a string over 1024 bytes), or a NUL byte in a string.
func Fingerprint(s NamespaceSpec) (Namespace, error) { return native.Fingerprint(s) }

// AllocBuffer allocates an engine buffer of layers × pageCount pages of
// pageBytes bytes (a multiple of 64), pre-faulted (okv_buffer_alloc).
// Errors: *Error.
func AllocBuffer(layers uint32, pageBytes, pageCount uint64) (*Buffer, error) {
	return native.AllocBuffer(layers, pageBytes, pageCount)
}

// MemcpyBench copies n bytes from src to dst iters times in one C loop
// (memcpy(3)) and returns the elapsed time: the baseline of the copy bench.
// src and dst must each address n bytes of mapped memory.
func MemcpyBench(dst, src uintptr, n uint64, iters int) time.Duration {
	return native.MemcpyBench(dst, src, n, iters)
}
