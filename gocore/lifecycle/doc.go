// Package lifecycle is the codec of the lifecycle frames that follow the
// bootstrap hello on an OrbitKV bootstrap Unix socket (docs/design.md §5.1).
//
// It owns the byte layout of a frame, its validation and the passing of file
// descriptors with it; it does not own the socket, the session or what a
// frame means. The bootstrap server (gocore/bootstrap) and tests import it;
// the C client library has its twin in native/src/lifecycle.c.
//
// # Frame layout
//
// A frame is a fixed 24-byte header followed by Length bytes of protobuf body
// (one message of proto/lifecycle.proto, package lifecyclepb). The header is
// struct okv_frame_header of native/include/orbitkv/abi.h, little-endian,
// every field at its natural alignment (abi.h: "no packed structs"):
//
//	offset  size  field     rule
//	     0     4  magic     OKV_FRAME_MAGIC 0x46564B4F ("OKVF" as LE bytes)
//	     4     2  version   OKV_FRAME_VERSION = 2, compared for equality
//	     6     2  code      a Code: request 1..6, request|0x8000 reply, 0xFFFF error
//	     8     8  epoch     Manager incarnation epoch from the hello reply
//	    16     4  length    body bytes, <= MaxBody (16 MiB, OKV_FRAME_MAX_BODY)
//	    20     4  reserved  must be zero
//	    24     -  body      Length bytes of protobuf
//
// Up to MaxFiles (64, OKV_FRAME_MAX_FDS) file descriptors travel with a frame
// as one SCM_RIGHTS control message attached to the first byte of the header
// (RegisterBuffers carries the engine's buffer memfds this way).
//
// # Errors
//
// Every decoding error wraps ErrMalformed: the Manager closes the connection
// on a malformed frame (docs/design.md §5.1). A frame whose epoch is not the
// current Manager epoch additionally wraps ErrStaleEpoch. An application
// error travels as a frame with code CodeError and a lifecyclepb.Error body;
// the connection stays open after it.
//
// # Concurrency
//
// The functions keep no state. One goroutine may read frames while another
// writes them on the same connection; two concurrent writers or two
// concurrent readers on one connection interleave bytes and must be
// serialised by the caller.
package lifecycle
