"""ctypes mirrors of the liborbitkv public structs, codes and flags.

What it owns: one ``ctypes.Structure`` per C struct the Python client passes
to or gets from liborbitkv (``native/include/orbitkv/client.h`` and
``abi.h``), and the integer constants of those headers that Python needs.
Why it is separate from ``_native``: the layouts can be checked (test
``test_abi``, which compiles a C program that prints ``sizeof`` and
``offsetof`` of every field named here) without loading the library.

Rules kept here, and checked by the test rather than by eye
(CONTRIBUTING.md habit 13):

* every Structure has the C struct's field names, in the C order, with the
  C types (``uint32_t`` -> ``c_uint32``, pointers -> ``c_void_p`` or
  ``c_char_p``); ctypes applies the same natural alignment as the C
  compiler, so no ``_pack_`` is used (abi.h: "no packed structs");
* ``C_STRUCTS`` maps each Structure to its C name; the test derives its C
  program from that table, so a field added here is checked at once.

Only the ``_native``, ``client`` and ``cuda`` modules import this; it is private.
"""

from __future__ import annotations

import ctypes
import enum
from ctypes import c_char, c_char_p, c_int, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p

# ---- constants of abi.h / client.h -------------------------------------------

#: Bytes of a namespace and of a block hash (abi.h okv_namespace, okv_block_hash).
HASH_BYTES = 16
#: Bytes of okv_health.service_id (abi.h OKV_SERVICE_ID_BYTES).
SERVICE_ID_BYTES = 16
#: Largest okv_connect_options.timeout_ms: one hour (client.h OKV_MAX_TIMEOUT_MS).
MAX_TIMEOUT_MS = 3_600_000
#: Largest string of a namespace spec, in bytes (identity.c OKVI_NS_MAX_STRING).
NS_MAX_STRING = 1024
#: Largest instance id, in bytes (abi.h OKV_INSTANCE_ID_BYTES).
INSTANCE_ID_BYTES = 64
#: Most token ids one block record carries (abi.h OKV_RECORD_MAX_TOKENS).
RECORD_MAX_TOKENS = 512
#: Largest value of a uint32_t argument.
U32_MAX = 0xFFFF_FFFF
#: Largest value of a uint64_t argument.
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF


class Code(enum.IntEnum):
    """OrbitKV error codes of client.h ``enum okv_error`` (negative, below
    every -errno). Functions return 0, one of these, or -errno."""

    OK = 0
    EPROTO = -1001
    EVERSION = -1002
    EREFUSED = -1003
    ESTALE_SESSION = -1004
    ESTALE_GENERATION = -1005
    EINVALID = -1006
    ETIMEDOUT = -1007
    EMANAGER_DIED = -1008
    ECLOSED = -1009
    EINTERNAL = -1010
    EUNSUPPORTED = -1011
    EAPPLICATION = -1012
    EPENDING = -1013
    EUNADMITTED = -1014
    E2BIG = -1015
    EEXPIRED = -1016
    EFENCED = -1017
    EPEER = -1018
    EDISCOVER_BUSY = -1019


class Status(enum.IntEnum):
    """Response statuses of abi.h ``enum okv_status``. ``str(Status.OK)``
    is not used: ``STATUS_NAMES`` gives the names the docs use."""

    OK = 0
    LOADING = 1
    MISS = 2
    CANDIDATES = 3
    UNADMITTED = 4
    INVALID = 5
    STALE_SESSION = 6
    STALE_GENERATION = 7
    TIMEOUT = 8
    INTERNAL = 9
    UNSUPPORTED = 10


#: Status value -> the name docs/cache.md and abi.h use ("Ok", "Loading", ...).
STATUS_NAMES = {
    Status.OK: "Ok",
    Status.LOADING: "Loading",
    Status.MISS: "Miss",
    Status.CANDIDATES: "Candidates",
    Status.UNADMITTED: "Unadmitted",
    Status.INVALID: "Invalid",
    Status.STALE_SESSION: "StaleSession",
    Status.STALE_GENERATION: "StaleGeneration",
    Status.TIMEOUT: "Timeout",
    Status.INTERNAL: "Internal",
    Status.UNSUPPORTED: "Unsupported",
}


class QueryFlags(enum.IntFlag):
    """QueryBundle flags (abi.h ``enum okv_query_flags``; spec "Channel ABI
    5"). Allowed sets: 0, WAIT_FOR_FULL_PREFIX, DISCOVER, WARMUP, RECOVERY,
    PREPARE, PREPARE|WAIT_FOR_FULL_PREFIX, PREPARE|RECOVERY; any other set
    is answered Invalid (field desc_flags) by the Manager."""

    NONE = 0
    #: Await pending SSD reads of the chain (Loading until the whole
    #: available prefix is resident) instead of answering the RAM prefix.
    WAIT_FOR_FULL_PREFIX = 1 << 0
    #: Prefetch into RAM without a lease; answered at once (Ok, hit_count =
    #: blocks warming, 0 = skipped) and retired.
    WARMUP = 1 << 1
    #: Metadata only: Candidates with the count of leading blocks held
    #: locally; never a lease; retired at once.
    DISCOVER = 1 << 2
    #: Leased read of exactly hashes [first, first + count): all or Miss.
    RECOVERY = 1 << 3
    #: The result stays at the Manager until claim() or expiry; poll()
    #: reports readiness (Candidates) without consuming it.
    PREPARE = 1 << 4


class Role(enum.IntEnum):
    """Role of a connecting process (abi.h ``enum okv_role``; informational,
    shown in the Manager's log and Health)."""

    UNSPECIFIED = 0
    SCHEDULER = 1
    WORKER = 2
    TOOL = 3
    BENCH = 4


# ---- structs ---------------------------------------------------------------------


class Namespace(ctypes.Structure):
    """abi.h ``struct okv_namespace``: 16-byte cache-identity fingerprint."""

    _fields_ = [("bytes", c_uint8 * HASH_BYTES)]


class BlockHash(ctypes.Structure):
    """abi.h ``struct okv_block_hash``: 16 bytes chosen by the engine."""

    _fields_ = [("bytes", c_uint8 * HASH_BYTES)]


class ConnectOptions(ctypes.Structure):
    """client.h ``struct okv_connect_options``. The ``c_char_p`` fields
    borrow Python bytes: keep them referenced for the call."""

    _fields_ = [
        ("socket_path", c_char_p),
        ("manager_addr", c_char_p),
        ("instance_id", c_char_p),
        ("role", c_uint32),
        ("spin_ns", c_uint32),
        ("timeout_ms", c_uint32),
        ("manager_uid_plus1", c_uint32),
    ]


class Health(ctypes.Structure):
    """client.h ``struct okv_health``: a session's Health frame (the
    Manager's liveness and the session's own figures)."""

    _fields_ = [
        ("status", c_char * 16),
        ("epoch", c_uint64),
        ("service_id", c_uint8 * SERVICE_ID_BYTES),
        ("sessions", c_uint32),
        ("manager_pid", c_uint32),
        ("uptime_ns", c_uint64),
        ("requests", c_uint64),
        ("poll_mode", c_char * 16),
        ("version", c_char * 32),
        ("blocks", c_uint64),
        ("ram_used_bytes", c_uint64),
        ("ram_capacity_bytes", c_uint64),
        ("leases", c_uint64),
        ("pins", c_uint64),
        ("reserved_bytes", c_uint64),
        ("operations", c_uint64),
        ("evictions", c_uint64),
        ("tickets", c_uint64),
        ("lookups", c_uint64),
        ("distinct_lookups", c_uint64),
    ]


class NamespaceSpec(ctypes.Structure):
    """client.h ``struct okv_namespace_spec``: a cache identity. Strings
    borrow Python bytes for the call; NULL means ""."""

    _fields_ = [
        ("model_id", c_char_p),
        ("weights_revision", c_char_p),
        ("dtype", c_char_p),
        ("kv_layout", c_char_p),
        ("block_tokens", c_uint32),
        ("tp_rank", c_uint32),
        ("tp_size", c_uint32),
        ("pp_rank", c_uint32),
        ("pp_size", c_uint32),
        ("cp_rank", c_uint32),
        ("cp_size", c_uint32),
        ("adapter_id", c_char_p),
        ("tenant_salt", c_char_p),
    ]


class Buffer(ctypes.Structure):
    """client.h ``struct okv_buffer``: an engine buffer (sealed memfd,
    layer-major pages). Filled by okv_buffer_alloc, zeroed by
    okv_buffer_free."""

    _fields_ = [
        ("base", c_void_p),
        ("bytes", c_uint64),
        ("fd", c_int),
        ("layers", c_uint32),
        ("page_bytes", c_uint64),
        ("page_count", c_uint64),
    ]


class CudaRegion(ctypes.Structure):
    """client.h ``struct okv_cuda_region`` (136 bytes): an engine KV buffer
    in CUDA memory of this process, registered by handle
    (okv_register_cuda_buffer), never by a pickled tensor."""

    _fields_ = [
        ("handle_kind", c_uint32),
        ("layers", c_uint32),
        ("device_uuid", ctypes.c_uint8 * 16),
        ("ipc_handle", ctypes.c_uint8 * 64),
        ("vmm_fd", ctypes.c_int32),
        ("reserved", c_uint32),
        ("alloc_bytes", c_uint64),
        ("offset", c_uint64),
        ("bytes", c_uint64),
        ("page_bytes", c_uint64),
        ("page_count", c_uint64),
    ]


class Lease(ctypes.Structure):
    """client.h ``struct okv_lease``: answer of the untracked okv_query."""

    _fields_ = [
        ("lease_id", c_uint64),
        ("hit_count", c_uint32),
        ("reserved", c_uint32),
        ("lease_bytes", c_uint64),
        ("block_bytes", c_uint64),
    ]


class PublishResult(ctypes.Structure):
    """client.h ``struct okv_publish_result``."""

    _fields_ = [("stored", c_uint32), ("present", c_uint32)]


class BlockInfo(ctypes.Structure):
    """client.h ``struct okv_block_info``: what a router matches a block on
    (``tokens`` points at ``token_count`` uint32 token ids)."""

    _fields_ = [
        ("engine_hash", c_uint64),
        ("parent_hash", c_uint64),
        ("has_parent", c_uint32),
        ("token_count", c_uint32),
        ("tokens", c_void_p),
    ]


class RestoreEntry(ctypes.Structure):
    """abi.h ``struct okv_restore_entry``: (lease block, destination page)."""

    _fields_ = [("block", c_uint32), ("page", c_uint32)]


class QuerySpec(ctypes.Structure):
    """client.h ``struct okv_query_spec``. ``hashes`` is a borrowed
    ``okv_block_hashes *`` (the ticket takes its own reference)."""

    _fields_ = [
        ("ns", Namespace),
        ("hashes", c_void_p),
        ("prefix_len", c_uint32),
        ("flags", c_uint32),
        ("request_id", c_uint64),
        ("group", c_uint64),
        ("recovery_first", c_uint32),
        ("recovery_count", c_uint32),
    ]


class QueryAnswerC(ctypes.Structure):
    """client.h ``struct okv_query_answer`` (Python callers get the frozen
    ``orbitkv.QueryAnswer`` made from it)."""

    _fields_ = [
        ("status", c_uint16),
        ("reserved0", c_uint16),
        ("hit_count", c_uint32),
        ("ram_hits", c_uint32),
        ("first", c_uint32),
        ("lease_id", c_uint64),
        ("lease_bytes", c_uint64),
        ("block_bytes", c_uint64),
        ("op_id", c_uint64),
        ("revision", c_uint32),
        ("reserved1", c_uint32),
    ]


#: Every mirrored Structure and the C struct it mirrors (checked by test_abi).
C_STRUCTS = {
    Namespace: "okv_namespace",
    BlockHash: "okv_block_hash",
    ConnectOptions: "okv_connect_options",
    Health: "okv_health",
    NamespaceSpec: "okv_namespace_spec",
    Buffer: "okv_buffer",
    CudaRegion: "okv_cuda_region",
    Lease: "okv_lease",
    PublishResult: "okv_publish_result",
    BlockInfo: "okv_block_info",
    RestoreEntry: "okv_restore_entry",
    QuerySpec: "okv_query_spec",
    QueryAnswerC: "okv_query_answer",
}
