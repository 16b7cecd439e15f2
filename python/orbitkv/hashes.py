"""Immutable batches of 16-byte block hashes, shared by reference with C.

An engine builds one ``BlockHashes`` per lookup (one copy into liborbitkv's
``okv_block_hashes``) and then passes the batch, or prefix views of it, to
``CacheManagerClient.query`` / ``revise``. A view is (batch, length): no
hashes are copied to make one, and ``revise`` recognises an unchanged view
by the batch pointer and length in constant time and sends a poll instead
of a new revision (client.h "Query tickets"). Constructing a batch costs
O(number of hashes); keep and reuse it rather than rebuilding it per poll.

Ownership: a ``BlockHashes`` owns one reference to the C batch; a live
ticket holds its own, so closing or dropping the Python object never frees
hashes a ticket still uses. The reference is dropped by ``close()`` or when
the object is garbage collected.

Threads: like liborbitkv's batches (reference counts are not atomic), use a
batch with one client, and from one thread at a time.
"""

from __future__ import annotations

import ctypes
from typing import Iterable, Iterator, Sequence, Union

from . import _abi
from ._native import lib
from .errors import BadArgument, Closed, error_from_code
from .identity import block_hash16

__all__ = ["BlockHashes", "HashView", "HashesLike"]

_HASH = _abi.HASH_BYTES


class BlockHashes:
    """An immutable batch of n >= 1 16-byte block hashes (okv_block_hashes).

    ``BlockHashes(hashes)``: ``hashes`` is a sequence of bytes-like values
    of exactly 16 bytes each (e.g. from ``block_hash16``); a value of
    another width raises ``BadArgument`` (a ``ValueError``) naming its
    index; an empty sequence raises ``BadArgument``.

    * ``len(bh)`` - the hash count;
    * ``bh[i]`` - hash i as ``bytes`` (a copy);
    * ``bh[:n]`` - a ``HashView`` of the first n hashes sharing this batch
      (Python slice rules for n: negative counts from the end, too large is
      clamped); only prefix slices exist (``bh[1:]`` raises ``BadArgument``);
    * ``bh.view()`` - the whole batch as a view;
    * ``bh.close()`` - drop this object's reference now (idempotent).
    """

    __slots__ = ("_handle", "_len", "__weakref__")

    def __init__(self, hashes: Sequence[bytes]):
        self._handle = None
        self._len = 0
        items = list(hashes)
        for i, h in enumerate(items):
            if not isinstance(h, (bytes, bytearray, memoryview)):
                raise BadArgument("BlockHashes", -22,
                                  f"hash {i} is a {type(h).__name__}; want 16 bytes (see block_hash16)")
            if len(h) != _HASH:
                raise BadArgument("BlockHashes", -22, f"hash {i} is {len(h)} bytes; want exactly {_HASH}")
        self._adopt(b"".join(items), len(items))

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> "BlockHashes":
        """A batch from one contiguous buffer of n * 16 bytes (hash i at
        bytes [16 i, 16 i + 16)). Raises ``BadArgument`` when the length is
        0 or not a multiple of 16."""
        raw = bytes(data)
        if len(raw) % _HASH:
            raise BadArgument("BlockHashes.from_bytes", -22,
                              f"{len(raw)} bytes is not a whole number of {_HASH}-byte hashes")
        self = cls.__new__(cls)
        self._handle = None
        self._len = 0
        self._adopt(raw, len(raw) // _HASH)
        return self

    @classmethod
    def from_engine(cls, engine_hashes: Iterable[object]) -> "BlockHashes":
        """A batch of ``block_hash16(h)`` for each engine hash h, in order
        (``TypeError`` naming the type of an unsupported value)."""
        return cls.from_bytes(b"".join(block_hash16(h) for h in engine_hashes))

    def _adopt(self, raw: bytes, n: int) -> None:
        if n == 0:
            raise BadArgument("BlockHashes", -22, "no hashes; a batch holds at least 1")
        if n > _abi.U32_MAX:
            raise BadArgument("BlockHashes", -22, f"{n} hashes; limit {_abi.U32_MAX}")
        out = ctypes.c_void_p()
        rc = lib.okv_block_hashes_new(raw, n, ctypes.byref(out))
        if rc != 0:
            raise error_from_code("BlockHashes", rc, f"okv_block_hashes_new of {n} hashes")
        self._handle = out.value
        self._len = n

    # ---- inspection ----

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, key: int | slice) -> Union[bytes, "HashView"]:
        if isinstance(key, slice):
            return self.view()[key]
        if not isinstance(key, int):
            raise TypeError(f"BlockHashes indices are int or a prefix slice, not {type(key).__name__}")
        n = self._len
        if key < 0:
            key += n
        if not 0 <= key < n:
            raise IndexError(f"BlockHashes index out of range: {key} of {n}")
        return ctypes.string_at(self.data_address + key * _HASH, _HASH)

    def __iter__(self) -> Iterator[bytes]:
        raw = ctypes.string_at(self.data_address, self._len * _HASH)
        return (raw[i:i + _HASH] for i in range(0, len(raw), _HASH))

    def view(self) -> "HashView":
        """The whole batch as a ``HashView`` (no copy)."""
        return HashView(self, self._len)

    @property
    def closed(self) -> bool:
        """Whether close() dropped this object's reference."""
        return self._handle is None

    @property
    def handle(self) -> int:
        """Address of the C ``okv_block_hashes`` (identity of the batch;
        every view of this batch reports the same). Raises ``Closed`` after
        close()."""
        if self._handle is None:
            raise Closed("BlockHashes", _abi.Code.ECLOSED, "batch closed")
        return self._handle

    @property
    def data_address(self) -> int:
        """Address of hash 0 (okv_block_hashes_data); the n * 16 bytes stay
        valid until close() and every ticket using the batch is gone."""
        return lib.okv_block_hashes_data(self.handle)

    def close(self) -> None:
        """Drop this object's reference to the C batch (tickets keep theirs).
        Idempotent; later use of the batch raises ``Closed``."""
        h, self._handle = self._handle, None
        if h is not None:
            lib.okv_block_hashes_unref(h)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def __enter__(self) -> "BlockHashes":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"0x{self._handle:x}"
        return f"BlockHashes(n={self._len}, {state})"


class HashView:
    """A prefix (batch, length) of a ``BlockHashes``: the first ``length``
    hashes, sharing the batch's allocation. Cheap to make; equal views
    (same batch object, same length) are what ``revise`` treats as
    unchanged. ``view[:m]`` is a shorter prefix of the same batch.

    A view of length 0 can exist but is refused by ``query``/``revise``
    (``BadArgument``): a query needs at least one hash.
    """

    __slots__ = ("batch", "length")

    def __init__(self, batch: BlockHashes, length: int):
        if not isinstance(batch, BlockHashes):
            raise TypeError(f"HashView of a {type(batch).__name__}; want BlockHashes")
        if not 0 <= length <= len(batch):
            raise BadArgument("HashView", -22, f"length {length} outside 0..{len(batch)}")
        self.batch = batch
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, key: int | slice) -> Union[bytes, "HashView"]:
        if isinstance(key, slice):
            start, stop, step = key.indices(self.length)
            if step != 1 or start != 0:
                raise BadArgument("HashView", -22,
                                  f"only prefix slices [:n] share the batch; got [{key.start}:{key.stop}:{key.step}]")
            return HashView(self.batch, max(stop, 0))
        if not isinstance(key, int):
            raise TypeError(f"HashView indices are int or a prefix slice, not {type(key).__name__}")
        if key < 0:
            key += self.length
        if not 0 <= key < self.length:
            raise IndexError(f"HashView index out of range: {key} of {self.length}")
        return self.batch[key]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HashView) and other.batch is self.batch and other.length == self.length

    def __hash__(self) -> int:
        return hash((id(self.batch), self.length))

    def __repr__(self) -> str:
        return f"HashView({self.batch!r}[:{self.length}])"


#: What query(), revise() and lookup() accept as hashes.
HashesLike = Union[BlockHashes, HashView, Sequence[bytes]]
