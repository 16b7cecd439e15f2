"""``CacheManagerClient``: one session with the node's OrbitKV Manager.

A client wraps one liborbitkv ``okv_client``: the bootstrap Unix socket,
the shared-memory slot and doorbell, the session eventfd and a pidfd of the
Manager. Every method is one or a few C calls; the wire contracts, limits
and rules are those of ``native/include/orbitkv/abi.h`` and ``client.h``
and of docs/design.md §6 (cited per method).

Threads: liborbitkv's client is not thread-safe, so each call holds the
client's lock; calls from several threads are serialised, never concurrent.
The lock is released while ``wait()`` sleeps. The GIL is released inside
every C call (``ctypes.CDLL``).

Deadlines: every call is bounded: control calls by ``timeout_ms`` (given at
construction), waits by their ``timeout_s`` (seconds, float), except
``publish``, which by the spec waits for the Manager's reply however long
the copy takes, until the reply or the Manager's death (client.h
okv_publish, "Fence"); a line on stderr reports a long wait.

Closing: ``close()`` (or leaving a ``with`` block) ends the session; every
later call raises ``Closed``; a closed client never touches freed memory.
Tickets and registered buffers are released as described on each method.

Fork: the session belongs to the process that connected (``os.getpid()``
at connect). In a forked child every call raises ``Closed`` ("this client
was connected by process P; a forked child must connect its own"), and
``close()`` / garbage collection in the child only drop the handle: no
message is sent and nothing of the parent's session is touched (tickets
are freed without a cancel). The child connects its own client.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
import select
import threading
import weakref
from typing import NamedTuple, Sequence

from . import _abi, _check
from ._abi import Code, Role
from ._native import lib
from .buffer import EngineBuffer
from .errors import BadArgument, Closed, OrbitKVError, error_from_code
from .hashes import BlockHashes, HashView
from .ticket import QueryAnswer, Ticket, TicketOps

__all__ = ["CacheManagerClient", "Ticket", "QueryAnswer", "socket_path_for", "resolve_socket_path",
           "runtime_dir_owner", "SocketChoice", "RUNTIME_DIR"]

#: The directory systemd makes for the Manager's unit (RuntimeDirectory=orbitkv);
#: client.h OKV_RUNTIME_DIR.
RUNTIME_DIR = "/run/orbitkv"

#: enum okv_socket_source: the step of the rule that chose a socket.
_SOURCES = {1: "option", 2: "ORBITKV_BOOTSTRAP_SOCKET", 3: "runtime directory", 4: "derived"}

# Socket errors of a lifecycle call (health, register_buffer) whose Manager
# went away: the session is over, reported as Closed.
_SOCKET_GONE = (-_errno.EPIPE, -_errno.ECONNRESET, -_errno.ENOTCONN)


class BlockRecord(NamedTuple):
    """What a router matches a published block on (abi.h
    ``struct okv_block_record``): the engine's own block hash as its KV
    events carry it (an unsigned 64-bit int; vLLM's is the low 64 bits of
    the block's SHA-256 read big-endian), its parent's (``None`` for the
    first block of a chain), and the block's token ids."""

    engine_hash: int
    parent_hash: int | None
    token_ids: Sequence[int]


RECORD_MAX_TOKENS = _abi.RECORD_MAX_TOKENS


def _block_infos(records: Sequence[BlockRecord], n: int) -> tuple[object, list]:
    """The okv_block_info array of records, and the token arrays it
    points at (kept alive by the caller for the call)."""
    if len(records) != n:
        raise BadArgument("publish", _check.EINVAL, f"{len(records)} records but {n} blocks; want one record per block")
    infos = (_abi.BlockInfo * n)()
    keep = []
    for i, r in enumerate(records):
        if not 1 <= len(r.token_ids) <= RECORD_MAX_TOKENS:
            raise BadArgument("publish", _check.EINVAL,
                              f"record {i}: {len(r.token_ids)} token ids, want 1..{RECORD_MAX_TOKENS}")
        for name, v in (("engine_hash", r.engine_hash), ("parent_hash", r.parent_hash or 0)):
            if not 0 <= v <= _abi.U64_MAX:
                raise BadArgument("publish", _check.EINVAL, f"record {i}: {name} {v} is not an unsigned 64-bit int")
        toks = _check.u32_array("publish", f"record {i} token id", r.token_ids)
        keep.append(toks)
        infos[i].engine_hash = r.engine_hash
        infos[i].has_parent = 0 if r.parent_hash is None else 1
        infos[i].parent_hash = r.parent_hash or 0
        infos[i].token_count = len(r.token_ids)
        infos[i].tokens = ctypes.cast(toks, ctypes.c_void_p)
    return infos, keep


class _SessionLock:
    """The client's lock, refusing a forked child: entering it in a process
    other than the one that connected raises ``Closed`` before acquiring
    (another thread of the parent may have held it at fork time, and the
    session is the parent's anyway)."""

    __slots__ = ("_lock", "_client")

    def __init__(self, client: "CacheManagerClient"):
        self._lock = threading.RLock()
        self._client = weakref.ref(client)

    def __enter__(self) -> "_SessionLock":
        c = self._client()
        if c is not None and c._pid != os.getpid():
            raise c._forked_error("call")
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def socket_path_for(manager_addr: str) -> str:
    """The bootstrap socket path of a Manager listen address:
    ``"127.0.0.1:7470"`` -> ``"/tmp/orbitkv-127.0.0.1-7470.sock"``
    (okv_socket_path; docs/design.md §5.1). Raises ``BadArgument`` naming the
    address when it is malformed or the path is too long."""
    if not isinstance(manager_addr, str):
        raise BadArgument("socket_path_for", _check.EINVAL,
                          f"manager_addr: want str, got {type(manager_addr).__name__}")
    buf = ctypes.create_string_buffer(256)
    n = lib.okv_socket_path(manager_addr.encode("utf-8"), buf, len(buf))
    if n < 0:
        raise error_from_code("socket_path_for", n,
                              f"manager_addr {manager_addr!r} (want host:port, IPv6 as [host]:port)")
    return buf.value.decode("utf-8")


class SocketChoice(NamedTuple):
    """A bootstrap socket as ``resolve_socket_path`` chose it: ``path``;
    ``source``, the step of the rule (``"option"``,
    ``"ORBITKV_BOOTSTRAP_SOCKET"``, ``"runtime directory"``, ``"derived"``);
    ``vouched_uid``, the runtime directory's owner that a client trusts
    as the Manager's uid (``runtime_dir_owner``) when ``source`` is
    ``"runtime directory"``, else None."""

    path: str
    source: str
    vouched_uid: int | None


def resolve_socket_path(socket_path: str | None = None, manager_addr: str | None = None, *,
                        runtime_dir: str | None = None) -> SocketChoice:
    """The bootstrap socket a client connects to (okv_resolve_socket_path;
    docs/operating.md "Socket paths"): ``socket_path``, else the path
    derived from ``manager_addr``, else ``$ORBITKV_BOOTSTRAP_SOCKET``, else
    ``<runtime_dir>/manager.sock`` when it exists and is a socket
    (``runtime_dir`` None: ``/run/orbitkv``), else the path derived from
    ``$ORBITKV_LISTEN`` or ``127.0.0.1:7470``. Empty strings count as
    unset. Raises ``BadArgument`` naming the input (the argument or the
    variable) for a bad address or a path over 107 bytes."""
    for name, v in (("socket_path", socket_path), ("manager_addr", manager_addr), ("runtime_dir", runtime_dir)):
        if v is not None and (not isinstance(v, str) or "\0" in v):
            raise BadArgument("resolve_socket_path", _check.EINVAL, f"{name} {v!r}: want a str without NUL, or None")
    enc = (lambda v: None if v is None else v.encode("utf-8"))
    buf = ctypes.create_string_buffer(256)
    source, vouched = ctypes.c_int(0), ctypes.c_uint32(0)
    n = lib.okv_resolve_socket_path(enc(socket_path), enc(manager_addr), enc(runtime_dir), buf, len(buf),
                                    ctypes.byref(source), ctypes.byref(vouched))
    src = _SOURCES.get(source.value, str(source.value))
    if n < 0:
        what = {"option": f"socket_path {socket_path!r}" if socket_path else
                f"manager_addr {manager_addr!r} (want host:port, IPv6 as [host]:port)",
                "ORBITKV_BOOTSTRAP_SOCKET": f"ORBITKV_BOOTSTRAP_SOCKET {os.environ.get('ORBITKV_BOOTSTRAP_SOCKET')!r}",
                "derived": f"ORBITKV_LISTEN {os.environ.get('ORBITKV_LISTEN')!r} (want host:port, IPv6 as [host]:port)",
                }.get(src, f"the socket in {runtime_dir or RUNTIME_DIR}")
        # A bad input either way (EINVAL, or ENAMETOOLONG for the length).
        raise BadArgument("resolve_socket_path", _check.EINVAL, f"{what}: the socket path is at most 107 bytes"
                          if n == -_errno.ENAMETOOLONG else what)
    return SocketChoice(buf.value.decode("utf-8"), src, vouched.value - 1 if vouched.value else None)


def runtime_dir_owner(runtime_dir: str = RUNTIME_DIR) -> int | None:
    """The owner uid of ``runtime_dir`` when root vouches for it
    (okv_runtime_dir_owner): its parent is a directory owned by root and
    writable by neither group nor others, and ``runtime_dir`` is a
    directory, not a symbolic link, writable by neither group nor others.
    None otherwise."""
    if not isinstance(runtime_dir, str) or "\0" in runtime_dir:
        raise BadArgument("runtime_dir_owner", _check.EINVAL, f"runtime_dir {runtime_dir!r}: want a str without NUL")
    uid = ctypes.c_uint32(0)
    return uid.value if lib.okv_runtime_dir_owner(runtime_dir.encode("utf-8"), ctypes.byref(uid)) == 1 else None


class CacheManagerClient(TicketOps):
    """A session with the node's OrbitKV Manager (liborbitkv okv_client).

    ``CacheManagerClient(socket_path=None, manager_addr=None,
    instance_id="", timeout_ms=5000, *, role=Role.WORKER, manager_uid=None)``

    * at most one of ``socket_path`` (the Manager's bootstrap socket, e.g.
      its ``--bootstrap-socket``) or ``manager_addr`` (its ``--listen``
      "host:port", from which the path ``/tmp/orbitkv-<host>-<port>.sock``
      is derived by ``okv_socket_path``); neither: the default rule of
      ``resolve_socket_path`` (``$ORBITKV_BOOTSTRAP_SOCKET``, else
      ``/run/orbitkv/manager.sock`` when it is a socket, else the path of
      ``$ORBITKV_LISTEN`` or ``127.0.0.1:7470``), applied by liborbitkv at
      connect; ``socket_path`` is then the path it chose;
    * ``instance_id``: sent in the hello, at most 64 bytes of UTF-8;
    * ``timeout_ms``: how long a control call waits for its reply,
      1..3,600,000 ms; connecting is bounded by it too;
    * ``role``: ``orbitkv.Role`` (informational, shown in Health);
    * ``manager_uid``: the uid of a Manager this client trusts besides its
      own (a Manager serving tenants of other uids: docs/security.md
      "Tenants"); ``None`` leaves it to ``ORBITKV_MANAGER_UID``. With the
      default socket in ``/run/orbitkv``, that directory's owner is
      trusted too when ``runtime_dir_owner`` vouches for it. A Manager
      of any other uid is refused (``ForeignManager``) before anything is sent.

    Raises ``BadArgument`` for bad arguments, ``NativeOSError`` (errno
    ENOENT, ECONNREFUSED, EACCES) when no Manager serves the socket, with
    the path and a hint in the message; ``Refused`` when the Manager refuses
    the hello; ``VersionMismatch``, ``ProtocolError``, ``TimedOut``.
    """

    def __init__(self, socket_path: str | None = None, manager_addr: str | None = None,
                 instance_id: str = "", timeout_ms: int = 5000, *, role: int = Role.WORKER,
                 manager_uid: int | None = None):
        self._h: int | None = None
        self._pid = os.getpid()
        self.socket_path = ""
        self._lock = _SessionLock(self)
        self._buffers: dict[int, EngineBuffer] = {}
        self._tickets: "weakref.WeakSet[Ticket]" = weakref.WeakSet()
        self._orphans: list[tuple[int, object]] = []
        self._ans = _abi.QueryAnswerC()
        if socket_path is not None and manager_addr is not None:
            raise BadArgument("connect", _check.EINVAL, "give at most one of socket_path and manager_addr")
        if socket_path is not None:
            if not isinstance(socket_path, str) or not socket_path:
                raise BadArgument("connect", _check.EINVAL, f"socket_path: want a non-empty str, got {socket_path!r}")
            if "\0" in socket_path:
                raise BadArgument("connect", _check.EINVAL, f"socket_path {socket_path!r}: contains a NUL character")
            resolved = socket_path
        elif manager_addr is not None:
            resolved = socket_path_for(manager_addr)
        else:
            # For messages; liborbitkv applies the same rule at connect and
            # trusts the runtime directory's owner when it picks the socket there.
            resolved = resolve_socket_path().path
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or \
                not 1 <= timeout_ms <= _abi.MAX_TIMEOUT_MS:
            raise BadArgument("connect", _check.EINVAL,
                              f"timeout_ms {timeout_ms!r}: want an int in 1..{_abi.MAX_TIMEOUT_MS}")
        _check.check_u32("connect", "role", role)
        if manager_uid is not None and (isinstance(manager_uid, bool) or not isinstance(manager_uid, int)
                                        or not 0 <= manager_uid < 0xFFFFFFFF):
            raise BadArgument("connect", _check.EINVAL,
                              f"manager_uid {manager_uid!r}: want an int uid in 0..4294967294, or None")
        iid = instance_id.encode("utf-8")
        if len(iid) > _abi.INSTANCE_ID_BYTES or b"\0" in iid:
            raise BadArgument("connect", _check.EINVAL,
                              f"instance_id: {len(iid)} bytes; want at most {_abi.INSTANCE_ID_BYTES}, no NUL")
        self.socket_path: str = resolved
        self.instance_id: str = instance_id
        self.timeout_ms: int = timeout_ms
        path = None if socket_path is None else socket_path.encode("utf-8")
        addr = None if manager_addr is None else manager_addr.encode("utf-8")
        opts = _abi.ConnectOptions(socket_path=path, manager_addr=addr, instance_id=iid, role=int(role),
                                   timeout_ms=timeout_ms,
                                   manager_uid_plus1=0 if manager_uid is None else manager_uid + 1)
        out = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        rc = lib.okv_connect_err(ctypes.byref(opts), ctypes.byref(out), err, len(err))
        if rc != 0:
            detail = err.value.decode("utf-8", "replace")
            raise error_from_code(f"connect to {resolved}", rc, detail)
        self._pid = os.getpid()
        self._h = out.value
        self._poller = select.poll()
        self._poller.register(lib.okv_notification_fd(self._h), select.POLLIN)
        self._poller.register(lib.okv_manager_pidfd(self._h), select.POLLIN)

    # ---- plumbing ----

    def _forked(self) -> bool:
        """Whether this process is not the one that connected (a fork child)."""
        return self._pid != os.getpid()

    def _forked_error(self, op: str) -> Closed:
        return Closed(op, Code.ECLOSED, f"this client was connected by process {self._pid}; "
                                        f"a forked child (pid {os.getpid()}) must connect its own")

    def _drop_in_child(self) -> None:
        """close() in a forked child: forget the handle and free the child's
        copies of tickets without any message (okv_ticket_free with a NULL
        client sends nothing); the parent's session is untouched."""
        if self._h is None:
            return
        self._h = None
        for t in list(self._tickets):
            ptr, t._ptr = t._ptr, None
            if ptr is not None:
                t._end = "client closed (forked child)"
                lib.okv_ticket_free(None, ptr)
        self._free_orphans(None)
        self._buffers.clear()

    def _handle(self, op: str) -> int:
        """The live handle (caller holds the lock); Closed after close()."""
        if self._forked():
            raise self._forked_error(op)
        h = self._h
        if h is None:
            raise Closed(op, Code.ECLOSED, "client closed")
        if self._orphans:
            self._free_orphans(h)
        return h

    def _fail(self, op: str, rc: int, h: int | None = None) -> OrbitKVError:
        """The exception for return code rc, with okv_last_error's detail
        (read at once, under the lock: it is valid until the next call)."""
        detail = lib.okv_last_error(h).decode("utf-8", "replace") if h is not None else ""
        if rc in _SOCKET_GONE:
            return Closed(op, Code.ECLOSED, f"the Manager closed this session's socket ({_errno.errorcode[-rc]}: "
                                            f"it exited or restarted); connect a new client"
                          + (f"; {detail}" if detail else ""))
        return error_from_code(op, rc, detail)

    def _get(self, op: str, fn, *args):
        """``fn(handle, *args)`` under the lock, its value returned as is:
        for liborbitkv getters that cannot fail on a live handle. Raises
        ``Closed`` after close() or in a forked child."""
        with self._lock:
            return fn(self._handle(op), *args)

    def _call(self, op: str, fn, *args, what: str | None = None, ok: tuple[int, ...] = (0,)) -> int:
        """The lock-call-raise step of every liborbitkv call: take the lock,
        call ``fn(handle, *args)`` (an ``okv_*`` function returning 0 or a
        negative ``okv_*`` code), and raise the exception of a code not in
        ``ok`` with okv_last_error's detail (read under the same lock: it
        is valid until the next call). ``what`` (default ``op``) names the
        operation in the exception. Returns the code (one of ``ok``).
        Raises ``Closed`` after close() or in a forked child, and the
        ``OrbitKVError`` subclass of the code (errors.py)."""
        with self._lock:
            h = self._handle(op)
            rc = fn(h, *args)
            if rc not in ok:
                raise self._fail(what or op, rc, h)
            return rc

    def _orphan(self, ptr: int, keep: object) -> None:
        # Ticket.__del__: may run in any thread, even inside a locked
        # section of this one, so it only queues (list.append is atomic);
        # the next call frees it under the lock. `keep` holds the batch's
        # Python object until the C ticket has dropped its reference.
        if self._h is None or self._forked():
            lib.okv_ticket_free(None, ptr)  # no client: no message
        else:
            self._orphans.append((ptr, keep))

    def _free_orphans(self, h: int | None) -> None:
        while self._orphans:
            ptr, _keep = self._orphans.pop()
            lib.okv_ticket_free(h, ptr)  # cancels a live one (best effort)

    # ---- session ----

    @property
    def closed(self) -> bool:
        """Whether close() ran, or this is a forked child of the process that
        connected (the session may also have ended by itself: calls then
        raise ``Closed`` or ``ManagerDied``)."""
        return self._h is None or self._forked()

    @property
    def epoch(self) -> int:
        """The Manager epoch of this session (okv_epoch); ``Closed`` after close()."""
        return self._get("epoch", lib.okv_epoch)

    @property
    def manager_version(self) -> str:
        """The Manager's build version as its bootstrap reply announced it
        (okv_manager_version; an extension record of the reply), "" if it
        sent none; ``Closed`` after close()."""
        return self._get("manager_version", lib.okv_manager_version).decode("ascii", "replace")

    def notification_fd(self) -> int:
        """The session eventfd (okv_notification_fd; borrowed: do not close).

        Readable when a restore ends or a pending ticket resolves; usable
        with ``selectors``/``select``/``asyncio`` ``add_reader``. Whoever
        waits on it reads it (8 bytes; it is non-blocking) to reset it,
        then asks ``poll_restore`` / ``poll`` what ended: one eventfd
        serves every operation of the session. Valid until ``close()``."""
        return self._get("notification_fd", lib.okv_notification_fd)

    def manager_pidfd(self) -> int:
        """pidfd of the Manager (borrowed); readable once the Manager exited."""
        return self._get("manager_pidfd", lib.okv_manager_pidfd)

    @property
    def max_query_hashes(self) -> int:
        """Largest hash count of one query (the session's descriptor area)."""
        return self._get("max_query_hashes", lib.okv_max_query_hashes)

    @property
    def max_restore_entries(self) -> int:
        """Largest entry count of one start_restore."""
        return self._get("max_restore_entries", lib.okv_max_restore_entries)

    @property
    def max_publish_entries(self) -> int:
        """Entries per publish chunk (publish splits larger batches itself)."""
        return self._get("max_publish_entries", lib.okv_max_publish_entries)

    def ping(self, value: int = 0) -> int:
        """Round trip a Ping through the shared-memory channel; returns the
        Manager's echo of ``value`` (uint64). Raises ``TimedOut``,
        ``ManagerDied``, ``Closed``."""
        _check.check_u64("ping", "value", value)
        echo = ctypes.c_uint64()
        self._call("ping", lib.okv_ping, value, ctypes.byref(echo))
        return echo.value

    def health(self) -> dict:
        """This session's Health frame (okv_health) as a dict with every field
        of ``struct okv_health``: the Manager's liveness (``status``
        "serving"/"draining", ``epoch``, ``service_id`` (16 bytes),
        ``manager_pid``, ``uptime_ns``, ``poll_mode``, ``version``,
        ``ram_capacity_bytes``) and this session's own figures
        (``requests``, ``leases``, ``pins``, ``reserved_bytes``,
        ``operations``, ``tickets``; counts, bytes, ns). The Manager-wide
        ``sessions``, ``blocks``, ``ram_used_bytes``, ``evictions``,
        ``lookups`` and ``distinct_lookups`` are 0: they would tell one
        tenant about another's traffic; GET /health on the Manager's HTTP
        address serves them to operators.
        Raises ``TimedOut``, ``Closed``, ``ProtocolError``."""
        out = _abi.Health()
        self._call("health", lib.okv_health, ctypes.byref(out))
        result = {}
        for name, _type in _abi.Health._fields_:
            v = getattr(out, name)
            if isinstance(v, bytes):
                v = v.decode("utf-8", "replace")
            elif name == "service_id":
                v = bytes(v)
            result[name] = v
        return result

    def close(self) -> None:
        """End the session (okv_close: Unregister, unmap, close every fd).

        Live tickets are cancelled first (best effort); the Manager releases
        this session's leases and drops its unpolled restores (docs/cache.md
        "Session teardown"). Registered buffers are no longer held by the
        client and may then be closed. Idempotent; never raises.

        In a forked child it only drops the handle (nothing is sent: the
        session is the parent's)."""
        if self._forked():
            self._drop_in_child()
            return
        with self._lock:
            h = self._h
            if h is None:
                return
            self._free_orphans(h)
            for t in list(self._tickets):
                ptr, t._ptr = t._ptr, None
                if ptr is not None:
                    if lib.okv_ticket_live(ptr):
                        t._end = "client closed"
                    lib.okv_ticket_free(h, ptr)
            self._h = None
            lib.okv_close(h)
            self._free_orphans(None)  # queued while closing: no message
            self._buffers.clear()

    def __enter__(self) -> "CacheManagerClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"CacheManagerClient({self.socket_path!r}, {'closed' if self.closed else 'open'})"

    # ---- buffers ----

    def register_buffer(self, buf: EngineBuffer) -> int:
        """Register an engine buffer with the Manager (okv_register_buffer:
        RegisterBuffers lifecycle frame, the memfd passed with SCM_RIGHTS);
        returns its buffer id (uint32) for publish and start_restore.

        The client keeps ``buf`` alive until ``close()``, and ``buf.close()``
        raises while this client is open (client.h: "The buffer must stay
        allocated until okv_close"). Raises ``BadArgument`` (closed buffer),
        ``Rejected`` (the Manager's error frame names the field and limit,
        e.g. regions over 256 buffers or 4 TiB per session), ``TimedOut``,
        ``Closed``."""
        if not isinstance(buf, EngineBuffer):
            raise BadArgument("register_buffer", _check.EINVAL, f"want an EngineBuffer, got {type(buf).__name__}")
        if buf.closed:
            raise BadArgument("register_buffer", _check.EINVAL, "buffer is closed")
        bid = ctypes.c_uint32()
        with self._lock:  # reentrant: the buffer is kept in the same locked section
            self._call("register_buffer", lib.okv_register_buffer, ctypes.byref(buf._buf), ctypes.byref(bid))
            self._buffers[bid.value] = buf
            buf._registered(self)
        return bid.value

    def register_cuda_buffer(self, region) -> int:
        """Register a CUDA KV buffer by handle (okv_register_cuda_buffer:
        RegisterBuffers with a legacy IPC handle or a VMM fd, the device by
        UUID; never a pickled tensor); ``region`` is an
        ``orbitkv.cuda.CudaRegion`` (``orbitkv.cuda.tensor_region`` makes
        one from a torch tensor). Returns its buffer id. The Manager must
        run ``--copy-backend cuda`` (else ``Rejected`` naming
        regions[0].handle_kind and the flag); a bad field is ``Rejected``
        naming it. The memory must stay allocated until ``close()``."""
        if not isinstance(region, _abi.CudaRegion):
            raise BadArgument("register_cuda_buffer", _check.EINVAL, f"want a CudaRegion, got {type(region).__name__}")
        bid = ctypes.c_uint32()
        with self._lock:
            self._call("register_cuda_buffer", lib.okv_register_cuda_buffer, ctypes.byref(region), ctypes.byref(bid))
        return bid.value

    # ---- publish, restore, release ----

    def publish(self, ns: bytes, buffer_id: int, hashes: Sequence[bytes] | BlockHashes | HashView,
                pages: Sequence[int], records: Sequence[BlockRecord] | None = None) -> tuple[int, int]:
        """Publish n blocks (okv_publish): block i is page ``pages[i]`` of
        every layer of buffer ``buffer_id``, stored under (ns, hashes[i]).
        Returns ``(stored, present)``: blocks copied in and made visible,
        and blocks already resident (not copied). n = 0 returns (0, 0).

        The copy has completed and the blocks are visible when this returns
        (docs/design.md §6 rule 2); batches larger than the slot go in chunks of
        ``max_publish_entries``. Once a chunk is sent the call waits for the
        Manager's reply without a deadline, until it comes or the Manager
        dies (spec "Publish requires a Cache Manager pidfd"); stderr gets a
        line when the ordinary deadline passes. Do not rewrite the source
        pages before it returns.

        Raises ``BadArgument`` (lengths differ, a hash not 16 bytes, a page
        not uint32, ``buffer_id`` not registered through this client),
        ``Unadmitted`` (RAM tier has no unpinned frames; earlier chunks stay
        published: ``e.result`` = (stored, present) so far),
        ``InvalidRequest`` (field page / buffer_id ..., entry named),
        ``Fenced`` (ambiguous acknowledgement: the buffer's pages stay
        pinned until the Manager exits), ``ManagerDied``, ``Closed``.

        ``records``, one ``BlockRecord`` per block (okv_publish_records),
        tells the Manager what routers match each block on; it keeps them
        with the blocks and announces them in its KV events
        (docs/events.md). ``BadArgument`` names a record of 0 or more than
        ``RECORD_MAX_TOKENS`` tokens, a token id or hash out of range."""
        ns_c = _check.namespace("publish", ns)
        _check.check_u32("publish", "buffer_id", buffer_id)
        n = len(pages)
        if n > _abi.U32_MAX:
            raise BadArgument("publish", _check.EINVAL, f"{n} blocks; limit {_abi.U32_MAX} per call")
        if len(hashes) != n:
            raise BadArgument("publish", _check.EINVAL,
                              f"{len(hashes)} hashes but {n} pages; want one page per hash")
        if n == 0:
            return (0, 0)
        keep: object
        if isinstance(hashes, BlockHashes):
            keep, addr = hashes, hashes.data_address
        elif isinstance(hashes, HashView):
            keep, addr = hashes.batch, hashes.batch.data_address
        else:
            keep = addr = _check.join_hashes("publish", hashes)
        page_arr = _check.u32_array("publish", "page", pages)
        infos = None if records is None else _block_infos(records, n)
        res = _abi.PublishResult()
        try:
            if infos is None:
                self._call("publish", lib.okv_publish, ctypes.byref(ns_c), buffer_id, addr, page_arr, n,
                           ctypes.byref(res), what=f"publish to buffer {buffer_id}")
            else:
                self._call("publish", lib.okv_publish_records, ctypes.byref(ns_c), buffer_id, addr, page_arr,
                           infos[0], n, ctypes.byref(res), what=f"publish to buffer {buffer_id}")
        except OrbitKVError as err:
            err.result = (res.stored, res.present)
            raise
        del keep, infos
        return (res.stored, res.present)

    # ---- local discovery ----

    def discover_open(self, ns: bytes) -> None:
        """Map the Manager's discovery index of namespace ``ns`` read-only
        (okv_discover_open: one lifecycle round trip; nothing when mapped
        already). A session gets the index of a namespace only by naming it
        (docs/discover.md). Raises ``BadArgument`` (not 16 bytes, all zero),
        ``ApplicationError`` (the Manager refused: its ``--discover-bytes``
        budget is spent, or it serves none; the detail says which),
        ``TimedOut``, ``Closed``; an ``OrbitKVError`` with errno ENOSPC when
        this client maps 16 namespaces already."""
        ns_c = _check.namespace("discover_open", ns)
        self._call("discover_open", lib.okv_discover_open, ctypes.byref(ns_c))

    def discover_complete(self, ns: bytes) -> bool:
        """Whether a local miss in namespace ``ns`` is final
        (okv_discover_flags, OKV_DISCOVER_COMPLETE): True when the Manager
        serves from its RAM tier only (no SSD tier, no peers), so a hash
        ``discover_local`` does not count is one the round trip would miss
        too. False: a local miss may still be an SSD or peer hit. Maps the
        index first, as ``discover_open``; raises as it does."""
        ns_c = _check.namespace("discover_complete", ns)
        flags = ctypes.c_uint32()
        self._call("discover_complete", lib.okv_discover_flags, ctypes.byref(ns_c), ctypes.byref(flags))
        return bool(flags.value & 1)

    def discover_local(self, ns: bytes, hashes: Sequence[bytes] | BlockHashes | HashView) -> int:
        """How many of ``hashes``, counted from the first up to the first
        absent one, are resident in the Manager's RAM tier (the prefix
        QueryBundle would report as hits), read from the namespace's mapped
        discovery index (okv_discover_local): no syscall and no message to
        the Manager once mapped (the first call for ``ns`` maps it, as
        ``discover_open``). ``hashes``: 16-byte values, a ``BlockHashes`` or
        a ``HashView``; 0 hashes answer 0.

        Advisory: no lease is taken, so a counted block may be evicted
        before it is restored, and a block sealed or evicted a moment ago
        may read as it was (stale by at most the one update the Manager is
        writing). Where a missing block would fail a request, confirm a hit
        with a leased query first. Raises as ``discover_open`` on the first
        call; ``IndexBusy`` when a bucket stayed mid-update (a Manager
        descheduled or dead while writing; nothing was sent: take the
        round trip)."""
        ns_c = _check.namespace("discover_local", ns)
        keep: object
        if isinstance(hashes, BlockHashes):
            keep, addr, n = hashes, hashes.data_address, len(hashes)
        elif isinstance(hashes, HashView):
            keep, addr, n = hashes.batch, hashes.batch.data_address, hashes.length
        else:
            n = len(hashes)
            keep = addr = _check.join_hashes("discover_local", hashes) if n else None
        count = ctypes.c_uint32()
        self._call("discover_local", lib.okv_discover_local, ctypes.byref(ns_c), addr, n, ctypes.byref(count))
        del keep
        return count.value

    def start_restore(self, lease_id: int, buffer_id: int, entries: Sequence[tuple[int, int]]) -> int:
        """Start copying leased blocks into buffer pages (okv_restore):
        entry (block, page) copies block ``block`` of lease ``lease_id``
        (0 <= block < hit_count) into page ``page`` of every layer of buffer
        ``buffer_id``. Returns the operation id (uint64) for
        ``poll_restore`` / ``wait_restore``; the session eventfd is
        signalled when it ends.

        The destination pages belong to the Manager's copy workers until a
        terminal result (docs/design.md §6 rule 3): do not touch them before.
        1 .. ``max_restore_entries`` entries. Raises ``InvalidRequest``
        (unknown or foreign lease, page out of range or busy, block outside
        the lease, unregistered buffer; field and entry named),
        ``Unadmitted`` (operation bounds full), ``TooBig``, ``Fenced``,
        ``BadArgument``, ``TimedOut``, ``ManagerDied``, ``Closed``."""
        _check.check_u64("start_restore", "lease_id", lease_id)
        _check.check_u32("start_restore", "buffer_id", buffer_id)
        n = len(entries)
        if n == 0:
            raise BadArgument("start_restore", _check.EINVAL, "no entries; want 1 or more (block, page) pairs")
        flat = []
        for i, e in enumerate(entries):
            try:
                block, page = e
            except (TypeError, ValueError):
                raise BadArgument("start_restore", _check.EINVAL,
                                  f"entry {i}: want a (block, page) pair, got {e!r}") from None
            flat.append(block)
            flat.append(page)
        arr = _check.u32_array("start_restore", "entry", flat)
        op = ctypes.c_uint64()
        self._call("start_restore", lib.okv_restore, lease_id, buffer_id, arr, n, ctypes.byref(op),
                   what=f"start_restore of lease {lease_id} into buffer {buffer_id}")
        return op.value

    def poll_restore(self, op_id: int) -> bool:
        """Non-blocking RestorePoll (okv_restore_poll): True when the restore
        completed (the id is consumed: a second poll raises
        ``InvalidRequest`` field op_id), False while it copies. Raises
        ``InternalError`` (the copy failed), ``InvalidRequest`` (unknown
        id), ``Expired`` (its result expired unpolled), ``TimedOut``,
        ``ManagerDied``, ``Closed``."""
        _check.check_u64("poll_restore", "op_id", op_id)
        return self._call("poll_restore", lib.okv_restore_poll, op_id, what=f"poll_restore of operation {op_id}",
                          ok=(0, Code.EPENDING)) == 0

    def wait_restore(self, op_id: int, timeout_s: float) -> None:
        """Block until the restore completes (okv_restore_wait: polls, then
        sleeps on the eventfd for at most 50 ms at a time, watching the
        Manager's pidfd). ``timeout_s`` in seconds (> 0, at most one hour).
        Raises ``TimedOut`` past the deadline (the destination pages are
        still the Manager's: do not reuse them), ``ManagerDied``, and the
        errors of ``poll_restore``. Holds the client's lock while waiting."""
        _check.check_u64("wait_restore", "op_id", op_id)
        ms = _check.timeout_ms("wait_restore", timeout_s)
        self._call("wait_restore", lib.okv_restore_wait, op_id, ms, what=f"wait_restore of operation {op_id}")

    def release(self, lease_id: int) -> None:
        """End a lease (okv_release): its pins and reserved bytes go.
        Raises ``InvalidRequest`` field lease_id (unknown, released or
        another session's), ``TimedOut``, ``ManagerDied``, ``Closed``."""
        _check.check_u64("release", "lease_id", lease_id)
        self._call("release", lib.okv_release, lease_id, what=f"release of lease {lease_id}")
