//go:build cgo

package native

/*
#cgo noescape okv_discover_local
#cgo nocallback okv_discover_local
#include <errno.h>
#include <stdlib.h>
#include "orbitkv/client.h"
#include "pingpong.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"time"
	"unsafe"
)

// DiscoverOpen maps the Manager's discovery index of ns read-only
// (okv_discover_open: one MapDiscovery lifecycle round trip, or nothing
// when mapped already). Errors: *ClientError — CodeApplication when the
// Manager refused (its --discover-bytes budget, or none served; Detail
// says which), -EINVAL, -ENOSPC (16 namespaces mapped), the lifecycle
// errors of Health.
func (c *Client) DiscoverOpen(ns Namespace) error {
	if c.c == nil {
		return errClosed()
	}
	if rc := C.okv_discover_open(c.c, (*C.struct_okv_namespace)(unsafe.Pointer(&ns))); rc != 0 {
		return newClientError(c.c, rc)
	}
	return nil
}

// DiscoverLocal is how many of hashes, from the first, are resident in
// the Manager's RAM tier, read from the mapped discovery index
// (okv_discover_local: no syscall, no message once mapped; the first call
// for ns maps it). Advisory: no lease is taken. Allocates nothing.
// Errors: as DiscoverOpen on the first call; *ClientError with
// CodeDiscoverBusy when a bucket stayed mid-update (a Manager descheduled
// or dead while writing; nothing was sent).
func (c *Client) DiscoverLocal(ns Namespace, hashes []BlockHash) (uint32, error) {
	if c.c == nil {
		return 0, errClosed()
	}
	var count C.uint32_t
	rc := C.okv_discover_local(c.c, (*C.struct_okv_namespace)(unsafe.Pointer(&ns)),
		(*C.struct_okv_block_hash)(unsafe.Pointer(unsafe.SliceData(hashes))), C.size_t(len(hashes)), &count)
	if rc != 0 {
		return uint32(count), newClientError(c.c, rc)
	}
	return uint32(count), nil
}

// DiscoverMode is a subject of BenchDiscover.
type DiscoverMode int

// Subjects of BenchDiscover (okvb_discover_measure's modes).
const (
	DiscoverLocalMode DiscoverMode = 0 // okv_discover_local from the mapped index
	DiscoverRTTMode   DiscoverMode = 1 // a QueryBundle ticket with QueryDiscover
	DiscoverEmptyMode DiscoverMode = 2 // an empty call: the timer's floor
)

// BenchDiscover times len(out) discoveries of hashes under ns by mode in
// one cgo call (okvb_measure: warmup untimed calls first, cadence period,
// 0 back to back), each in nanoseconds into out, each answer checked to
// be want. c must not be used concurrently. Errors: syscall.EPROTO
// (wrapped) when an answer differed from want, *ClientError from the
// calls.
func BenchDiscover(c *Client, ns Namespace, hashes []BlockHash, want uint32, mode DiscoverMode, warmup int, period time.Duration, out []uint64) error {
	if c == nil || c.c == nil {
		return fmt.Errorf("bench discover: %w", newClientError(nil, C.OKV_ECLOSED))
	}
	// hashes is copied to C memory: okvb_measure runs for longer than a
	// cgo call may borrow Go memory safely under the noescape rules.
	n := len(hashes)
	ch := (*C.struct_okv_block_hash)(C.malloc(C.size_t(max(n, 1)) * C.size_t(unsafe.Sizeof(BlockHash{}))))
	defer C.free(unsafe.Pointer(ch))
	copy(unsafe.Slice((*BlockHash)(unsafe.Pointer(ch)), n), hashes)
	cns := (*C.struct_okv_namespace)(C.malloc(C.size_t(unsafe.Sizeof(ns))))
	defer C.free(unsafe.Pointer(cns))
	*(*Namespace)(unsafe.Pointer(cns)) = ns
	rc := measure(func(iters, w, p C.uint64_t, o *C.uint64_t) C.int {
		return C.okvb_discover_measure(c.c, cns, ch, C.size_t(n), C.uint32_t(want), C.int(mode), iters, w, p, o)
	}, warmup, period, out)
	switch {
	case rc == 0:
		return nil
	case rc == -C.EPROTO:
		return fmt.Errorf("bench discover: an answer differs from %d: %w", want, syscall.EPROTO)
	case rc > -1000:
		return fmt.Errorf("bench discover: %w", syscall.Errno(-rc))
	default:
		return fmt.Errorf("bench discover: %w", newClientError(c.c, rc))
	}
}
