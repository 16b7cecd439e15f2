"""Argument checks shared by the client and its ticket operations.

Each check raises ``BadArgument`` (a ``ValueError``) naming the operation,
the argument and its limit, before anything reaches liborbitkv (C would
refuse most of these too, but ctypes silently wraps integers that do not
fit a C type, so ranges must be checked here). Private to the package.
"""

from __future__ import annotations

import ctypes
import math
import time
from typing import Sequence

from . import _abi
from ._abi import Code, QueryFlags
from .errors import BadArgument, Closed
from .hashes import BlockHashes, HashView

EINVAL = -22
HASH = _abi.HASH_BYTES


def check_u32(op: str, name: str, v: object) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _abi.U32_MAX:
        raise BadArgument(op, EINVAL, f"{name} {v!r}: want an int in 0..{_abi.U32_MAX}")


def check_u64(op: str, name: str, v: object) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _abi.U64_MAX:
        raise BadArgument(op, EINVAL, f"{name} {v!r}: want an int in 0..2**64-1")


def namespace(op: str, ns: object) -> _abi.Namespace:
    if not isinstance(ns, (bytes, bytearray, memoryview)) or len(ns) != HASH:
        got = f"{len(ns)} bytes" if isinstance(ns, (bytes, bytearray, memoryview)) else type(ns).__name__
        raise BadArgument(op, EINVAL, f"ns: want the 16-byte namespace (CacheIdentity.namespace()), got {got}")
    return _abi.Namespace.from_buffer_copy(bytes(ns))


def as_view(op: str, hashes: object) -> HashView:
    if isinstance(hashes, HashView):
        view = hashes
    elif isinstance(hashes, BlockHashes):
        view = hashes.view()
    elif isinstance(hashes, (list, tuple)):
        if not hashes:
            raise BadArgument(op, EINVAL, "no hashes; a query needs at least 1")
        view = BlockHashes(hashes).view()
    else:
        raise BadArgument(op, EINVAL, "hashes: want BlockHashes, a HashView or a list of 16-byte values, "
                                       f"got {type(hashes).__name__}")
    if view.length == 0:
        raise BadArgument(op, EINVAL, "empty view (hashes[:0]); a query needs at least 1 hash")
    if view.batch.closed:
        raise Closed(op, Code.ECLOSED, "the BlockHashes batch was closed")
    return view


def check_flags(op: str, flags: object, recovery: object) -> QueryFlags:
    if isinstance(flags, bool) or not isinstance(flags, int) or flags < 0:
        raise BadArgument(op, EINVAL, f"flags {flags!r}: want QueryFlags")
    if int(flags) & ~int(sum(QueryFlags)):
        raise BadArgument(op, EINVAL, f"flags 0x{int(flags):x}: unknown bits (QueryFlags covers 0x1f)")
    f = QueryFlags(int(flags))
    if f & QueryFlags.RECOVERY and recovery is None:
        raise BadArgument(op, EINVAL, "QueryFlags.RECOVERY needs recovery=(first, count)")
    return f


def check_recovery(op: str, recovery: object, view: HashView) -> tuple[int, int]:
    if recovery is None:
        return (0, 0)
    try:
        first, count = recovery  # type: ignore[misc]
    except (TypeError, ValueError):
        raise BadArgument(op, EINVAL, f"recovery {recovery!r}: want (first, count)") from None
    check_u32(op, "recovery first", first)
    check_u32(op, "recovery count", count)
    if count < 1 or first + count > view.length:
        raise BadArgument(op, EINVAL,
                          f"recovery ({first}, {count}): want count >= 1 and first + count <= {view.length} hashes")
    return (first, count)


def join_hashes(op: str, hashes: Sequence[bytes]) -> bytes:
    for i, h in enumerate(hashes):
        if not isinstance(h, (bytes, bytearray, memoryview)) or len(h) != HASH:
            got = f"{len(h)} bytes" if isinstance(h, (bytes, bytearray, memoryview)) else type(h).__name__
            raise BadArgument(op, EINVAL, f"hash {i} is {got}; want exactly {HASH} bytes")
    return b"".join(hashes)


def u32_array(op: str, name: str, values: Sequence[int]) -> ctypes.Array:
    # ctypes wraps out-of-range values silently, so the range is checked.
    if not isinstance(values, (list, tuple, range)):
        # numpy arrays, tensors, other iterables: plain ints first (numpy's
        # truth value and wrapping rules are not ctypes').
        try:
            values = values.tolist() if hasattr(values, "tolist") else list(values)
        except TypeError:
            raise BadArgument(op, EINVAL, f"{name}s: want a sequence of ints, got {type(values).__name__}") from None
        if not isinstance(values, list):
            raise BadArgument(op, EINVAL, f"{name}s: want a sequence of ints, got a scalar {values!r}")
    try:
        arr = (ctypes.c_uint32 * len(values))(*values)
        if not values or (min(values) >= 0 and max(values) <= _abi.U32_MAX):
            return arr
    except (TypeError, OverflowError):
        pass
    for i, v in enumerate(values):
        check_u32(op, f"{name} {i}", v)
    raise BadArgument(op, EINVAL, f"{name}s: want ints in 0..{_abi.U32_MAX}")


def timeout_ms(op: str, timeout_s: object) -> int:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s < math.inf:
        raise BadArgument(op, EINVAL, f"timeout_s {timeout_s!r}: want seconds > 0")
    return min(max(int(timeout_s * 1000 + 0.999), 1), _abi.MAX_TIMEOUT_MS)


def deadline(op: str, timeout_s: object) -> float:
    timeout_ms(op, timeout_s)
    return time.monotonic() + float(timeout_s)  # type: ignore[arg-type]
