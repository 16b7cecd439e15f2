"""Loads liborbitkv with ctypes and declares every function Python calls.

Where the library comes from, first match wins:

1. ``$ORBITKV_LIB`` when set: that file only (a path that was asked for and
   fails to load is an error, never silently replaced by another library);
2. the copy bundled inside the package, ``orbitkv/_lib/liborbitkv.so.0``,
   present only in an installed wheel (``make wheel``; never in the source
   tree);
3. the repository build, ``build/native/liborbitkv.so`` relative to this
   package (``python/orbitkv/../../build/native``), made by ``make native``;
4. ``liborbitkv.so.0`` through the system's dynamic loader (an installed
   copy).

When none loads, importing this module (and so ``orbitkv``) raises
``ImportError`` naming every path tried, why each failed, and "run make
native".

The GIL: the library is loaded with ``ctypes.CDLL``, which releases the
GIL for the duration of every foreign call, so a thread blocked in
liborbitkv (a restore wait, a publish waiting for its copy) never stops
other Python threads. liborbitkv's own rule still holds: an ``okv_client``
is not thread-safe; ``CacheManagerClient`` serialises calls on one client
with a lock.

Every function gets ``argtypes`` and ``restype`` here, so a wrong argument
is a ``ctypes.ArgumentError`` in Python rather than undefined behaviour in C.
Opaque handles (``okv_client *``, ``okv_block_hashes *``, ``okv_ticket *``)
travel as ``c_void_p`` (Python ``int`` or ``None``).

Private: only the orbitkv package imports it.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint32, c_uint64, c_void_p

from . import _abi

_HERE = os.path.dirname(os.path.abspath(__file__))
#: The copy a wheel bundles (``make wheel``); absent in the source tree.
BUNDLED_LIBRARY = os.path.join(_HERE, "_lib", "liborbitkv.so.0")
#: The repository build of liborbitkv (``make native``).
REPO_LIBRARY = os.path.normpath(os.path.join(_HERE, "..", "..", "build", "native", "liborbitkv.so"))
#: The soname looked up through the system's dynamic loader.
SYSTEM_LIBRARY = "liborbitkv.so.0"


def _candidates() -> list[str]:
    explicit = os.environ.get("ORBITKV_LIB")
    if explicit:
        return [explicit]
    return [BUNDLED_LIBRARY, REPO_LIBRARY, SYSTEM_LIBRARY]


def _load() -> tuple[ctypes.CDLL, str]:
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (no such file)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({e})")
    source = "$ORBITKV_LIB" if os.environ.get("ORBITKV_LIB") else "the package, the repository build and the system"
    raise ImportError(
        f"orbitkv: cannot load liborbitkv from {source}; tried: "
        + "; ".join(tried)
        + ". Run `make native` in the repository (it builds build/native/liborbitkv.so), "
        "or set ORBITKV_LIB to the library's path."
    )


lib, LIBRARY_PATH = _load()

_P = POINTER
_H = c_void_p  # opaque handle

# (name, restype, argtypes) of every function the package calls.
_PROTOTYPES = [
    # client lifecycle (client.h)
    ("okv_connect_err", c_int, [_P(_abi.ConnectOptions), _P(c_void_p), c_char_p, c_size_t]),
    ("okv_close", None, [_H]),
    ("okv_ping", c_int, [_H, c_uint64, _P(c_uint64)]),
    ("okv_health", c_int, [_H, _P(_abi.Health)]),
    ("okv_strerror", c_char_p, [c_int]),
    ("okv_last_error", c_char_p, [_H]),
    ("okv_epoch", c_uint64, [_H]),
    ("okv_manager_version", c_char_p, [_H]),
    ("okv_notification_fd", c_int, [_H]),
    ("okv_manager_pidfd", c_int, [_H]),
    ("okv_socket_path", c_int, [c_char_p, c_char_p, c_size_t]),
    ("okv_resolve_socket_path", c_int,
     [c_char_p, c_char_p, c_char_p, c_char_p, c_size_t, _P(c_int), _P(c_uint32)]),
    ("okv_runtime_dir_owner", c_int, [c_char_p, _P(c_uint32)]),
    # cache identity
    ("okv_namespace_fingerprint", c_int, [_P(_abi.NamespaceSpec), _P(_abi.Namespace)]),
    # engine buffers
    ("okv_buffer_alloc", c_int, [c_uint32, c_uint64, c_uint64, _P(_abi.Buffer)]),
    ("okv_buffer_free", None, [_P(_abi.Buffer)]),
    ("okv_register_buffer", c_int, [_H, _P(_abi.Buffer), _P(c_uint32)]),
    ("okv_register_cuda_buffer", c_int, [_H, _P(_abi.CudaRegion), _P(c_uint32)]),
    # cache operations; hash and page arrays travel as addresses
    ("okv_query", c_int, [_H, _P(_abi.Namespace), c_void_p, c_uint32, _P(_abi.Lease)]),
    ("okv_publish", c_int,
     [_H, _P(_abi.Namespace), c_uint32, c_void_p, c_void_p, c_uint32, _P(_abi.PublishResult)]),
    ("okv_publish_records", c_int,
     [_H, _P(_abi.Namespace), c_uint32, c_void_p, c_void_p, c_void_p, c_uint32, _P(_abi.PublishResult)]),
    ("okv_restore", c_int, [_H, c_uint64, c_uint32, c_void_p, c_uint32, _P(c_uint64)]),
    ("okv_restore_poll", c_int, [_H, c_uint64]),
    ("okv_restore_wait", c_int, [_H, c_uint64, c_uint32]),
    ("okv_release", c_int, [_H, c_uint64]),
    ("okv_max_query_hashes", c_uint32, [_H]),
    ("okv_max_restore_entries", c_uint32, [_H]),
    ("okv_max_publish_entries", c_uint32, [_H]),
    # local discovery (orbitkv/discover.h)
    ("okv_discover_open", c_int, [_H, _P(_abi.Namespace)]),
    ("okv_discover_local", c_int, [_H, _P(_abi.Namespace), c_void_p, c_size_t, _P(c_uint32)]),
    ("okv_discover_flags", c_int, [_H, _P(_abi.Namespace), _P(c_uint32)]),
    # hash batches
    ("okv_block_hashes_new", c_int, [c_void_p, c_uint32, _P(c_void_p)]),
    ("okv_block_hashes_ref", c_void_p, [_H]),
    ("okv_block_hashes_unref", None, [_H]),
    ("okv_block_hashes_len", c_uint32, [_H]),
    ("okv_block_hashes_data", c_void_p, [_H]),
    # tickets
    ("okv_ticket_submit", c_int, [_H, _P(_abi.QuerySpec), _P(c_void_p), _P(_abi.QueryAnswerC)]),
    ("okv_ticket_poll", c_int, [_H, _H, _P(_abi.QueryAnswerC)]),
    ("okv_ticket_revise", c_int, [_H, _H, _P(_abi.QuerySpec), _P(_abi.QueryAnswerC)]),
    ("okv_ticket_claim", c_int, [_H, _H, _P(_abi.QueryAnswerC)]),
    ("okv_ticket_cancel", c_int, [_H, _H]),
    ("okv_ticket_free", None, [_H, _H]),
    ("okv_ticket_op_id", c_uint64, [_H]),
    ("okv_ticket_revision", c_uint32, [_H]),
    ("okv_ticket_live", c_int, [_H]),
]

for _name, _restype, _argtypes in _PROTOTYPES:
    try:
        _fn = getattr(lib, _name)
    except AttributeError as e:  # an older library than these headers
        raise ImportError(
            f"orbitkv: {LIBRARY_PATH} does not export {_name}; it is older than this package "
            "(client and library are built together: run `make native`)"
        ) from e
    _fn.restype = _restype
    _fn.argtypes = _argtypes
del _name, _restype, _argtypes, _fn


def strerror(code: int) -> str:
    """okv_strerror: static text of any okv_ return code (0, OKV_E*, -errno)."""
    return lib.okv_strerror(code).decode("utf-8", "replace")

