// Package native is the only Go package that imports "C" (CONTRIBUTING.md habit 9).
//
// It wraps five pieces of native/:
//
//   - the Manager's channel poll loop (native/src/server.c) as Server: one
//     cgo crossing per batch (Step posts the previous batch's replies and
//     returns the next batch of requests), with event and reply arrays
//     allocated once in C memory and viewed from Go without copies;
//   - the copy engine (native/src/copy.c) as CopyEngine: worker threads
//     behind one copy-backend interface (host memcpy, or the CUDA backend
//     of native/src/copy_cuda.c as CUDA, which dlopens libcuda.so.1 at run
//     time); one crossing submits a whole job's segments, one drains a
//     batch of completions;
//   - liborbitkv's client (native/src/client.c, ops.c, buffer.c,
//     identity.c) as Client, Buffer and Fingerprint, for Go tools
//     (orbitkv-bench, orbitkvctl, tests);
//   - the C layout of abi.h (Layout), so gocore/abi can prove its mirror;
//   - the channel benchmark loops (native/bench: raw shm-spin, futex and
//     Unix-socket ping-pongs, and okv_ping timed in C), one crossing per run,
//     re-exported to cmd/orbitkv-bench by gocore/pingpong.
//
// Build cache: Go keys its cache on the files of this directory, not on the
// native/ sources the unity files include. The Makefile passes a hash of
// native/ in CGO_CFLAGS so an edit there rebuilds this package; when you
// call go directly after editing C, use `go build -a` or `make`.
//
// The C sources are compiled into this package through unity files
// (csrc_*.c, bench_csrc.c) rather than linked from the CMake build, so `go build` needs
// nothing but a C compiler, libprotobuf-c and cuda.h in build/cuda/include
// (ci/cuda-headers.sh, run by `make deps-build`; a header only: nothing of
// CUDA is linked).
//
// The iceoryx2 transport (Server.UseIceoryx2, AttachIceoryx2, the
// iceoryx2_raw bench kind, liborbitkv's iceoryx2 client) is the Rust static
// library native/iox2, which make builds into build/iox2 where a Rust
// toolchain >= 1.89 is found and then links here through the okv_iox2 build
// tag (iox2.go: -DOKV_HAVE_IOX2 and the library on the link line). Without
// the tag Iceoryx2Built is false and those entry points return
// ErrNoIceoryx2. The Makefile's hash of native/ covers the crate's sources
// and Cargo.lock, since Go links the library by path.
//
// Memory ownership: C never keeps a pointer into the Go heap. Slot and
// doorbell mappings handed to Server are mmap'd memory owned by
// gocore/session (not Go heap) and must stay mapped until Detach returns.
// CopyEngine.Submit copies the segment array into C memory; the addresses
// in it point into mappings (RAM tier, engine buffers) that the caller keeps
// mapped until the job's completion has been drained.
// Arrays returned by Events/Replies live in C memory owned by the Server and
// stay valid until Close.
//
// A build without cgo compiles (native_nocgo.go) and every constructor
// returns ErrNoCgo.
package native
