"""Cache identity (namespace) and engine block-hash conversion.

A block key at the Manager is (namespace, 16-byte block hash) (docs/design.md
§5.4). This module makes both halves from what an engine has:

* ``CacheIdentity(...).namespace()`` -> the 16-byte namespace, computed by
  liborbitkv's ``okv_namespace_fingerprint`` so Python, C and Go agree byte
  for byte (never Python's ``hash()``, which is salted per process);
* ``block_hash16(engine_hash)`` -> 16 bytes from an engine's own block
  hash (an ``int`` of any size, ``bytes``, or a tuple of them such as
  vLLM's ``BlockHash``), deterministic across processes and versions.

Both are pure functions: thread-safe, no Manager needed.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import struct

from . import _abi
from ._native import lib
from .errors import BadArgument, error_from_code

__all__ = ["CacheIdentity", "block_hash16", "BLOCK_HASH_DOMAIN"]

# CacheIdentity's string fields -> their fields in struct okv_namespace_spec
# (abi.h), in the order the spec lists them.
_SPEC_STRING_FIELDS = {
    "model_id": "model_id",
    "revision": "weights_revision",
    "dtype": "dtype",
    "kv_layout": "kv_layout",
    "lora_id": "adapter_id",
    "salt": "tenant_salt",
}


@dataclasses.dataclass(frozen=True)
class CacheIdentity:
    """The cache identity of an engine's KV blocks (docs/design.md §5.4).

    Two engines share cached blocks only when every field is equal; two
    different identities never share a block (the Manager's index is keyed
    by the namespace).

    Fields and the ``struct okv_namespace_spec`` field (client.h) each is
    sent as:

    =================  ==================  ==================================
    Python field       C field             meaning
    =================  ==================  ==================================
    ``model_id``       ``model_id``        e.g. "meta-llama/Llama-3.1-8B"
    ``revision``       ``weights_revision`` commit or checksum of the weights
    ``dtype``          ``dtype``           KV dtype: "bfloat16", "fp8_e4m3"
    ``kv_layout``      ``kv_layout``       engine layout name, "vllm-nhd"
    ``block_tokens``   ``block_tokens``    tokens per block, >= 1
    ``tp_rank``        ``tp_rank``         tensor-parallel rank < tp_size
    ``tp_size``        ``tp_size``         >= 1
    ``pp_rank``        ``pp_rank``         pipeline-parallel rank < pp_size
    ``pp_size``        ``pp_size``         >= 1
    ``cp_rank``        ``cp_rank``         context-parallel rank < cp_size
    ``cp_size``        ``cp_size``         >= 1
    ``lora_id``        ``adapter_id``      LoRA/adapter id, "" = none
    ``salt``           ``tenant_salt``     isolates tenants sharing a model
    =================  ==================  ==================================

    Strings are encoded as UTF-8, at most 1024 bytes each, and may not
    contain NUL (C strings would cut them short, and two identities could
    then collide). Integers are uint32. ``namespace()`` raises
    ``BadArgument`` (a ``ValueError``) naming the field that breaks a rule.
    """

    model_id: str
    revision: str
    dtype: str
    kv_layout: str
    block_tokens: int
    tp_rank: int
    tp_size: int
    pp_rank: int
    pp_size: int
    cp_rank: int = 0
    cp_size: int = 1
    lora_id: str = ""
    salt: str = ""

    def namespace(self) -> bytes:
        """The 16-byte namespace: the first 16 bytes of SHA-256 over the tag
        "orbitkv.namespace.v1" and every field, length-prefixed, in the
        order of the table above (client.h okv_namespace_fingerprint).
        Raises ``BadArgument`` naming the offending field."""
        strings = {}
        for name in _SPEC_STRING_FIELDS:
            strings[name] = _identity_string(name, getattr(self, name))
        ints = {}
        for name in ("block_tokens", "tp_rank", "tp_size", "pp_rank", "pp_size", "cp_rank", "cp_size"):
            ints[name] = _identity_u32(name, getattr(self, name))
        if ints["block_tokens"] < 1:
            raise BadArgument("CacheIdentity", -22, f"field block_tokens {ints['block_tokens']}: want >= 1")
        for axis in ("tp", "pp", "cp"):
            rank, size = ints[f"{axis}_rank"], ints[f"{axis}_size"]
            if size < 1:
                raise BadArgument("CacheIdentity", -22, f"field {axis}_size {size}: want >= 1")
            if rank >= size:
                raise BadArgument("CacheIdentity", -22,
                                  f"field {axis}_rank {rank}: want < {axis}_size {size}")
        # The integer fields are named as in struct okv_namespace_spec.
        spec = _abi.NamespaceSpec(**{_SPEC_STRING_FIELDS[k]: v for k, v in strings.items()}, **ints)
        out = _abi.Namespace()
        rc = lib.okv_namespace_fingerprint(ctypes.byref(spec), ctypes.byref(out))
        if rc != 0:
            raise error_from_code("CacheIdentity.namespace", rc, "okv_namespace_fingerprint refused the spec")
        return bytes(out.bytes)


def _identity_string(name: str, value: object) -> bytes:
    if not isinstance(value, str):
        raise BadArgument("CacheIdentity", -22, f"field {name}: want str, got {type(value).__name__}")
    raw = value.encode("utf-8")
    if b"\0" in raw:
        raise BadArgument("CacheIdentity", -22, f"field {name}: contains a NUL character")
    if len(raw) > _abi.NS_MAX_STRING:
        raise BadArgument("CacheIdentity", -22,
                          f"field {name}: {len(raw)} bytes of UTF-8, limit {_abi.NS_MAX_STRING}")
    return raw


def _identity_u32(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadArgument("CacheIdentity", -22, f"field {name}: want int, got {type(value).__name__}")
    if not 0 <= value <= _abi.U32_MAX:
        raise BadArgument("CacheIdentity", -22, f"field {name} {value}: want 0..{_abi.U32_MAX}")
    return value


#: Domain tag that starts every block_hash16 input (NUL-terminated, so no
#: encoding can be mistaken for another tag's).
BLOCK_HASH_DOMAIN = b"orbitkv-block-hash-v1\0"

_U32 = struct.Struct("<I")


def block_hash16(engine_hash: int | bytes | bytearray | memoryview | tuple) -> bytes:
    """The 16-byte OrbitKV block hash of an engine's own block hash.

    ``engine_hash`` is what the engine already keys its prefix cache by:

    * ``int`` of any size and sign (SGLang, older vLLM hash values);
    * ``bytes`` / ``bytearray`` / ``memoryview`` (vLLM's SHA-256 digests;
      a 16-byte value is hashed too, so it cannot collide with another
      engine's encoding of a different type);
    * ``tuple`` (including NamedTuples such as vLLM's ``BlockHash``) whose
      items are any of these, or, inside a tuple only, ``str`` (UTF-8) and
      ``None`` (vLLM's ``extra_keys`` may hold both).

    Result: the first 16 bytes of SHA-256 over ``BLOCK_HASH_DOMAIN``
    followed by a canonical encoding: each value is a 1-byte type tag, then
    a 4-byte little-endian length, then its bytes::

        int    b"i" len  two's complement, little-endian, (n.bit_length() + 8) // 8 bytes
        bytes  b"b" len  the bytes
        str    b"s" len  UTF-8
        None   b"n" 0
        tuple  b"t" count, then each item's encoding

    The same value gives the same 16 bytes in every process and on every
    run (never Python's ``hash()``). ``bool`` and every other type (float,
    list, dict, ...) raise ``TypeError`` naming the type.
    """
    out = bytearray(BLOCK_HASH_DOMAIN)
    _encode(out, engine_hash, top=True)
    return hashlib.sha256(out).digest()[:16]


def _encode(out: bytearray, value: object, top: bool, depth: int = 0) -> None:
    if isinstance(value, bool):
        raise TypeError("block_hash16: bool is not a block hash (want int, bytes or a tuple of them)")
    if isinstance(value, int):
        raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
        out += b"i" + _U32.pack(len(raw)) + raw
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        out += b"b" + _U32.pack(len(raw)) + raw
    elif isinstance(value, tuple):
        if depth >= 32:
            raise TypeError("block_hash16: tuples nested deeper than 32 levels")
        out += b"t" + _U32.pack(len(value))
        for item in value:
            _encode(out, item, top=False, depth=depth + 1)
    elif not top and isinstance(value, str):
        raw = value.encode("utf-8")
        out += b"s" + _U32.pack(len(raw)) + raw
    elif not top and value is None:
        out += b"n" + _U32.pack(0)
    else:
        where = "block hash" if top else "item of a block-hash tuple"
        allowed = "int, bytes or a tuple of them" if top else "int, bytes, str, None or a tuple"
        raise TypeError(f"block_hash16: {type(value).__name__} is not a valid {where} (want {allowed})")
