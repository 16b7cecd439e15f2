"""Engine KV buffers of the host backend: sealed memfds the Manager maps.

``EngineBuffer(layers, page_bytes, page_count)`` allocates through
liborbitkv's ``okv_buffer_alloc``: one memfd sealed against shrink and grow
(so the Manager's copy workers can never fault on it), mapped shared and
pre-faulted. Layout, layer-major: page ``p`` of layer ``l`` is the
``page_bytes`` bytes at offset ``(l * page_count + p) * page_bytes``
(docs/cache.md "Engine buffers"). A block the Manager stores is one page
index across every layer: ``layers * page_bytes`` bytes.

Python reaches the bytes through ``memoryview``s of a second shared mapping
of the same memfd, made with the ``mmap`` module: writes through them are
what the Manager copies on publish, and restores land in them. Going
through ``mmap`` makes the views memory-safe: while any view is alive the
mapping cannot be closed (``close()`` raises ``BufferInUse``), so no view
can ever point at unmapped memory.

Lifetime (client.h okv_register_buffer: "The buffer must stay allocated
until okv_close"): a registered buffer is kept alive by its client, and
``close()`` of a buffer still registered with an open client raises
``BufferInUse``; close the client first. Destination pages of a restore
belong to the Manager until the restore's terminal result (docs/design.md §6
rule 3): do not read or write them before.

Threads: the object is not locked; allocation and close belong to one
thread. Reading and writing pages from several threads is as safe as any
shared memory (no ordering is provided).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import weakref
from typing import TYPE_CHECKING

from . import _abi
from ._native import lib
from .errors import BadArgument, BufferInUse, Closed, error_from_code

if TYPE_CHECKING:  # pragma: no cover
    from .client import CacheManagerClient

__all__ = ["EngineBuffer"]

_EBUSY = -16


class EngineBuffer:
    """A sealed-memfd engine KV buffer: ``layers`` layers of ``page_count``
    pages of ``page_bytes`` bytes (``page_bytes`` a multiple of 64).

    Raises ``BadArgument`` (a ``ValueError``) for a zero dimension, a
    ``page_bytes`` that is not a multiple of 64, or an overflowing size;
    ``NativeOSError`` (e.g. ENOMEM) when the allocation fails.

    Attributes: ``layers``, ``page_bytes``, ``page_count``, ``nbytes``
    (total bytes), ``fd`` (the memfd, owned by the buffer: do not close
    it), ``address`` (base address of liborbitkv's mapping, valid until
    ``close()``; for code that needs a raw pointer, e.g. ``torch``).
    """

    def __init__(self, layers: int, page_bytes: int, page_count: int):
        for name, value, limit in (("layers", layers, _abi.U32_MAX), ("page_bytes", page_bytes, _abi.U64_MAX),
                                   ("page_count", page_count, _abi.U64_MAX)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise BadArgument("EngineBuffer", -22, f"{name}: want int, got {type(value).__name__}")
            if not 1 <= value <= limit:
                raise BadArgument("EngineBuffer", -22, f"{name} {value}: want 1..{limit}")
        if page_bytes % 64:
            raise BadArgument("EngineBuffer", -22, f"page_bytes {page_bytes}: want a multiple of 64")
        self._buf = _abi.Buffer()
        self._map: mmap.mmap | None = None
        self._view: memoryview | None = None
        # Clients this buffer was registered with (weak: a client keeps its
        # buffers alive, not the other way round).
        self._clients: "weakref.WeakSet[CacheManagerClient]" = weakref.WeakSet()
        rc = lib.okv_buffer_alloc(layers, page_bytes, page_count, ctypes.byref(self._buf))
        if rc != 0:
            detail = f"okv_buffer_alloc({layers} layers x {page_count} pages x {page_bytes} bytes)"
            dumpable = os.environ.get("ORBITKV_DUMPABLE")
            if rc == -errno.EINVAL and dumpable not in (None, "", "0", "1"):
                # The allocation clears the process's dumpable attribute
                # first, and refuses a value of the opt-out it cannot read.
                detail += f": ORBITKV_DUMPABLE is {dumpable!r}: want 0 or 1 (unset: the engine process is made non-dumpable)"
            raise error_from_code("EngineBuffer", rc, detail)
        try:
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            self._map = mmap.mmap(self._buf.fd, self._buf.bytes, flags=flags,
                                  prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            lib.okv_buffer_free(ctypes.byref(self._buf))
            raise

    # ---- geometry ----

    layers = property(lambda self: self._buf.layers,
                      doc="Layers of the buffer (int, >= 1), as allocated.")
    page_bytes = property(lambda self: self._buf.page_bytes,
                          doc="Bytes of one page of one layer (int, a multiple of 64), as allocated.")
    page_count = property(lambda self: self._buf.page_count,
                          doc="Pages per layer (int, >= 1), as allocated.")

    @property
    def nbytes(self) -> int:
        """Total bytes: layers * page_count * page_bytes."""
        return self._buf.bytes

    @property
    def fd(self) -> int:
        """The sealed memfd (owned by this buffer; -1 after close())."""
        return self._buf.fd if self._map is not None else -1

    @property
    def address(self) -> int:
        """Base address of liborbitkv's mapping (0 after close())."""
        return self._buf.base or 0

    @property
    def closed(self) -> bool:
        return self._map is None

    def offset(self, layer: int, page: int) -> int:
        """Byte offset of page ``page`` of layer ``layer``:
        ``(layer * page_count + page) * page_bytes``. Raises ``IndexError``
        naming the index out of range, ``TypeError`` for a non-int index,
        ``Closed`` after ``close()``."""
        if self._map is None:
            raise Closed("EngineBuffer.offset", _abi.Code.ECLOSED, "buffer closed")
        for name, v in (("layer", layer), ("page", page)):
            if isinstance(v, bool) or not isinstance(v, int):
                try:
                    import operator
                    v = operator.index(v)  # numpy integers
                except TypeError:
                    raise TypeError(f"EngineBuffer: {name} index {v!r}: want an int, "
                                    f"not {type(v).__name__}") from None
                if name == "layer":
                    layer = v
                else:
                    page = v
        if not 0 <= layer < self._buf.layers:
            raise IndexError(f"EngineBuffer: layer {layer} out of range 0..{self._buf.layers - 1}")
        if not 0 <= page < self._buf.page_count:
            raise IndexError(f"EngineBuffer: page {page} out of range 0..{self._buf.page_count - 1}")
        return (layer * self._buf.page_count + page) * self._buf.page_bytes

    # ---- bytes ----

    def memoryview(self) -> memoryview:
        """A writable ``memoryview`` (format "B") of the whole buffer,
        layer-major. While any view is alive, ``close()`` raises."""
        if self._map is None:
            raise Closed("EngineBuffer.memoryview", _abi.Code.ECLOSED, "buffer closed")
        if self._view is None:
            self._view = memoryview(self._map)
        return self._view[:]

    def page(self, layer: int, page: int) -> memoryview:
        """A writable ``memoryview`` of the ``page_bytes`` bytes of page
        ``page`` of layer ``layer`` (``IndexError`` when out of range,
        ``Closed`` after ``close()``)."""
        if self._map is None:
            raise Closed("EngineBuffer.page", _abi.Code.ECLOSED, "buffer closed")
        off = self.offset(layer, page)
        return self.memoryview()[off:off + self._buf.page_bytes]

    # ---- lifetime ----

    def _registered(self, client: "CacheManagerClient") -> None:
        self._clients.add(client)

    def close(self) -> None:
        """Unmap and close the memfd (okv_buffer_free). Idempotent.

        Raises ``BufferInUse`` while the buffer is registered with a client
        that is still open (close the client first: the Manager may be
        copying into or out of it), or while memoryviews of it are alive
        (release or drop them first); the buffer is then left as it was."""
        if self._map is None:
            return
        open_clients = [c for c in self._clients if not c.closed]
        if open_clients:
            raise BufferInUse(
                "EngineBuffer.close", _EBUSY,
                f"buffer (fd {self._buf.fd}) is registered with {len(open_clients)} open client(s); "
                "close them first (client.h: a registered buffer stays allocated until okv_close)")
        if self._view is not None:
            self._view.release()
            self._view = None
        try:
            self._map.close()
        except BufferError as e:
            raise BufferInUse("EngineBuffer.close", _EBUSY,
                              "memoryviews of the buffer are still alive; release or drop them first") from e
        self._map = None
        lib.okv_buffer_free(ctypes.byref(self._buf))

    def __del__(self) -> None:
        # A registered buffer is referenced by its client, so this runs only
        # once every client that registered it is gone.
        try:
            if self._map is not None:
                if self._view is not None:
                    self._view.release()
                try:
                    self._map.close()
                except BufferError:
                    pass  # views keep the mmap alive; the memfd pages too
                lib.okv_buffer_free(ctypes.byref(self._buf))
        except Exception:
            pass

    def __enter__(self) -> "EngineBuffer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._map is None else f"fd {self._buf.fd}"
        return (f"EngineBuffer(layers={self._buf.layers}, page_bytes={self._buf.page_bytes}, "
                f"page_count={self._buf.page_count}, {state})")
