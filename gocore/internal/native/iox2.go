//go:build cgo && okv_iox2

package native

// The iceoryx2 transport's Rust library (native/iox2, built by make into
// build/iox2; the Makefile sets the okv_iox2 build tag only where it built
// it). OKV_HAVE_IOX2 compiles the C that calls it (orbitkv/iox2.h).

/*
#cgo CFLAGS: -DOKV_HAVE_IOX2
#cgo LDFLAGS: ${SRCDIR}/../../../build/iox2/release/libokv_iox2.a -lgcc_s -lutil -lrt -lpthread -lm -ldl
#include "orbitkv/iox2.h"
*/
import "C"

// Iceoryx2Built reports whether this binary carries the iceoryx2 transport
// (the okv_iox2 build tag: make found a Rust toolchain ≥ 1.89).
const Iceoryx2Built = true

// Iceoryx2Version is the version of the iceoryx2 crate the transport was
// built on ("0.10.0"), or "" without it.
func Iceoryx2Version() string { return C.GoString(C.okv_iox2_version()) }
