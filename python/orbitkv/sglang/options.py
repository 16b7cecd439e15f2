"""The ``orbitkv.*`` options of ``OrbitKVStorage`` (SGLang's
``--hicache-storage-backend-extra-config``) and the page-key hash.

Keys without the ``orbitkv.`` prefix belong to SGLang (``backend_name``,
``interface_v1``, ...) and are ignored here; an unknown ``orbitkv.*`` key is
an error naming it and the known ones.
"""

from __future__ import annotations

from typing import Any

from ..identity import block_hash16
from ..vllm.options import OptionError, _bool, _number, _str

__all__ = ["OPTIONS", "options", "key_hash"]

#: The option names, each as ``orbitkv.<name>`` in the extra config.
OPTIONS = ("bootstrap_socket", "tp_shard_bootstrap_sockets", "wait_for_full_prefix", "model_revision",
           "dtype", "salt", "timeout_ms", "load_timeout_s", "reconnect_interval_s", "staging_pages",
           "local_discovery", "manager_uid")


def key_hash(key: str) -> bytes:
    """The 16-byte OrbitKV hash of an SGLang page key."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"OrbitKVStorage: page key {key!r}: want a non-empty str")
    return block_hash16(("sglang", key))


def options(extra: dict | None, tp_size: int) -> dict[str, Any]:
    """The options of ``extra`` (SGLang's extra config) over their
    defaults, for ``tp_size`` ranks. Raises ``OptionError`` naming the key
    and the limit for an unknown ``orbitkv.*`` key or a bad value."""
    o: dict[str, Any] = {"bootstrap_socket": None,   # None: the default rule, at each connect
                         "tp_shard_bootstrap_sockets": (), "wait_for_full_prefix": False,
                         "model_revision": "", "dtype": "", "salt": "", "timeout_ms": 5000,
                         "load_timeout_s": 30.0, "reconnect_interval_s": 1.0, "staging_pages": 128,
                         "local_discovery": True, "manager_uid": None}
    for key, v in (extra or {}).items():
        if not isinstance(key, str) or not key.startswith("orbitkv."):
            continue
        name = key[len("orbitkv."):]
        if name not in OPTIONS:
            raise OptionError(f"{key}: unknown OrbitKV option (known: "
                              + ", ".join("orbitkv." + n for n in OPTIONS) + ")")
        if name == "tp_shard_bootstrap_sockets":
            items = [s.strip() for s in v.split(",")] if isinstance(v, str) else v
            if not isinstance(items, (list, tuple)) or len(items) != tp_size or \
                    not all(isinstance(s, str) and s for s in items):
                raise OptionError(f"{key}: want {tp_size} socket paths (one per TP rank), got {v!r}")
            o[name] = tuple(items)
        elif name in ("wait_for_full_prefix", "local_discovery"):
            o[name] = _bool(key, v)
        elif name in ("timeout_ms", "staging_pages"):
            o[name] = _number(key, v, int, 1, 3_600_000 if name == "timeout_ms" else 1 << 20)
        elif name == "manager_uid":
            o[name] = _number(key, v, int, 0, 0xFFFFFFFE)
        elif name in ("load_timeout_s", "reconnect_interval_s"):
            o[name] = _number(key, v, float, 0 if name == "reconnect_interval_s" else 0.001, 3600)
        else:
            o[name] = _str(key, v)
    return o
