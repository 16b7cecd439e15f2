//go:build cgo

package native

/*
#cgo CFLAGS: -std=gnu11 -O2 -Wall -Wextra -Werror -I${SRCDIR}/../../../native/include -I${SRCDIR}/../../../native/src -I${SRCDIR}/../../../native/bench
#cgo LDFLAGS: -lprotobuf-c
#include "orbitkv/client.h"
#include "server.h"
*/
import "C"

import "errors"

// ErrNoCgo is returned by every constructor of a build without cgo.
var ErrNoCgo = errors.New("native: built without cgo; the OrbitKV channel needs cgo and a C compiler")

// ClientError is an error code of liborbitkv (a negative okv_error or
// -errno), with its okv_strerror text and the client's last_error detail.
type ClientError struct {
	Code   int
	Detail string
}

func (e *ClientError) Error() string {
	msg := C.GoString(C.okv_strerror(C.int(e.Code)))
	if e.Detail != "" {
		return "liborbitkv: " + msg + ": " + e.Detail
	}
	return "liborbitkv: " + msg
}

// Error codes of liborbitkv (client.h enum okv_error), for errors.Is-style
// comparisons on ClientError.Code.
const (
	CodeProto        = int(C.OKV_EPROTO)
	CodeVersion      = int(C.OKV_EVERSION)
	CodeRefused      = int(C.OKV_EREFUSED)
	CodeStaleSession = int(C.OKV_ESTALE_SESSION)
	CodeStaleGen     = int(C.OKV_ESTALE_GENERATION)
	CodeInvalid      = int(C.OKV_EINVALID)
	CodeTimedOut     = int(C.OKV_ETIMEDOUT)
	CodeManagerDied  = int(C.OKV_EMANAGER_DIED)
	CodeClosed       = int(C.OKV_ECLOSED)
	CodeInternal     = int(C.OKV_EINTERNAL)
	CodeUnsupported  = int(C.OKV_EUNSUPPORTED)
	CodeApplication  = int(C.OKV_EAPPLICATION)
)
