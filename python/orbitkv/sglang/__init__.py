"""OrbitKV for SGLang: ``OrbitKVStorage``, a HiCache storage backend.

SGLang is imported lazily and only if present (``SGLANG_AVAILABLE``); when
it is, ``OrbitKVStorage`` subclasses its real ``HiCacheStorage`` and
refuses a release not in ``SUPPORTED_SGLANG``. See ``storage`` for the
configuration and docs/adapters.md for the whole.
"""

from .storage import SGLANG_AVAILABLE, HiCacheStorage, OrbitKVStorage, PoolTransferResult, key_hash
from .version import SUPPORTED_SGLANG, UnsupportedSGLang

__all__ = ["OrbitKVStorage", "HiCacheStorage", "PoolTransferResult", "SGLANG_AVAILABLE", "SUPPORTED_SGLANG",
           "UnsupportedSGLang", "key_hash"]
