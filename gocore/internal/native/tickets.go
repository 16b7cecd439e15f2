//go:build cgo

package native

/*
#cgo noescape okv_ticket_submit
#cgo nocallback okv_ticket_submit
#cgo noescape okv_ticket_poll
#cgo nocallback okv_ticket_poll
#cgo noescape okv_ticket_revise
#cgo nocallback okv_ticket_revise
#cgo noescape okv_ticket_claim
#cgo nocallback okv_ticket_claim
#cgo nocallback okv_ticket_cancel
#cgo nocallback okv_ticket_free
#cgo noescape okv_op_submit
#cgo nocallback okv_op_submit
#cgo noescape okv_op_poll
#cgo nocallback okv_op_poll
#cgo noescape okv_op_claim
#cgo nocallback okv_op_claim
#cgo nocallback okv_op_cancel
#cgo noescape okv_block_hashes_new
#cgo nocallback okv_block_hashes_new
#include "orbitkv/client.h"
*/
import "C"

import (
	"math"
	"unsafe"
)

// Query tickets of liborbitkv (native/src/tickets.c; client.h and abi.h
// "Query tickets"). A Ticket names one tracked query at the Manager by op
// id and revision; Submit sends its hashes once, Poll asks for its state
// without resending them, Revise replaces the view. Pending answers are
// not errors: err == nil with t.Live() true means the ticket is still
// pending (Status StatusLoading, or StatusCandidates for a ready Prepare
// ticket: Claim it). Poll, Revise of an unchanged view, Claim and Cancel
// allocate nothing on success (the answer lives on the stack; the noescape
// annotations above keep it there).

// BlockHashes is an immutable batch of block hashes in C memory (an owning
// reference to an okv_block_hashes). A ticket keeps its own reference, so
// Free may be called as soon as the batch is no longer needed for new
// specs. Revise compares batches by identity: pass the same *BlockHashes
// (with the same PrefixLen) to mean "unchanged". Not safe for concurrent
// use with the tickets that share it (one client goroutine).
type BlockHashes struct {
	b *C.okv_block_hashes // nil after Free
}

// NewBlockHashes copies hashes into a new batch (okv_block_hashes_new).
// Errors: *ClientError with -EINVAL for an empty slice, Code2Big for more
// than 2^32-1 hashes, -ENOMEM.
func NewBlockHashes(hashes []BlockHash) (*BlockHashes, error) {
	if uint64(len(hashes)) > math.MaxUint32 {
		return nil, newClientError(nil, C.OKV_E2BIG)
	}
	var b *C.okv_block_hashes
	rc := C.okv_block_hashes_new((*C.struct_okv_block_hash)(unsafe.Pointer(unsafe.SliceData(hashes))),
		C.uint32_t(len(hashes)), &b)
	if rc != 0 {
		return nil, newClientError(nil, rc)
	}
	return &BlockHashes{b: b}, nil
}

// Len is the number of hashes in the batch (0 after Free).
func (b *BlockHashes) Len() int {
	if b == nil || b.b == nil {
		return 0
	}
	return int(C.okv_block_hashes_len(b.b))
}

// Free drops this reference (okv_block_hashes_unref); tickets that use the
// batch keep theirs. A second Free is a no-op.
func (b *BlockHashes) Free() {
	if b == nil || b.b == nil {
		return
	}
	C.okv_block_hashes_unref(b.b)
	b.b = nil
}

// Ticket is a query ticket owned by liborbitkv (an okv_ticket). Release it
// with Client.FreeTicket on the client that submitted it (which cancels it
// if still live). Not safe for concurrent use.
type Ticket struct {
	t *C.okv_ticket // nil after FreeTicket
}

// OpID is the ticket's operation id (increasing per client).
func (t *Ticket) OpID() uint64 { return uint64(C.okv_ticket_op_id(t.t)) }

// Revision is the ticket's current revision (1 after Submit).
func (t *Ticket) Revision() uint32 { return uint32(C.okv_ticket_revision(t.t)) }

// Live reports whether the ticket is still pending at the Manager: false
// once a terminal answer, expiry, cancel or claim retired it.
func (t *Ticket) Live() bool { return C.okv_ticket_live(t.t) != 0 }

// querySpec fills the C spec (no Go pointers in it: the batch is C memory).
func querySpec(s *QuerySpec) C.struct_okv_query_spec {
	var cs C.struct_okv_query_spec
	cs.ns = *(*C.struct_okv_namespace)(unsafe.Pointer(&s.NS))
	if s.Hashes != nil {
		cs.hashes = s.Hashes.b
	}
	cs.prefix_len = C.uint32_t(s.PrefixLen)
	cs.flags = C.uint32_t(s.Flags)
	cs.request_id = C.uint64_t(s.RequestID)
	cs.group = C.uint64_t(s.Group)
	cs.recovery_first = C.uint32_t(s.RecoveryFirst)
	cs.recovery_count = C.uint32_t(s.RecoveryCount)
	return cs
}

func queryAnswer(a *C.struct_okv_query_answer) QueryAnswer {
	return QueryAnswer{
		Status:     uint16(a.status),
		Hits:       uint32(a.hit_count),
		RAMHits:    uint32(a.ram_hits),
		First:      uint32(a.first),
		LeaseID:    uint64(a.lease_id),
		LeaseBytes: uint64(a.lease_bytes),
		BlockBytes: uint64(a.block_bytes),
		OpID:       uint64(a.op_id),
		Revision:   uint32(a.revision),
	}
}

// ticketResult maps a ticket call's code: 0 and OKV_EPENDING are answers.
func (c *Client) ticketResult(rc C.int, a *C.struct_okv_query_answer) (QueryAnswer, error) {
	if rc != 0 && rc != C.OKV_EPENDING {
		return queryAnswer(a), newClientError(c.c, rc)
	}
	return queryAnswer(a), nil
}

// Submit sends spec under a fresh ticket (okv_ticket_submit). A terminal
// answer (StatusOK — with a lease to Release, or a Warmup answer —,
// StatusMiss, StatusCandidates for Discover) comes with a retired ticket;
// a pending one (StatusLoading, or a Prepare ticket) with a live ticket to
// Poll, Revise, Claim or Cancel. Either way free the ticket with
// FreeTicket. Errors (*ClientError, no ticket): CodeUnadmitted (operation
// bounds full: retry later with a new Submit), CodeInvalid (Detail names
// the field), Code2Big (view longer than MaxQueryHashes), CodeProto (a
// result that disagrees with the request), -EINVAL (no batch, PrefixLen
// beyond it, flags beyond 16 bits), and the channel errors of Ping.
func (c *Client) Submit(spec QuerySpec) (*Ticket, QueryAnswer, error) {
	if c.c == nil {
		return nil, QueryAnswer{}, errClosed()
	}
	cs := querySpec(&spec)
	var a C.struct_okv_query_answer
	var t *C.okv_ticket
	rc := C.okv_ticket_submit(c.c, &cs, &t, &a)
	ans, err := c.ticketResult(rc, &a)
	if err != nil {
		return nil, ans, err
	}
	return &Ticket{t: t}, ans, nil
}

// Poll asks for a live ticket's state without resending its hashes
// (okv_ticket_poll). nil error: a terminal answer (t retired) or a pending
// one (t.Live()). Errors: CodeExpired (expired at the Manager; retired),
// CodeInvalid (t already retired: answered locally without a message, or
// the Manager no longer knows it), CodeProto, the channel errors.
func (c *Client) Poll(t *Ticket) (QueryAnswer, error) {
	if c.c == nil {
		return QueryAnswer{}, errClosed()
	}
	var a C.struct_okv_query_answer
	rc := C.okv_ticket_poll(c.c, t.t, &a)
	return c.ticketResult(rc, &a)
}

// Revise replaces a live ticket's view, flags, namespace or recovery range
// with revision + 1 under the same op id (okv_ticket_revise). The same
// *BlockHashes, effective prefix length, flags, namespace and range as the
// live revision is just a Poll (no hashes resent). Returns as Submit and
// Poll; on CodeInvalid the live revision stays; CodeUnadmitted retires the ticket (the Manager settled it so and dropped it).
func (c *Client) Revise(t *Ticket, spec QuerySpec) (QueryAnswer, error) {
	if c.c == nil {
		return QueryAnswer{}, errClosed()
	}
	cs := querySpec(&spec)
	var a C.struct_okv_query_answer
	rc := C.okv_ticket_revise(c.c, t.t, &cs, &a)
	return c.ticketResult(rc, &a)
}

// Claim takes a Prepare ticket's result (okv_ticket_claim, exact revision):
// StatusOK with a lease, or StatusMiss (t retired); StatusLoading while it
// prepares (t live). Errors: CodeUnadmitted (nothing to claim: retired,
// expired or revised at the Manager; t retired — submit a fresh ordinary
// query), CodeInvalid (t retired), CodeProto, the channel errors.
func (c *Client) Claim(t *Ticket) (QueryAnswer, error) {
	if c.c == nil {
		return QueryAnswer{}, errClosed()
	}
	var a C.struct_okv_query_answer
	rc := C.okv_ticket_claim(c.c, t.t, &a)
	return c.ticketResult(rc, &a)
}

// Cancel retires a live ticket (okv_ticket_cancel, CancelQuery); the
// Manager drops its undelivered lease. Errors: CodeExpired (already
// expired; retired), CodeInvalid (already retired), the channel errors.
func (c *Client) Cancel(t *Ticket) error {
	if c.c == nil {
		return errClosed()
	}
	if rc := C.okv_ticket_cancel(c.c, t.t); rc != 0 {
		return newClientError(c.c, rc)
	}
	return nil
}

// FreeTicket releases t (okv_ticket_free): a live ticket is cancelled
// first, errors ignored (it expires at the Manager anyway). Nil, or a
// second call, is a no-op. After Close, t is freed without a cancel.
func (c *Client) FreeTicket(t *Ticket) {
	if t == nil || t.t == nil {
		return
	}
	C.okv_ticket_free(c.c, t.t)
	t.t = nil
}

// OpSubmit sends spec under (opID, rev) as given (okv_op_submit), for tests
// and tools that need what the ticket API never sends (an old revision, a
// retired op id). The client's next ticket op id moves past opID. Returns
// as Submit, without a ticket.
func (c *Client) OpSubmit(opID uint64, rev uint32, spec QuerySpec) (QueryAnswer, error) {
	if c.c == nil {
		return QueryAnswer{}, errClosed()
	}
	cs := querySpec(&spec)
	var a C.struct_okv_query_answer
	rc := C.okv_op_submit(c.c, C.uint64_t(opID), C.uint32_t(rev), &cs, &a)
	return c.ticketResult(rc, &a)
}

// OpPoll sends Poll(opID, rev) (okv_op_poll); returns as Poll. The result
// is checked against the op id and revision, and bounded by MaxQueryHashes.
func (c *Client) OpPoll(opID uint64, rev uint32) (QueryAnswer, error) {
	if c.c == nil {
		return QueryAnswer{}, errClosed()
	}
	var a C.struct_okv_query_answer
	rc := C.okv_op_poll(c.c, C.uint64_t(opID), C.uint32_t(rev), &a)
	return c.ticketResult(rc, &a)
}

// OpClaim sends Claim(opID, rev) (okv_op_claim); returns as Claim.
func (c *Client) OpClaim(opID uint64, rev uint32) (QueryAnswer, error) {
	if c.c == nil {
		return QueryAnswer{}, errClosed()
	}
	var a C.struct_okv_query_answer
	rc := C.okv_op_claim(c.c, C.uint64_t(opID), C.uint32_t(rev), &a)
	return c.ticketResult(rc, &a)
}

// OpCancel sends CancelQuery(opID, rev) (okv_op_cancel); returns as Cancel.
func (c *Client) OpCancel(opID uint64, rev uint32) error {
	if c.c == nil {
		return errClosed()
	}
	if rc := C.okv_op_cancel(c.c, C.uint64_t(opID), C.uint32_t(rev)); rc != 0 {
		return newClientError(c.c, rc)
	}
	return nil
}
