//go:build cgo

package native

/*
#cgo CFLAGS: -std=gnu11 -O2 -Wall -Wextra -Werror -I${SRCDIR}/../../../native/include -I${SRCDIR}/../../../native/src -I${SRCDIR}/../../../native/bench -isystem ${SRCDIR}/../../../build/cuda/include
#cgo LDFLAGS: -lprotobuf-c -lcrypto -ldl
#include "orbitkv/client.h"
*/
import "C"

// newClientError fills a ClientError for rc, with c's last_error detail
// when c is not nil.
func newClientError(c *C.okv_client, rc C.int) error {
	e := &ClientError{Code: int(rc), Text: C.GoString(C.okv_strerror(rc))}
	if c != nil {
		e.Detail = C.GoString(C.okv_last_error(c))
	}
	return e
}
