"""Query tickets: their answers, the ``Ticket`` record, and the ticket
operations of ``CacheManagerClient`` (abi.h "Query tickets"; docs/cache.md
"Operation semantics: tickets"; docs/design.md §6 rules 1, 5, 6).

A ticket is a tracked query the Manager keeps: submitted once, then polled
by (op id, revision) without resending hashes, revised with a new view,
claimed (PREPARE), cancelled, or retired. liborbitkv owns the ticket state
(``okv_ticket``); this module keeps a Python ``Ticket`` beside it and frees
the C ticket as soon as it is no longer live.

``TicketOps`` is a mixin of ``CacheManagerClient`` (it uses the client's
lock, handle and error translation); it is not used on its own.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import time
from typing import TYPE_CHECKING, Callable

from . import _abi, _check
from ._abi import Code, QueryFlags, Status
from ._native import lib
from .errors import InvalidRequest, OrbitKVError, TimedOut
from .hashes import HashesLike, HashView

if TYPE_CHECKING:  # pragma: no cover
    from .client import CacheManagerClient

__all__ = ["QueryAnswer", "Ticket", "TicketOps"]

# Longest sleep of wait() between polls when no notification arrives: a lost
# wake-up costs at most this (the C restore wait uses the same 50 ms).
_FALLBACK_S = 0.05


@dataclasses.dataclass(frozen=True, slots=True)
class QueryAnswer:
    """A ticket's answer (client.h ``struct okv_query_answer``).

    * ``status`` - "Ok", "Miss", "Candidates" (terminal, or for a PREPARE
      ticket: ready to claim) or "Loading" (pending);
    * ``hit_count`` - Ok: blocks leased; Candidates: leading blocks held
      locally (RAM, then SSD); WARMUP Ok: blocks warming (0 = skipped);
      Loading: hits so far;
    * ``ram_hits`` - leading blocks resident in RAM now;
    * ``first`` - chain position of lease block 0 (a recovery lease starts
      at its ``recovery`` first position, a prefix lease at 0);
    * ``lease_id`` - nonzero when Ok with a lease: restore from it, then
      end it with ``release()`` (the Manager keeps its blocks pinned);
    * ``lease_bytes`` - bytes the lease pins and reserves;
    * ``block_bytes`` - bytes of one block (layers * page_bytes);
    * ``op_id``, ``revision`` - the ticket and revision answered.
    """

    status: str
    hit_count: int
    ram_hits: int
    first: int
    lease_id: int
    lease_bytes: int
    block_bytes: int
    op_id: int
    revision: int

    @property
    def terminal(self) -> bool:
        """Ok, Miss or Candidates (for a PREPARE ticket, Candidates means
        "ready: claim it", see ``Ticket.live``)."""
        return self.status != "Loading"

    @classmethod
    def _from_c(cls, a: _abi.QueryAnswerC) -> "QueryAnswer":
        try:
            status = _abi.STATUS_NAMES[Status(a.status)]
        except ValueError:
            status = f"status {a.status}"
        return cls(status, a.hit_count, a.ram_hits, a.first, a.lease_id, a.lease_bytes, a.block_bytes,
                   a.op_id, a.revision)


class Ticket:
    """A query ticket (abi.h "Query tickets"; docs/design.md §6 rules 1, 5, 6).

    Made by ``CacheManagerClient.query``; driven by the client's ``poll``,
    ``revise``, ``claim``, ``cancel``, ``wait`` and ``retire``.

    * ``answer`` - the latest ``QueryAnswer``;
    * ``live`` - True while the Manager holds the ticket (Loading, or a
      PREPARE ticket until claimed); False once a terminal answer was
      delivered, or it was cancelled, expired or retired;
    * ``op_id``, ``revision`` - the ticket's id and current revision;
    * ``view`` - the ``HashView`` of the live revision; ``flags``.

    A ticket that stops being live releases its C memory at once; a live
    ticket is cancelled by ``retire()``, by the client's ``close()``, or
    (on the next call of its client) after it is garbage collected.
    """

    __slots__ = ("_client", "_ptr", "_op_id", "_revision", "_ns", "_flags", "_recovery", "_request_id",
                 "_group", "view", "answer", "_end", "__weakref__")

    def __init__(self, client: "CacheManagerClient", ptr: int, ns: bytes, view: HashView, flags: int,
                 recovery: tuple[int, int], request_id: int, group: int, answer: QueryAnswer):
        self._client = client
        self._ptr: int | None = ptr
        self._op_id = lib.okv_ticket_op_id(ptr)
        self._revision = lib.okv_ticket_revision(ptr)
        self._ns = ns
        self._flags = flags
        self._recovery = recovery
        self._request_id = request_id
        self._group = group
        self.view = view
        self.answer = answer
        # Why the ticket is no longer live ("answered", "cancelled", ...).
        self._end: str | None = None

    @property
    def live(self) -> bool:
        # Under the client's lock: another thread may be freeing the C ticket.
        if self._client._forked():
            return False
        with self._client._lock:
            return self._ptr is not None and bool(lib.okv_ticket_live(self._ptr))

    @property
    def op_id(self) -> int:
        return self._op_id

    @property
    def revision(self) -> int:
        if self._client._forked():
            return self._revision
        with self._client._lock:
            if self._ptr is not None:
                self._revision = lib.okv_ticket_revision(self._ptr)
            return self._revision

    @property
    def flags(self) -> QueryFlags:
        return QueryFlags(self._flags)

    @property
    def prepare(self) -> bool:
        return bool(self._flags & QueryFlags.PREPARE)

    @property
    def ready(self) -> bool:
        """A live PREPARE ticket whose result is ready: ``claim()`` it."""
        return self.prepare and self.answer.status == "Candidates" and self.live

    def __del__(self) -> None:
        ptr, self._ptr = self._ptr, None
        if ptr is not None:
            try:
                self._client._orphan(ptr, self.view)
            except Exception:
                pass

    def __repr__(self) -> str:
        state = "live" if self.live else f"retired ({self._end or 'answered'})"
        return f"Ticket(op_id={self._op_id}, revision={self._revision}, {state}, answer={self.answer.status})"


class TicketOps:
    """The ticket operations of ``CacheManagerClient`` (mixin)."""

    def query(self, ns: bytes, hashes: HashesLike, *, flags: int = 0, request_id: int = 0, group: int = 0,
              recovery: tuple[int, int] | None = None) -> Ticket:
        """Submit a query under a fresh ticket (okv_ticket_submit; abi.h
        "Query tickets"); returns the ``Ticket`` with its first answer.

        * ``ns``: 16-byte namespace (``CacheIdentity.namespace()``);
        * ``hashes``: ``BlockHashes``, ``HashView`` (a prefix of one) or a
          sequence of 16-byte values (copied into a new batch); 1 ..
          ``max_query_hashes`` hashes;
        * ``flags``: ``QueryFlags``; ``recovery=(first, count)`` leases
          exactly hashes [first, first + count) and implies
          ``QueryFlags.RECOVERY``;
        * ``request_id``, ``group``: the engine request (uint64), kept for
          the ticket's life.

        ``ticket.answer.status``: Ok (a lease when ``lease_id`` != 0:
        restore, then ``release``), Miss, Candidates (DISCOVER; or PREPARE
        ready) - terminal, the ticket is retired - or Loading (``live``:
        poll or wait). Raises ``Unadmitted`` (operation bounds full: 128
        per session, 1024 per Manager by default; nothing kept; retry with
        a fresh query - docs/design.md §6 rule 5), ``InvalidRequest`` (field
        named), ``TooBig``, ``BadArgument``, ``TimedOut``, ``ManagerDied``,
        ``Closed``."""
        ns_c = _check.namespace("query", ns)
        view = _check.as_view("query", hashes)
        flags = _check.check_flags("query", flags, recovery)
        first, count = _check.check_recovery("query", recovery, view)
        if recovery is not None:
            flags |= QueryFlags.RECOVERY
        _check.check_u64("query", "request_id", request_id)
        _check.check_u64("query", "group", group)
        spec = _abi.QuerySpec(ns=ns_c, prefix_len=view.length, flags=int(flags), request_id=request_id,
                              group=group, recovery_first=first, recovery_count=count)
        out = ctypes.c_void_p()
        with self._lock:
            h = self._handle("query")
            spec.hashes = view.batch.handle
            rc = lib.okv_ticket_submit(h, ctypes.byref(spec), ctypes.byref(out), ctypes.byref(self._ans))
            if rc and rc != Code.EPENDING:
                raise self._fail("query", rc, h)
            answer = QueryAnswer._from_c(self._ans)
            t = Ticket(self, out.value, bytes(ns), view, int(flags), (first, count), request_id, group, answer)
            self._tickets.add(t)
            self._settle(h, t, "answered")
        return t

    def poll(self, ticket: Ticket) -> QueryAnswer:
        """The ticket's current answer (okv_ticket_poll: a Poll of (op id,
        revision), no hashes resent). ``ticket.live`` tells whether it is
        still pending; a PREPARE ticket answers Candidates when ready and
        stays live until ``claim``.

        A ticket retired by a terminal answer returns that answer without a
        message (abi.h: unknown or retired polls never submit work); one
        retired otherwise (cancelled, expired, closed) raises
        ``InvalidRequest``. Raises ``Expired`` (the Manager answered
        Timeout; retired), ``InvalidRequest``, ``TimedOut``,
        ``ManagerDied``, ``Closed``."""
        with self._lock:
            h = self._handle("poll")
            if not ticket.live:
                return self._retired_answer("poll", ticket)
            rc = lib.okv_ticket_poll(h, ticket._ptr, ctypes.byref(self._ans))

            def unadmitted(err: OrbitKVError) -> None:
                # A ticket resolved Unadmitted (e.g. a lease over the whole
                # byte budget) is retired at the Manager once delivered,
                # but liborbitkv keeps it live: free it here (the cancel it
                # sends is answered Invalid, ignored).
                if rc == Code.EUNADMITTED:
                    ptr, ticket._ptr = ticket._ptr, None
                    ticket._end = err.status
                    lib.okv_ticket_free(h, ptr)
            return self._answer("poll", h, ticket, rc, "answered", unadmitted)

    def revise(self, ticket: Ticket, hashes: HashesLike, flags: int | None = None, *,
               recovery: tuple[int, int] | None = None) -> QueryAnswer:
        """Replace a live ticket's view (hashes, recovery range) or wait
        policy with revision + 1 (okv_ticket_revise; docs/design.md §6 rule 6).

        ``flags`` None keeps the ticket's flags; only
        ``QueryFlags.WAIT_FOR_FULL_PREFIX`` may change (other flags, the
        namespace, request_id and group stay the ticket's). ``recovery``
        None keeps the ticket's range. The same view as the live revision
        (same ``BlockHashes`` object, same length), flags and range is a
        plain Poll: no hashes are resent and ``ticket.revision`` does not
        change (liborbitkv compares batch pointer and length, in constant
        time; equal hashes in another batch make a new revision). Returns
        the answer as ``poll``. Raises ``InvalidRequest``
        (retired ticket; or the Manager refused the revision - field
        request, desc_flags or namespace - and the live revision stays),
        ``Expired``, ``TooBig``, ``TimedOut``, ``ManagerDied``, ``Closed``."""
        view = _check.as_view("revise", hashes)
        if recovery is None and ticket._flags & QueryFlags.RECOVERY:
            recovery = ticket._recovery
        flags = ticket._flags if flags is None else int(_check.check_flags("revise", flags, recovery))
        first, count = _check.check_recovery("revise", recovery, view)
        if recovery is not None:
            flags |= QueryFlags.RECOVERY
        spec = _abi.QuerySpec(ns=_check.namespace("revise", ticket._ns), prefix_len=view.length, flags=int(flags),
                              request_id=ticket._request_id, group=ticket._group, recovery_first=first,
                              recovery_count=count)
        with self._lock:
            h = self._handle("revise")
            if not ticket.live:
                raise InvalidRequest("revise", Code.EINVALID,
                                     f"ticket op id {ticket.op_id} is retired ({ticket._end or 'answered'}); "
                                     "submit a fresh query")
            spec.hashes = view.batch.handle
            before = lib.okv_ticket_revision(ticket._ptr)
            rc = lib.okv_ticket_revise(h, ticket._ptr, ctypes.byref(spec), ctypes.byref(self._ans))
            if lib.okv_ticket_revision(ticket._ptr) != before:
                ticket.view, ticket._flags, ticket._recovery = view, int(flags), (first, count)
            return self._answer("revise", h, ticket, rc, "answered")

    def claim(self, ticket: Ticket) -> QueryAnswer:
        """Claim a PREPARE ticket's result of its exact revision
        (okv_ticket_claim): Ok with a lease, or Miss (terminal; retired), or
        Loading (still preparing; live). Raises ``Unadmitted`` when the
        Manager has nothing to claim (not a preparation, another revision,
        retired or expired; the ticket is retired: submit a fresh ordinary
        query), ``InvalidRequest`` (a retired ticket), ``Expired``,
        ``TimedOut``, ``ManagerDied``, ``Closed``."""
        with self._lock:
            h = self._handle("claim")
            if not ticket.live:
                raise InvalidRequest("claim", Code.EINVALID,
                                     f"ticket op id {ticket.op_id} is retired ({ticket._end or 'answered'})")
            rc = lib.okv_ticket_claim(h, ticket._ptr, ctypes.byref(self._ans))
            return self._answer("claim", h, ticket, rc, "claimed")

    def cancel(self, ticket: Ticket) -> bool:
        """Cancel a live ticket (okv_ticket_cancel; CancelQuery of its exact
        revision): the Manager drops its undelivered lease. Returns True
        when it cancelled a live ticket, False when the ticket was already
        retired (nothing sent). A lease already delivered (an Ok answer) is
        not touched: ``release`` it. Raises ``Expired`` (it expired first;
        retired), ``TimedOut``, ``ManagerDied``, ``Closed``."""
        with self._lock:
            h = self._handle("cancel")
            if not ticket.live:
                return False
            rc = lib.okv_ticket_cancel(h, ticket._ptr)
            if rc:
                err = self._fail("cancel", rc, h)
                self._settle(h, ticket, err.status)
                raise err
            self._settle(h, ticket, "cancelled")
            return True

    def retire(self, ticket: Ticket) -> None:
        """Free the ticket (okv_ticket_free); a live one is cancelled first,
        errors ignored (it expires at the Manager anyway). Idempotent; works
        on a closed client too. The ticket's last answer stays readable.
        In a forked child it frees the child's copy without a message."""
        if self._forked():
            ptr, ticket._ptr = ticket._ptr, None
            if ptr is not None:
                lib.okv_ticket_free(None, ptr)
            return
        with self._lock:
            ptr, ticket._ptr = ticket._ptr, None
            if ptr is not None:
                if lib.okv_ticket_live(ptr):
                    ticket._end = "retired"
                lib.okv_ticket_free(self._h, ptr)  # NULL client after close: no message

    def wait(self, ticket: Ticket, timeout_s: float) -> QueryAnswer:
        """Poll until the ticket is terminal, or, for a PREPARE ticket, ready
        to claim (``answer.status`` Candidates); returns that answer.

        Between polls it sleeps on the session eventfd and the Manager's
        pidfd for at most 50 ms (a lost notification costs at most that),
        without holding the client's lock. ``timeout_s`` (seconds, > 0)
        bounds the whole wait: past it ``TimedOut`` is raised and the
        ticket stays live (cancel or retire it, or wait again). Raises as
        ``poll``.

        Overrun: each poll is one C call bounded by the client's
        ``timeout_ms``, not by what is left of ``timeout_s`` (liborbitkv has
        no per-call deadline), so against a Manager that stopped answering
        the wait can end up to ``timeout_ms`` late (then ``TimedOut`` with
        ``no_reply`` True). Ctrl-C (``KeyboardInterrupt``) is delivered when
        the current C call returns."""
        deadline = _check.deadline("wait", timeout_s)
        while True:
            if not ticket.live:
                with self._lock:
                    self._handle("wait")
                    return self._retired_answer("wait", ticket)
            answer = self.poll(ticket)
            if ticket.ready or (not ticket.live and answer.status != "Loading"):
                return answer  # ready to claim, or retired by its terminal answer
            if not ticket.live:
                # Still Loading, yet retired by another thread after the poll
                # released the lock (close, cancel): the top of the loop
                # raises what that thread's call means (Closed, ...).
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                err = TimedOut("wait", Code.ETIMEDOUT,
                               f"ticket op id {ticket.op_id} still {answer.status} after {timeout_s:g} s")
                err.no_reply = False
                raise err
            self._sleep("wait", min(left, _FALLBACK_S))

    def lookup(self, ns: bytes, hashes: HashesLike, *, flags: int = 0, request_id: int = 0, group: int = 0,
               recovery: tuple[int, int] | None = None, timeout_s: float | None = None) -> QueryAnswer:
        """Query, wait until terminal (claiming a PREPARE ticket when ready)
        and retire the ticket; returns the terminal ``QueryAnswer``.

        ``timeout_s`` (seconds) bounds the wait; None = the client's
        ``timeout_ms``. On any error, the timeout included, the ticket is
        retired (cancelled when live). An Ok answer with ``lease_id`` != 0
        holds a lease the caller must ``release``. Raises as ``query`` and
        ``wait``."""
        if timeout_s is None:
            timeout_s = self.timeout_ms / 1000.0
        deadline = _check.deadline("lookup", timeout_s)
        t = self.query(ns, hashes, flags=flags, request_id=request_id, group=group, recovery=recovery)
        try:
            while True:
                answer = self.wait(t, max(deadline - time.monotonic(), 1e-3))
                if not t.live:
                    return answer
                answer = self.claim(t)  # a ready PREPARE ticket
                if not t.live:
                    return answer
                if time.monotonic() >= deadline:
                    err = TimedOut("lookup", Code.ETIMEDOUT,
                                   f"ticket op id {t.op_id} still preparing after {timeout_s:g} s")
                    err.no_reply = False
                    raise err
                self._sleep("lookup", _FALLBACK_S)
        finally:
            self.retire(t)

    def query_untracked(self, ns: bytes, hashes: HashesLike) -> QueryAnswer:
        """An untracked leased read (okv_query: op id 0, no ticket, flags 0):
        the longest resident prefix. Ok with a lease (``release`` it) or
        Miss; Loading while SSD blocks of the chain are read (nothing is
        kept: query again). The cheapest lookup (no ticket state).
        Raises ``Unadmitted``, ``InvalidRequest``, ``TooBig``, ``TimedOut``,
        ``ManagerDied``, ``Closed``."""
        ns_c = _check.namespace("query_untracked", ns)
        view = _check.as_view("query_untracked", hashes)
        lease = _abi.Lease()
        rc = self._call("query_untracked", lib.okv_query, ctypes.byref(ns_c), view.batch.data_address, view.length,
                        ctypes.byref(lease), ok=(0, Code.EPENDING))
        status = "Loading" if rc else ("Ok" if lease.lease_id else "Miss")
        return QueryAnswer(status, lease.hit_count, 0, 0, lease.lease_id, lease.lease_bytes, lease.block_bytes,
                           0, 0)

    def _answer(self, op: str, h: int, ticket: Ticket, rc: int, done: str,
                on_error: Callable[[OrbitKVError], None] | None = None) -> QueryAnswer:
        """The end of every ticket call that answers (poll, revise, claim),
        run under the lock with the handle ``h`` and the call's code ``rc``:
        for a code other than 0 and EPENDING, ``on_error(err)`` (if given)
        runs, the ticket is settled with the error's status and the error
        (``self._fail``: okv_last_error's detail) is raised; otherwise the
        answer the call wrote becomes ``ticket.answer``, the ticket is
        settled as ``done`` ("answered", "claimed") and the answer
        returned."""
        if rc and rc != Code.EPENDING:
            err = self._fail(op, rc, h)
            if on_error is not None:
                on_error(err)
            self._settle(h, ticket, err.status)
            raise err
        ticket.answer = QueryAnswer._from_c(self._ans)
        self._settle(h, ticket, done)
        return ticket.answer

    def _settle(self, h: int, ticket: Ticket, why: str) -> None:
        # A ticket that is no longer live only records (op id, revision) in C:
        # free it now so its batch reference goes too (no message is sent).
        ptr = ticket._ptr
        if ptr is not None and not lib.okv_ticket_live(ptr):
            ticket._revision = lib.okv_ticket_revision(ptr)
            ticket._ptr = None
            ticket._end = why
            lib.okv_ticket_free(h, ptr)

    def _retired_answer(self, op: str, ticket: Ticket) -> QueryAnswer:
        if ticket._end in ("answered", "claimed"):
            return ticket.answer
        raise InvalidRequest(op, Code.EINVALID,
                             f"ticket op id {ticket.op_id} is retired ({ticket._end}); submit a fresh query")

    def _sleep(self, op: str, seconds: float) -> None:
        """Sleep up to `seconds` on the eventfd and pidfd (lock not held);
        a readable eventfd is read to reset it."""
        with self._lock:
            h = self._handle(op)
            efd = lib.okv_notification_fd(h)
            poller = self._poller
        events = poller.poll(max(seconds, 0.0) * 1000.0)
        for fd, _ev in events:
            if fd == efd:
                try:
                    os.read(efd, 8)
                except (BlockingIOError, InterruptedError, OSError):
                    pass  # another reader took it, or the client closed meanwhile
