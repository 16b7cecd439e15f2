"""OrbitKV Python client: the node-local KV-cache Manager from an engine.

This package wraps liborbitkv (the C client library, ``native/``) with
``ctypes`` and the standard library only; every C call releases the GIL.
Importing it loads the library (``$ORBITKV_LIB``, else the repository's
``build/native/liborbitkv.so``, else ``liborbitkv.so.0``) and raises
``ImportError`` naming the paths tried when none loads (run ``make native``).

The pieces, in the order an engine uses them::

    import orbitkv

    ident = orbitkv.CacheIdentity("meta-llama/Llama-3.1-8B", "abc123", "bfloat16", "vllm-nhd",
                                  block_tokens=16, tp_rank=0, tp_size=1, pp_rank=0, pp_size=1)
    ns = ident.namespace()                        # 16 bytes, same in C, Go and Python

    with orbitkv.CacheManagerClient() as client:   # the default socket (resolve_socket_path)
        buf = orbitkv.EngineBuffer(layers=32, page_bytes=65536, page_count=1024)
        bid = client.register_buffer(buf)        # buf stays allocated until client.close()

        hashes = orbitkv.BlockHashes.from_engine(engine_block_hashes)   # once per lookup
        answer = client.lookup(ns, hashes[:n])   # ticket: query, wait, retire
        if answer.lease_id:
            op = client.start_restore(answer.lease_id, bid, [(b, page_of(b)) for b in range(answer.hit_count)])
            client.wait_restore(op, timeout_s=5.0)
            client.release(answer.lease_id)
        client.publish(ns, bid, missing_hashes, missing_pages)   # returns (stored, present)

Public names:

* ``CacheManagerClient`` - one session with the Manager (``client``),
  ``socket_path_for``, ``QueryFlags``, ``Role``;
* ``resolve_socket_path``, ``runtime_dir_owner``, ``SocketChoice``,
  ``RUNTIME_DIR`` - the default bootstrap socket rule (``client``);
* ``Ticket``, ``QueryAnswer`` - query tickets and their answers (``ticket``);
* ``CacheIdentity``, ``block_hash16`` - namespaces and block hashes
  (``identity``);
* ``BlockHashes``, ``HashView`` - immutable hash batches and prefix views
  (``hashes``);
* ``EngineBuffer`` - sealed-memfd engine KV buffers (``buffer``);
* the exceptions of ``errors``, all subclasses of ``OrbitKVError``;
* ``LIBRARY_PATH`` - the liborbitkv file that was loaded.

Contracts and limits are those of ``native/include/orbitkv/abi.h`` and
``client.h`` and docs/design.md §6; docs/cache.md explains the operations.
"""

from ._abi import QueryFlags, Role
from ._native import LIBRARY_PATH
from .buffer import EngineBuffer
from .client import (RECORD_MAX_TOKENS, RUNTIME_DIR, BlockRecord, CacheManagerClient, QueryAnswer, SocketChoice, Ticket,
                     resolve_socket_path, runtime_dir_owner, socket_path_for)
from . import errors as _errors
from .errors import *  # noqa: F401,F403  (the exception classes; listed in errors.__all__)
from .hashes import BlockHashes, HashView
from .identity import BLOCK_HASH_DOMAIN, CacheIdentity, block_hash16

__all__ = [
    "CacheManagerClient",
    "BlockRecord",
    "RECORD_MAX_TOKENS",
    "Ticket",
    "QueryAnswer",
    "QueryFlags",
    "Role",
    "socket_path_for",
    "resolve_socket_path",
    "runtime_dir_owner",
    "SocketChoice",
    "RUNTIME_DIR",
    "CacheIdentity",
    "block_hash16",
    "BLOCK_HASH_DOMAIN",
    "BlockHashes",
    "HashView",
    "EngineBuffer",
    "LIBRARY_PATH",
] + [n for n in _errors.__all__ if n != "error_from_code"]
