"""OrbitKV for SGLang: ``OrbitKVStorage``, a HiCache storage backend.

SGLang is imported lazily and only if present (``SGLANG_AVAILABLE``); see
``storage`` for the configuration and docs/adapters.md for the whole.
"""

from .storage import SGLANG_AVAILABLE, HiCacheStorage, OrbitKVStorage, key_hash

__all__ = ["OrbitKVStorage", "HiCacheStorage", "SGLANG_AVAILABLE", "key_hash"]
