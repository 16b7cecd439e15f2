//go:build cgo

package native

/*
#cgo noescape okv_query
#cgo nocallback okv_query
#cgo noescape okv_publish
#cgo nocallback okv_publish
#cgo noescape okv_restore
#cgo nocallback okv_restore
#cgo nocallback okv_restore_poll
#cgo nocallback okv_release
#include "orbitkv/client.h"
*/
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"time"
	"unsafe"
)

// The cache operations of liborbitkv (native/src/ops.c, docs/design.md §5.3).
// Slices are passed to C directly — BlockHash, Namespace and RestoreEntry
// hold no Go pointers and C copies them into the slot before it returns
// (the noescape annotations above let their Go memory stay on the stack) —
// so Query, Publish, Restore and RestorePoll allocate nothing on success.

// errClosed is the error of a call on a closed Client.
func errClosed() error { return newClientError(nil, C.OKV_ECLOSED) }

// Query leases the longest resident prefix of hashes under ns (QueryBundle,
// okv_query). Lease.Hits 0 means a miss and no lease; otherwise the blocks
// stay pinned until Release (or Close). len(hashes) must be 1..MaxQueryHashes.
// Errors: *ClientError — CodeInvalid (Detail names the field and entry),
// Code2Big, CodeUnadmitted, -EINVAL for no hashes, and the channel errors
// of Ping.
func (c *Client) Query(ns Namespace, hashes []BlockHash) (Lease, error) {
	if c.c == nil {
		return Lease{}, errClosed()
	}
	if uint64(len(hashes)) > math.MaxUint32 {
		return Lease{}, newClientError(nil, C.OKV_E2BIG)
	}
	var l C.struct_okv_lease
	rc := C.okv_query(c.c, (*C.struct_okv_namespace)(unsafe.Pointer(&ns)),
		(*C.struct_okv_block_hash)(unsafe.Pointer(unsafe.SliceData(hashes))), C.uint32_t(len(hashes)), &l)
	if rc != 0 {
		return Lease{}, newClientError(c.c, rc)
	}
	return Lease{ID: uint64(l.lease_id), Hits: uint32(l.hit_count), Bytes: uint64(l.lease_bytes),
		BlockBytes: uint64(l.block_bytes)}, nil
}

// Publish stores block i = page pages[i] of every layer of buffer bufID
// under (ns, hashes[i]) (okv_publish); len(hashes) must equal len(pages).
// A batch larger than MaxPublishEntries is sent in chunks; when it returns,
// the copies are done and the blocks are visible. On error the result
// counts the chunks that were published before it.
//
// A sent chunk is waited for without a deadline, until the Manager's reply
// or its exit (never CodeTimedOut: the Manager may be reading the source
// pages); past the client's timeout a watchdog line goes to stderr, then
// at most once a minute. An ambiguous acknowledgement (malformed reply,
// counts beyond the entries sent, a status Publish never gets) returns
// CodeFenced and fences bufID: its pages stay pinned until the Manager
// exits, and later Publish and Restore naming bufID return CodeFenced
// without sending. Do not rewrite the pages of a fenced buffer.
//
// Errors: *ClientError — CodeUnadmitted (no unpinned RAM now; retry
// later), CodeInvalid, CodeFenced, CodeManagerDied, CodeClosed (closed, or
// no pidfd of the Manager), -EINVAL for a buffer id not registered on c,
// and the channel errors of a chunk that was not sent.
func (c *Client) Publish(ns Namespace, bufID uint32, hashes []BlockHash, pages []uint32) (PublishResult, error) {
	if c.c == nil {
		return PublishResult{}, errClosed()
	}
	if len(hashes) != len(pages) {
		return PublishResult{}, fmt.Errorf("native: Publish of %d hashes with %d pages; want one page per hash", len(hashes), len(pages))
	}
	if uint64(len(hashes)) > math.MaxUint32 {
		return PublishResult{}, newClientError(nil, C.OKV_E2BIG)
	}
	var r C.struct_okv_publish_result
	rc := C.okv_publish(c.c, (*C.struct_okv_namespace)(unsafe.Pointer(&ns)), C.uint32_t(bufID),
		(*C.struct_okv_block_hash)(unsafe.Pointer(unsafe.SliceData(hashes))),
		(*C.uint32_t)(unsafe.Pointer(unsafe.SliceData(pages))), C.uint32_t(len(hashes)), &r)
	res := PublishResult{Stored: uint32(r.stored), Present: uint32(r.present)}
	if rc != 0 {
		return res, newClientError(c.c, rc)
	}
	return res, nil
}

// PublishRecords is Publish with a block record per block
// (okv_publish_records): records[i] describes block i, and the Manager
// keeps it with the block and announces it in its KV events
// (docs/events.md). len(records) must equal len(hashes). The token ids are
// pinned (runtime.Pinner) for the call: C reads them and keeps nothing.
// Errors: those of Publish; CodeInvalid also for a record the Manager
// refuses (no tokens, more than OKV_RECORD_MAX_TOKENS).
func (c *Client) PublishRecords(ns Namespace, bufID uint32, hashes []BlockHash, pages []uint32, records []BlockRecord) (PublishResult, error) {
	if c.c == nil {
		return PublishResult{}, errClosed()
	}
	if len(hashes) != len(pages) || len(records) != len(hashes) {
		return PublishResult{}, fmt.Errorf("native: PublishRecords of %d hashes, %d pages and %d records; want one page and one record per hash", len(hashes), len(pages), len(records))
	}
	if uint64(len(hashes)) > math.MaxUint32 {
		return PublishResult{}, newClientError(nil, C.OKV_E2BIG)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	infos := make([]C.struct_okv_block_info, len(records))
	for i, r := range records {
		infos[i].engine_hash = C.uint64_t(r.EngineHash)
		if r.HasParent {
			infos[i].parent_hash, infos[i].has_parent = C.uint64_t(r.ParentHash), 1
		}
		infos[i].token_count = C.uint32_t(len(r.Tokens))
		if len(r.Tokens) > 0 {
			p := unsafe.SliceData(r.Tokens)
			pin.Pin(p)
			infos[i].tokens = (*C.uint32_t)(unsafe.Pointer(p))
		}
	}
	var r C.struct_okv_publish_result
	rc := C.okv_publish_records(c.c, (*C.struct_okv_namespace)(unsafe.Pointer(&ns)), C.uint32_t(bufID),
		(*C.struct_okv_block_hash)(unsafe.Pointer(unsafe.SliceData(hashes))),
		(*C.uint32_t)(unsafe.Pointer(unsafe.SliceData(pages))),
		(*C.struct_okv_block_info)(unsafe.Pointer(unsafe.SliceData(infos))), C.uint32_t(len(hashes)), &r)
	res := PublishResult{Stored: uint32(r.stored), Present: uint32(r.present)}
	if rc != 0 {
		return res, newClientError(c.c, rc)
	}
	return res, nil
}

// Restore starts copying leased blocks into buffer bufID (okv_restore):
// entries[i] copies lease block entries[i].Block into page entries[i].Page
// of every layer. It returns the operation id for RestorePoll and
// RestoreWait. The destination pages belong to the Manager's copy workers
// until the operation ends: do not touch them before. len(entries) must be
// 1..MaxRestoreEntries. Errors: *ClientError — CodeInvalid (unknown lease,
// page out of range or busy, block outside the lease), Code2Big,
// CodeFenced (bufID was fenced by an ambiguous Publish; nothing sent), and
// the channel errors.
func (c *Client) Restore(leaseID uint64, bufID uint32, entries []RestoreEntry) (uint64, error) {
	if c.c == nil {
		return 0, errClosed()
	}
	if uint64(len(entries)) > math.MaxUint32 {
		return 0, newClientError(nil, C.OKV_E2BIG)
	}
	var op C.uint64_t
	rc := C.okv_restore(c.c, C.uint64_t(leaseID), C.uint32_t(bufID),
		(*C.struct_okv_restore_entry)(unsafe.Pointer(unsafe.SliceData(entries))), C.uint32_t(len(entries)), &op)
	if rc != 0 {
		return 0, newClientError(c.c, rc)
	}
	return uint64(op), nil
}

// RestorePoll asks whether restore op has ended, without blocking
// (okv_restore_poll): (true, nil) when it completed — the operation is
// consumed and a second poll is CodeInvalid — and (false, nil) while it
// copies. Errors: *ClientError — CodeInternal (the copy failed; the
// operation is consumed), CodeInvalid (unknown id), CodeExpired (the
// Manager answered Timeout), the channel errors.
func (c *Client) RestorePoll(op uint64) (done bool, err error) {
	if c.c == nil {
		return false, errClosed()
	}
	switch rc := C.okv_restore_poll(c.c, C.uint64_t(op)); rc {
	case 0:
		return true, nil
	case C.OKV_EPENDING:
		return false, nil
	default:
		return false, newClientError(c.c, rc)
	}
}

// RestoreWait blocks until restore op ends or timeout passes
// (okv_restore_wait: polls, then sleeps on the session eventfd at most
// 50 ms at a time). timeout is rounded up to whole milliseconds and capped
// at one hour. Returns nil when the restore completed; errors as
// RestorePoll, plus CodeTimedOut (the pages are still the Manager's) and
// CodeManagerDied.
func (c *Client) RestoreWait(op uint64, timeout time.Duration) error {
	if c.c == nil {
		return errClosed()
	}
	ms := uint64(0)
	if timeout > 0 {
		ms = uint64((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	if ms > C.OKV_MAX_TIMEOUT_MS {
		ms = C.OKV_MAX_TIMEOUT_MS
	}
	if rc := C.okv_restore_wait(c.c, C.uint64_t(op), C.uint32_t(ms)); rc != 0 {
		return newClientError(c.c, rc)
	}
	return nil
}

// Release ends lease leaseID (okv_release): its pins and reserved bytes are
// released. Errors: *ClientError — CodeInvalid (unknown, released or
// another session's lease), the channel errors.
func (c *Client) Release(leaseID uint64) error {
	if c.c == nil {
		return errClosed()
	}
	if rc := C.okv_release(c.c, C.uint64_t(leaseID)); rc != 0 {
		return newClientError(c.c, rc)
	}
	return nil
}

// MaxQueryHashes is the most hashes one Query may carry on this session
// (okv_max_query_hashes; 16380 with the default 256 KiB descriptor area).
func (c *Client) MaxQueryHashes() int { return int(C.okv_max_query_hashes(c.c)) }

// MaxRestoreEntries is the most entries one Restore may carry.
func (c *Client) MaxRestoreEntries() int { return int(C.okv_max_restore_entries(c.c)) }

// MaxPublishEntries is the most entries of one Publish chunk (Publish
// splits larger batches itself).
func (c *Client) MaxPublishEntries() int { return int(C.okv_max_publish_entries(c.c)) }

// NotificationFD is the session eventfd (borrowed: do not close; -1 after
// Close), readable when a restore ends. RestoreWait reads it; a caller that
// polls it itself should read(2) it to reset it, then RestorePoll.
func (c *Client) NotificationFD() int { return int(C.okv_notification_fd(c.c)) }
