"""A Manager session that survives the Manager going away.

``Session`` wraps one ``CacheManagerClient`` for an engine adapter. An
adapter must never crash or hang its engine because the Manager restarted:
when a call ends the session (``ManagerDied``, ``Closed``, ``Stale``,
``ProtocolError``), ``fail()`` drops the client, and the next ``get()``
reconnects (at most once per ``reconnect_interval_s``), registering the
engine buffers again under their new ids: a new Manager epoch. A CUDA
buffer (``orbitkv.vllm.gpudirect.CudaKVBuffer``) is registered again by a
new IPC handle query (``region()``) at every epoch. While no
Manager answers, ``get()`` returns None and the adapter treats every lookup
as a miss and skips saves.

The first connection is made by the constructor and its failure raises at
once, naming the option the socket came from: a misconfigured socket is a
startup error, not a silent cache that never hits.

Not thread-safe by itself; each adapter uses a session from one thread
(the SGLang backend serialises its calls under one lock).

A control call that got no reply within ``timeout_ms`` (``TimedOut`` with
``no_reply``) also ends the session: a wedged session (for example one
whose Manager-side state was lost) must not turn every later lookup into a
timeout; a ``get()`` at least ``reconnect_interval_s`` later connects
afresh. A reconnect that fails waits
twice as long before the next try, up to ``MAX_BACKOFF`` times
``reconnect_interval_s``: a Manager that accepts connections but does not
answer (stopped, wedged) costs the engine one connect deadline per try,
and the tries thin out.
"""

from __future__ import annotations

import logging
import select
import time
from typing import Any

from .._abi import Code
from ..buffer import EngineBuffer
from ..client import CacheManagerClient, resolve_socket_path
from ..errors import Closed, ManagerDied, OrbitKVError, ProtocolError, Rejected, Stale, TimedOut

__all__ = ["Session", "SESSION_ENDING"]

log = logging.getLogger("orbitkv.adapter")

#: Longest wait between reconnect tries, in reconnect intervals.
MAX_BACKOFF = 8

#: Errors after which the client is unusable: reconnect.
SESSION_ENDING = (ManagerDied, Closed, Stale, ProtocolError)


class Session:
    """One reconnecting session with the Manager at ``socket_path``
    (None: the default rule of ``orbitkv.resolve_socket_path``, applied
    again at each connect; ``self.socket_path`` is the path last chosen).

    ``option`` names where the path came from (for error messages);
    ``role`` is an ``orbitkv.Role``. Raises the ``OrbitKVError`` subclass of
    the failed connect (``NativeOSError`` with errno ENOENT/ECONNREFUSED for
    a socket nobody serves, ``BadArgument``, ``Refused``, ``TimedOut``),
    its message prefixed with ``"<who>: <option>=<path>"``."""

    def __init__(self, socket_path: str | None, option: str, *, who: str, instance_id: str, role: int,
                 timeout_ms: int = 5000, reconnect_interval_s: float = 1.0, manager_uid: int | None = None):
        self._given = socket_path
        self.option = option
        self.who = who
        self.instance_id = instance_id[:64]
        self.role = role
        self.timeout_ms = timeout_ms
        self.reconnect_interval_s = reconnect_interval_s
        self.manager_uid = manager_uid
        self.client: CacheManagerClient | None = None
        self.epochs: list[int] = []
        self._buffers: list[Any] = []   # EngineBuffer or CudaKVBuffer
        self._ids: dict[int, int] = {}
        self._last_try = 0.0
        self._backoff = 1   # reconnect intervals to wait before the next try
        self._last_alive = 0.0
        try:
            self.socket_path = socket_path if socket_path is not None else resolve_socket_path().path
            self._connect()
        except OrbitKVError as e:
            given = f"{option}={socket_path!r}" if socket_path is not None else \
                f"{option} unset (default {getattr(self, 'socket_path', '?')!r})"
            raise type(e)(f"{who}: {given}", e.code, str(e), e.status) from e

    @staticmethod
    def _register_one(client: CacheManagerClient, buf: Any) -> int:
        if isinstance(buf, EngineBuffer):
            return client.register_buffer(buf)
        return client.register_cuda_buffer(buf.region())

    def _connect(self) -> CacheManagerClient:
        self._last_try = time.monotonic()
        if self._given is None:
            self.socket_path = resolve_socket_path().path   # for messages, should this connect fail
        client = CacheManagerClient(socket_path=self._given, instance_id=self.instance_id,
                                    timeout_ms=self.timeout_ms, role=self.role, manager_uid=self.manager_uid)
        self.socket_path = client.socket_path
        try:
            ids = {id(b): self._register_one(client, b) for b in self._buffers}
        except BaseException:
            client.close()
            raise
        self.client, self._ids = client, ids
        self.epochs.append(client.epoch)
        return client

    def get(self) -> CacheManagerClient | None:
        """The live client, reconnecting if the last one ended and the
        reconnect interval passed; None while no Manager answers."""
        if self.client is not None and not self.client.closed:
            return self.client
        if time.monotonic() - self._last_try < self.reconnect_interval_s * self._backoff:
            return None
        try:
            self._backoff = min(MAX_BACKOFF, self._backoff * 2)   # reset by a success
            client = self._connect()
        except Rejected as e:
            # The Manager answers but refuses a kept buffer (e.g. a CUDA
            # region at a --copy-backend host Manager): say so, not "no
            # Manager"; the session stays down.
            log.warning("%s: the OrbitKV Manager at %s refused a KV buffer it had accepted before its restart (%s); "
                        "treating lookups as misses", self.who, self.socket_path, e)
            return None
        except (OrbitKVError, OSError, RuntimeError, ValueError) as e:
            # RuntimeError, ValueError: a CUDA buffer's region() (the driver
            # refused the IPC handle query); the session stays down.
            log.warning("%s: no OrbitKV Manager at %s (%s); treating lookups as misses", self.who,
                        self.socket_path, e)
            return None
        self._backoff = 1
        log.warning("%s: reconnected to the OrbitKV Manager at %s (epoch %d)", self.who, self.socket_path,
                    self.epochs[-1])
        return client

    def register(self, buf: Any) -> int:
        """Register ``buf`` (an ``EngineBuffer``, or a ``CudaKVBuffer``,
        registered by ``register_cuda_buffer(buf.region())``) now and after
        every reconnect; returns its id in the current session. Raises as
        ``register_buffer``/``register_cuda_buffer`` (``Rejected`` naming the
        field, e.g. a CUDA region at a ``--copy-backend host`` Manager) and,
        for a CUDA buffer, as ``region()`` (``OSError``, ``RuntimeError``,
        ``ValueError``); a buffer refused so is forgotten (not registered
        again at a reconnect), one whose session ended is kept. A buffer
        registered before is not registered again: its current id is
        returned (a second registration would map the same memory twice; a
        CUDA IPC handle opens once per context)."""
        if any(b is buf for b in self._buffers):
            if id(buf) in self._ids:
                return self._ids[id(buf)]
            raise Closed(f"{self.who}: register_buffer", Code.ECLOSED,
                         f"no Manager at {self.socket_path}: the buffer is registered when the session reconnects")
        # Kept only once registered or waiting for a reconnect: a reconnect
        # inside get() registers the kept buffers, never this one, so a
        # refusal of it reaches the caller as such.
        client = self.get()
        if client is None:
            self._buffers.append(buf)
            raise Closed(f"{self.who}: register_buffer", Code.ECLOSED, f"no Manager at {self.socket_path}")
        try:
            self._ids[id(buf)] = self._register_one(client, buf)
        except SESSION_ENDING as e:
            self._buffers.append(buf)
            self.fail(e)
            raise
        self._buffers.append(buf)
        return self._ids[id(buf)]

    def manager_alive(self, every_s: float = 0.1) -> bool:
        """False once the live client's Manager has exited (its pidfd is
        readable; the session is then failed, so the next ``get()``
        reconnects), else True. Looks at most once per ``every_s`` seconds
        (one ``poll(2)``), so a caller that answers from the discovery index
        alone, with no round trip that would find the death, notices a
        Manager restart within that interval at a syscall per interval."""
        now = time.monotonic()
        if self.client is None or self.client.closed or now - self._last_alive < every_s:
            return True
        self._last_alive = now
        p = select.poll()
        p.register(self.client.manager_pidfd(), select.POLLIN)
        if not p.poll(0):
            return True
        self.fail(ManagerDied(f"{self.who}: manager_alive", Code.EMANAGER_DIED,
                              f"the Manager at {self.socket_path} exited (its pidfd is readable)"))
        return False

    def buffer_id(self, buf: Any) -> int:
        """``buf``'s id in the current session (KeyError when unregistered)."""
        return self._ids[id(buf)]

    def fail(self, err: BaseException) -> bool:
        """Record an error of a call on this session: a session-ending one
        (see ``SESSION_ENDING``, and a control call's ``TimedOut`` with
        ``no_reply``) drops the client (True); others (a ticket wait that
        passed its own deadline among them) keep it (False)."""
        if isinstance(err, SESSION_ENDING) or (isinstance(err, TimedOut) and getattr(err, "no_reply", True)):
            if self.client is not None:
                log.warning("%s: OrbitKV session ended (%s); will reconnect", self.who, err)
                self.client.close()
            # No reconnect before an interval has passed (also when the
            # caller closed the client first): the engine step that just
            # waited out a deadline must not wait out a connect deadline too.
            self._last_try = time.monotonic()
            self.client = None
            return True
        return False

    def close(self) -> None:
        """Close the client (idempotent); buffers stay the caller's."""
        if self.client is not None:
            self.client.close()
            self.client = None
