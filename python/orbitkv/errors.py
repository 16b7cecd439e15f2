"""Errors of the OrbitKV Python client: one class per liborbitkv outcome.

liborbitkv returns 0, one of the ``OKV_E*`` codes of ``client.h`` or
``-errno``; this module is the one table that turns those codes into Python
exceptions (CONTRIBUTING.md habit 7: translate once per boundary). Every
exception is an ``OrbitKVError`` carrying

* ``op``     - what failed ("query", "publish to buffer 0", "connect to
  /tmp/okv.sock");
* ``code``   - the C return code (``int``, negative);
* ``status`` - a short name: the Manager's status for Manager answers
  ("Unadmitted", "Invalid", "Timeout", "Internal", "Unsupported",
  "StaleSession", "StaleGeneration"), else the client-side outcome
  ("TimedOut", "ManagerDied", "Closed", "Fenced", "Protocol", "Version",
  "Refused", "Rejected", "TooBig", "Loading", "IndexBusy") or the errno name ("EINVAL",
  "ENOENT", ...);
* ``detail`` - ``okv_last_error`` text (or the connect error text), which
  names the field and limit, or "" when the library gave none;
* ``field``  - for ``InvalidRequest``, the field the Manager named
  ("page", "lease_id", ...; parsed from "field NAME" in ``detail``), else
  ``None``; ``entry`` - the index of the offending descriptor entry when
  the Manager gave one, else ``None``;
* ``result`` - for ``publish``, the (stored, present) counts of the chunks
  published before the failure, else ``None``.

``str(e)`` reads "<op>: <detail or okv_strerror text>", for example
"publish to buffer 0: Manager refused the request: field page, entry 3"
(op names the buffer, lease or operation id when the call has one).

Which to catch:

* ``Unadmitted`` - capacity pressure; nothing was done; retry later with a
  fresh request (docs/design.md §6 rule 5).
* ``Expired`` - the Manager answered Timeout: the ticket or restore expired
  there (60 s after its latest submission); it is retired.
* ``TimedOut`` - no reply within the deadline; the outcome is unknown
  (rule 1: success is never inferred from silence). Also a ``TimeoutError``.
* ``ManagerDied`` / ``Closed`` - the session is over; make a new client.
* ``InvalidRequest`` - the Manager refused a field; nothing changed.
* ``BadArgument`` - a ``ValueError``: the library (or this package) refused
  an argument before anything was sent (-EINVAL).
* ``NativeOSError`` - an ``OSError`` for any other -errno (``errno`` set),
  e.g. ENOENT or ECONNREFUSED from connecting to a socket with no Manager.
"""

from __future__ import annotations

import errno as _errno
import re

from ._abi import Code
from ._native import strerror

__all__ = [
    "OrbitKVError",
    "Unadmitted",
    "Expired",
    "InvalidRequest",
    "TimedOut",
    "ManagerDied",
    "Closed",
    "Fenced",
    "ProtocolError",
    "VersionMismatch",
    "Refused",
    "ForeignManager",
    "IndexBusy",
    "Rejected",
    "Stale",
    "Unsupported",
    "InternalError",
    "TooBig",
    "Pending",
    "BadArgument",
    "NativeOSError",
    "BufferInUse",
    "error_from_code",
]

_FIELD = re.compile(r"\bfield ([A-Za-z_][A-Za-z0-9_]*)")
_ENTRY = re.compile(r"\bentry (\d+)")


class OrbitKVError(Exception):
    """Base of every error of this package. Attributes: ``op``, ``code``,
    ``status``, ``detail``, ``field``, ``entry`` (see the module docs)."""

    def __init__(self, op: str, code: int, detail: str = "", status: str | None = None):
        self.op = op
        self.code = int(code)
        self.detail = detail or ""
        self.status = status or _status_of(self.code)
        self.field: str | None = None
        self.entry: int | None = None
        # publish only: (stored, present) of the chunks that went through
        # before the failure, else None.
        self.result: tuple[int, int] | None = None
        self.message = f"{op}: {self.detail or strerror(self.code)}"
        super().__init__(self.message)

    def __str__(self) -> str:
        # OSError subclasses would print "[Errno N] ..." instead.
        return self.message


class Unadmitted(OrbitKVError):
    """The Manager answered Unadmitted (OKV_EUNADMITTED): operation bounds
    or RAM full now; nothing was done; retry later with a fresh request."""


class Expired(OrbitKVError):
    """The Manager answered Timeout (OKV_EEXPIRED): the ticket or restore
    expired there; it is retired and its undelivered lease dropped."""


class InvalidRequest(OrbitKVError):
    """The Manager answered Invalid (OKV_EINVALID), or liborbitkv refused a
    retired ticket locally. ``field`` names the field ("page", "op_id", ...),
    ``entry`` the offending descriptor entry when known. Nothing changed."""

    def __init__(self, op: str, code: int, detail: str = "", status: str | None = None):
        super().__init__(op, code, detail, status)
        m = _FIELD.search(self.detail)
        self.field = m.group(1) if m else None
        m = _ENTRY.search(self.detail)
        self.entry = int(m.group(1)) if m else None


class TimedOut(OrbitKVError, TimeoutError):
    """No reply within the deadline (OKV_ETIMEDOUT), or a Python wait passed
    its deadline: the outcome is unknown. A timed-out restore leaves its
    destination pages the Manager's (do not reuse them).

    ``no_reply``: True when a control call got no reply within the
    client's ``timeout_ms`` (the Manager is wedged or the session is
    broken: the adapters end the session and reconnect); False when a
    Python wait (``wait``, ``lookup``) passed its own deadline while the
    Manager kept answering (a ticket still Loading)."""

    no_reply = True


class ManagerDied(OrbitKVError):
    """The Manager process exited (its pidfd became readable): the session
    is over; every later call on this client raises ``Closed``."""


class Closed(OrbitKVError):
    """The client was closed, or its session ended earlier (Manager died,
    malformed reply, desynchronised lifecycle stream): reconnect."""


class Fenced(OrbitKVError):
    """A publish ended ambiguously (OKV_EFENCED): the Manager may still read
    the buffer's pages, which stay pinned until it exits; later publishes
    and restores naming that buffer are refused without sending. Do not
    rewrite the source pages of a fenced buffer."""


class ProtocolError(OrbitKVError):
    """Malformed reply or frame from the Manager (OKV_EPROTO); ``detail``
    names the field. The session is usually unusable afterwards."""


class VersionMismatch(ProtocolError):
    """ABI or bootstrap version mismatch (OKV_EVERSION): the client library
    and the Manager must be built together."""


class Refused(OrbitKVError):
    """The Manager refused the hello (OKV_EREFUSED); ``detail`` says why
    (e.g. another uid)."""


class ForeignManager(Refused):
    """The bootstrap socket is served by a process of another uid
    (OKV_EPEER): the client refused it before sending the hello or any fd,
    so no KV buffer reached it. ``detail`` names the path, both uids and the
    fix (run the Manager as the engines' user, with its socket in a 0700
    directory). A ``Refused``, so handlers of refusals see it too."""


class IndexBusy(OrbitKVError):
    """``discover_local`` found a discovery index bucket mid-update for the
    reader's whole spin budget (OKV_EDISCOVER_BUSY: a Manager descheduled
    or dead while writing it). Nothing was sent to the Manager and the
    session is fine, unlike ``TimedOut``: take the round trip."""


class Rejected(OrbitKVError):
    """The Manager answered a lifecycle call with an error frame
    (OKV_EAPPLICATION), e.g. RegisterBuffers over a limit; ``detail`` names
    the field and limit."""


class Stale(OrbitKVError):
    """StaleSession / StaleGeneration: a message of another Manager epoch or
    an old generation (docs/design.md §6 rule 7)."""


class Unsupported(OrbitKVError):
    """The Manager does not serve this command (status Unsupported)."""


class InternalError(OrbitKVError):
    """The Manager answered Internal (e.g. a restore's copy failed)."""


class TooBig(OrbitKVError):
    """The batch does not fit the session's descriptor area (OKV_E2BIG);
    see ``CacheManagerClient.max_query_hashes`` and friends."""


class Pending(OrbitKVError):
    """Still running (OKV_EPENDING) where a terminal result was required."""


class BadArgument(OrbitKVError, ValueError):
    """An argument was refused before anything was sent (-EINVAL from the
    library, or this package's own checks). ``errno`` is ``EINVAL``."""

    errno = _errno.EINVAL


class NativeOSError(OrbitKVError, OSError):
    """A system error (-errno other than EINVAL) from liborbitkv; ``errno``
    and ``strerror`` are set as on any ``OSError``."""

    def __init__(self, op: str, code: int, detail: str = "", status: str | None = None):
        super().__init__(op, code, detail, status)
        self.errno = -self.code
        self.strerror = strerror(self.code)


class BufferInUse(OrbitKVError, RuntimeError):
    """``EngineBuffer.close()`` while the buffer is still registered with an
    open client, or while memoryviews of it are alive (code -EBUSY)."""


_CLASSES: dict[int, type[OrbitKVError]] = {
    Code.EPROTO: ProtocolError,
    Code.EVERSION: VersionMismatch,
    Code.EREFUSED: Refused,
    Code.ESTALE_SESSION: Stale,
    Code.ESTALE_GENERATION: Stale,
    Code.EINVALID: InvalidRequest,
    Code.ETIMEDOUT: TimedOut,
    Code.EMANAGER_DIED: ManagerDied,
    Code.ECLOSED: Closed,
    Code.EINTERNAL: InternalError,
    Code.EUNSUPPORTED: Unsupported,
    Code.EAPPLICATION: Rejected,
    Code.EPENDING: Pending,
    Code.EUNADMITTED: Unadmitted,
    Code.E2BIG: TooBig,
    Code.EEXPIRED: Expired,
    Code.EFENCED: Fenced,
    Code.EPEER: ForeignManager,
    Code.EDISCOVER_BUSY: IndexBusy,
}

_STATUS: dict[int, str] = {
    Code.EPROTO: "Protocol",
    Code.EVERSION: "Version",
    Code.EREFUSED: "Refused",
    Code.ESTALE_SESSION: "StaleSession",
    Code.ESTALE_GENERATION: "StaleGeneration",
    Code.EINVALID: "Invalid",
    Code.ETIMEDOUT: "TimedOut",
    Code.EMANAGER_DIED: "ManagerDied",
    Code.ECLOSED: "Closed",
    Code.EINTERNAL: "Internal",
    Code.EUNSUPPORTED: "Unsupported",
    Code.EAPPLICATION: "Rejected",
    Code.EPENDING: "Loading",
    Code.EUNADMITTED: "Unadmitted",
    Code.E2BIG: "TooBig",
    Code.EEXPIRED: "Timeout",
    Code.EFENCED: "Fenced",
    Code.EPEER: "ForeignManager",
    Code.EDISCOVER_BUSY: "IndexBusy",
}


def _status_of(code: int) -> str:
    if code in _STATUS:
        return _STATUS[code]
    if -4096 < code < 0:
        return _errno.errorcode.get(-code, f"errno {-code}")
    return "Unknown"


def error_from_code(op: str, code: int, detail: str = "") -> OrbitKVError:
    """The exception for liborbitkv return code ``code`` (nonzero) of the
    operation ``op``, with ``detail`` (``okv_last_error`` text or "")."""
    cls = _CLASSES.get(code)
    if cls is None:
        if code == -_errno.EINVAL:
            cls = BadArgument
        elif -4096 < code < 0:
            cls = NativeOSError
        else:
            cls = OrbitKVError
    return cls(op, code, detail)
