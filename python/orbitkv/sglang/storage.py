"""``OrbitKVStorage``: SGLang's HiCache storage backend (``HiCacheStorage``) on OrbitKV.

SGLang (``--enable-hierarchical-cache``) keeps a host KV pool (L2) below the
GPU (L1) and a storage backend (L3) below that. HiCache calls:

* ``batch_exists(keys)`` - how many leading pages storage holds (prefetch
  decides from it);
* ``batch_get_v1(keys, host_indices)`` - read those pages into host pool
  slots; a list of per-page success;
* ``batch_set_v1(keys, host_indices)`` - write host pool pages (write-back /
  write-through); a list of per-page success.

``keys`` are SGLang's page hashes (hex strings, each chained over the
page's tokens and the previous key); ``host_indices`` holds the pool's
token slots, ``page_size`` per page, page k's first slot at
``host_indices[k * page_size]``. A key becomes an OrbitKV block hash with
``block_hash16(("sglang", key))``.

Configure with ``--hicache-storage-backend dynamic`` and
``--hicache-storage-backend-extra-config '{"backend_name": "orbitkv",
"module_path": "orbitkv.sglang", "class_name": "OrbitKVStorage",
"interface_v1": 1, "orbitkv.bootstrap_socket": "/run/orbitkv.sock"}'``
(``interface_v1``: SGLang calls ``batch_get_v1``/``batch_set_v1`` of a
dynamic backend only when it is set; without it SGLang uses the older
calls, which this backend answers as failures): SGLang's factory
calls ``OrbitKVStorage(storage_config, kwargs)``, then
``register_mem_pool_host(pool)``. Options (``extra_config``, prefix
``orbitkv.``): ``bootstrap_socket``, ``tp_shard_bootstrap_sockets``,
``wait_for_full_prefix``, ``model_revision``, ``dtype``, ``salt``,
``timeout_ms``, ``load_timeout_s``, ``reconnect_interval_s``,
``staging_pages``.

Pool memory: a host pool with an ``orbitkv_buffer`` attribute (an
``EngineBuffer``, layer-major, one page per SGLang page per layer, as the
test engine's) is restored into and published from in place; any other
pool (SGLang's own ``MHATokenToKVPoolHost``) goes through a staging
``EngineBuffer`` page by page with the pool's ``get_data_page(index,
flat=True)`` / ``set_from_flat_data_page(index, data)``.

Errors never raise into HiCache's threads: a failure is a False in the
per-page list (a miss, or a page not backed up), logged; the Manager going
away is survived by reconnecting (``orbitkv.vllm.session``).

Threads: HiCache calls ``batch_exists``/``batch_get_v1`` from its prefetch
thread and ``batch_set_v1`` from its backup thread at the same time. Every
call holds the backend's lock for its whole duration, so the staging pages,
the session (reconnects) and the counters are used by one call at a time.

The older calls (``get``, ``set``, ``batch_get``, ``batch_set``) are not
served: they return failure values (None / False per key) and log once that
``interface_v1`` is missing from the extra config; they never raise.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Callable, List, Optional

from .._abi import QueryFlags, Role
from ..buffer import EngineBuffer
from ..client import socket_path_for
from ..errors import OrbitKVError, TimedOut
from ..hashes import BlockHashes
from ..identity import CacheIdentity, block_hash16
from ..revision import resolve_revision
from ..vllm.options import DEFAULT_MANAGER_ADDR, OptionError, _bool, _number, _str
from ..vllm.session import Session

__all__ = ["OrbitKVStorage", "HiCacheStorage", "SGLANG_AVAILABLE", "key_hash"]

log = logging.getLogger("orbitkv.sglang")

try:  # pragma: no cover - SGLang is not installed where the tests run
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage  # type: ignore

    SGLANG_AVAILABLE = True
except Exception:
    SGLANG_AVAILABLE = False

    class HiCacheStorage:  # type: ignore[no-redef]
        """Stand-in for SGLang's ``HiCacheStorage`` (same method names)."""

        def register_mem_pool_host(self, mem_pool_host: Any) -> None:
            self.mem_pool_host = mem_pool_host

        def batch_exists(self, keys: List[str], extra_info: Any = None) -> int:
            for i, k in enumerate(keys):
                if not self.exists(k):
                    return i
            return len(keys)

        def clear(self) -> None:
            pass

        def get_stats(self):
            return None

_OPTIONS = ("bootstrap_socket", "tp_shard_bootstrap_sockets", "wait_for_full_prefix", "model_revision",
            "dtype", "salt", "timeout_ms", "load_timeout_s", "reconnect_interval_s", "staging_pages")


def key_hash(key: str) -> bytes:
    """The 16-byte OrbitKV hash of an SGLang page key."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"OrbitKVStorage: page key {key!r}: want a non-empty str")
    return block_hash16(("sglang", key))


def _options(extra: dict | None, tp_size: int) -> dict[str, Any]:
    o: dict[str, Any] = {"bootstrap_socket": socket_path_for(DEFAULT_MANAGER_ADDR),
                         "tp_shard_bootstrap_sockets": (), "wait_for_full_prefix": False,
                         "model_revision": "", "dtype": "", "salt": "", "timeout_ms": 5000,
                         "load_timeout_s": 30.0, "reconnect_interval_s": 1.0, "staging_pages": 128}
    for key, v in (extra or {}).items():
        if not isinstance(key, str) or not key.startswith("orbitkv."):
            continue
        name = key[len("orbitkv."):]
        if name not in _OPTIONS:
            raise OptionError(f"{key}: unknown OrbitKV option (known: "
                              + ", ".join("orbitkv." + n for n in _OPTIONS) + ")")
        if name == "tp_shard_bootstrap_sockets":
            items = [s.strip() for s in v.split(",")] if isinstance(v, str) else v
            if not isinstance(items, (list, tuple)) or len(items) != tp_size or \
                    not all(isinstance(s, str) and s for s in items):
                raise OptionError(f"{key}: want {tp_size} socket paths (one per TP rank), got {v!r}")
            o[name] = tuple(items)
        elif name == "wait_for_full_prefix":
            o[name] = _bool(key, v)
        elif name in ("timeout_ms", "staging_pages"):
            o[name] = _number(key, v, int, 1, 3_600_000 if name == "timeout_ms" else 1 << 20)
        elif name in ("load_timeout_s", "reconnect_interval_s"):
            o[name] = _number(key, v, float, 0 if name == "reconnect_interval_s" else 0.001, 3600)
        else:
            o[name] = _str(key, v)
    return o


class OrbitKVStorage(HiCacheStorage):
    """HiCache L3 backend on the node's OrbitKV Manager.

    ``OrbitKVStorage(storage_config, kwargs=None)``: ``storage_config`` is
    SGLang's ``HiCacheStorageConfig`` (tp/pp/cp ranks and sizes,
    ``model_name``, ``is_mla_model``, ``extra_config``). Connects at once:
    raises ``OptionError`` for a bad option and the ``OrbitKVError`` of the
    failed connect naming the option and path. The namespace is fixed by
    ``register_mem_pool_host`` (it needs the pool's dtype and page size);
    calls before it raise ``RuntimeError``.

    ``stats``: counts and bytes (``restored_bytes`` among them).
    """

    def __init__(self, storage_config: Any, kwargs: Any = None):
        self._lock = threading.RLock()
        self._legacy_warned = False
        self.config = storage_config
        tp_size = int(getattr(storage_config, "tp_size", 1) or 1)
        self.opts = _options(getattr(storage_config, "extra_config", None), tp_size)
        self.tp_rank = int(getattr(storage_config, "tp_rank", 0) or 0)
        if self.opts["tp_shard_bootstrap_sockets"]:
            path = self.opts["tp_shard_bootstrap_sockets"][self.tp_rank]
            option = f"orbitkv.tp_shard_bootstrap_sockets[{self.tp_rank}]"
        else:
            path, option = self.opts["bootstrap_socket"], "orbitkv.bootstrap_socket"
        self.session = Session(path, option, who=f"OrbitKVStorage(tp{self.tp_rank})",
                               instance_id=f"sglang-tp{self.tp_rank}-{os.getpid()}", role=Role.WORKER,
                               timeout_ms=self.opts["timeout_ms"],
                               reconnect_interval_s=self.opts["reconnect_interval_s"])
        self.mem_pool_host = None
        self.buf: EngineBuffer | None = None
        self.ns: bytes | None = None
        self.page_size = 0
        self.zero_copy = False
        self._staging = None
        self.stats = {"exists_calls": 0, "hit_pages": 0, "restored_pages": 0, "restored_bytes": 0,
                      "get_failed_pages": 0, "published_pages": 0, "present_pages": 0, "set_failed_pages": 0}

    # ---- setup ----

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        """Take the host pool: register its ``orbitkv_buffer`` (zero copy) or
        a staging buffer, and fix the namespace."""
        self.mem_pool_host = mem_pool_host
        self.page_size = int(mem_pool_host.page_size)
        dtype = self.opts["dtype"] or str(getattr(mem_pool_host, "dtype", "")).replace("torch.", "")
        layout = str(getattr(mem_pool_host, "layout", "layer_first"))
        buf = getattr(mem_pool_host, "orbitkv_buffer", None)
        if isinstance(buf, EngineBuffer):
            self.buf, self.zero_copy = buf, True
            kv_layout = f"sglang-{layout}-orbitkv-pages"
        else:
            import torch
            flat = mem_pool_host.get_data_page(0, flat=True)
            page_bytes = flat.numel() * flat.element_size()
            self.buf = EngineBuffer(1, page_bytes, self.opts["staging_pages"])
            self._staging = torch.frombuffer(self.buf.memoryview(), dtype=torch.uint8).view(
                self.opts["staging_pages"], page_bytes)
            self._dtype = flat.dtype
            kv_layout = f"sglang-{layout}-flat"
        mla = bool(getattr(self.config, "is_mla_model", False))
        c = self.config
        model = str(getattr(c, "model_name", "") or "")
        revision = resolve_revision(self.opts["model_revision"], str(getattr(c, "model_path", "") or model),
                                    "OrbitKVStorage (orbitkv.model_revision)")
        self.ns = CacheIdentity(
            model, revision, dtype, kv_layout, self.page_size,
            0 if mla else self.tp_rank, 1 if mla else int(getattr(c, "tp_size", 1) or 1),
            int(getattr(c, "pp_rank", 0) or 0), int(getattr(c, "pp_size", 1) or 1),
            int(getattr(c, "attn_cp_rank", 0) or 0), int(getattr(c, "attn_cp_size", 1) or 1),
            salt=self.opts["salt"]).namespace()
        self.session.register(self.buf)

    def _ready(self, op: str) -> None:
        if self.ns is None:
            raise RuntimeError(f"OrbitKVStorage.{op}: register_mem_pool_host first")

    def _pages(self, host_indices: Any, n: int) -> list[int]:
        idx = [int(i) for i in host_indices[: n * self.page_size: self.page_size]]
        if len(idx) != n:
            raise ValueError(f"OrbitKVStorage: {len(host_indices)} host indices for {n} pages of "
                             f"{self.page_size}; want {n * self.page_size}")
        return idx

    # ---- HiCache calls ----

    def batch_exists(self, keys: List[str], extra_info: Any = None) -> int:
        """Leading pages of ``keys`` OrbitKV holds (RAM, or RAM and SSD with
        ``wait_for_full_prefix``); 0 on any error."""
        self._ready("batch_exists")
        with self._lock:
            return self._batch_exists(keys)

    def _batch_exists(self, keys: List[str]) -> int:
        if not keys:
            return 0
        self.stats["exists_calls"] += 1
        client = self.session.get()
        if client is None:
            return 0
        batch = BlockHashes([key_hash(k) for k in keys])
        try:
            a = client.lookup(self.ns, batch, flags=QueryFlags.DISCOVER)
        except OrbitKVError as e:
            log.warning("OrbitKVStorage.batch_exists: %s; a miss", e)
            self.session.fail(e)
            return 0
        finally:
            batch.close()
        n = (a.hit_count if self.opts["wait_for_full_prefix"] else a.ram_hits) if a.status == "Candidates" else 0
        self.stats["hit_pages"] += n
        return n

    def exists(self, key: str) -> bool:
        """Whether OrbitKV holds ``key`` (False on any error, never raises)."""
        try:
            return self.batch_exists([key]) == 1
        except Exception as e:
            log.warning("OrbitKVStorage.exists: %s; a miss", e)
            return False

    def batch_get_v1(self, keys: List[str], host_indices: Any, extra_info: Any = None) -> List[bool]:
        """Restore the pages of ``keys`` into the host pool slots
        ``host_indices``; returns per-page success (a leading run of True:
        the lease covers a prefix). Returns only after every restore reached
        its terminal result; the pool's pages are untouched by the Manager
        afterwards."""
        return self._batch("batch_get_v1", self._batch_get_v1, keys, host_indices)

    def _batch(self, op: str, run: Callable[[List[str], list], List[bool]], keys: List[str],
               host_indices: Any) -> List[bool]:
        """The shared frame of batch_get_v1 and batch_set_v1: refuse before
        ``register_mem_pool_host`` (``_ready``), then, under this backend's
        lock, ``[]`` for no key, else ``run(keys, slots)`` with the pool
        slots of ``host_indices`` (one per key, ``_pages``)."""
        self._ready(op)
        with self._lock:
            if not keys:
                return []
            return run(keys, self._pages(host_indices, len(keys)))

    def _batch_get_v1(self, keys: List[str], slots: list) -> List[bool]:
        n = len(keys)
        ok = 0
        done = 0
        while done < n:
            k = n - done if self.zero_copy else min(n - done, len(self._staging))
            got = self._get(keys, done, k, slots[done:done + k])
            ok += got
            done += k
            if got < k:
                break
        self.stats["get_failed_pages"] += n - ok
        return [True] * ok + [False] * (n - ok)

    def _get(self, keys: List[str], first: int, k: int, slots: list[int]) -> int:
        """Restore keys[first:first+k] (the lease covers keys[:first+k]);
        returns pages restored."""
        client = self.session.get()
        if client is None:
            return 0
        batch = BlockHashes([key_hash(x) for x in keys[:first + k]])
        lease = 0
        try:
            flags = QueryFlags.WAIT_FOR_FULL_PREFIX if self.opts["wait_for_full_prefix"] else 0
            a = client.lookup(self.ns, batch, flags=flags, timeout_s=self.opts["load_timeout_s"])
            lease = a.lease_id if a.status == "Ok" else 0
            got = max(0, min(a.hit_count, first + k) - first) if lease else 0
            if got == 0:
                return 0
            pages = [s // self.page_size for s in slots[:got]] if self.zero_copy else list(range(got))
            bid = self.session.buffer_id(self.buf)
            step = client.max_restore_entries
            entries = [(first + i, pages[i]) for i in range(got)]
            ops = [client.start_restore(lease, bid, entries[i:i + step]) for i in range(0, got, step)]
            for op in ops:
                client.wait_restore(op, self.opts["load_timeout_s"])
            if not self.zero_copy:
                for i in range(got):
                    self.mem_pool_host.set_from_flat_data_page(slots[i], self._staging[i].view(self._dtype))
            self.stats["restored_pages"] += got
            self.stats["restored_bytes"] += got * self.buf.layers * self.buf.page_bytes
            return got
        except OrbitKVError as e:
            log.warning("OrbitKVStorage.batch_get_v1: %s; pages treated as misses", e)
            if isinstance(e, TimedOut) and lease:
                self.session.close()  # the pages stay the Manager's until its copies drain
            self.session.fail(e)
            return 0
        finally:
            batch.close()
            if lease and self.session.client is not None:
                try:
                    self.session.client.release(lease)
                except OrbitKVError as e:
                    self.session.fail(e)

    def batch_set_v1(self, keys: List[str], host_indices: Any, extra_info: Any = None) -> List[bool]:
        """Publish the host pool pages at ``host_indices`` under ``keys``;
        per-page success (a page already held counts as success). Returns
        after the Manager's copy completed and the pages are visible. A page
        whose publish failed (or may have failed) is False."""
        return self._batch("batch_set_v1", self._batch_set_v1, keys, host_indices)

    def _batch_set_v1(self, keys: List[str], slots: list) -> List[bool]:
        n = len(keys)
        result = [False] * n
        client = self.session.get()
        if client is None:
            self.stats["set_failed_pages"] += n
            return result
        bid = self.session.buffer_id(self.buf)
        step = n if self.zero_copy else len(self._staging)
        for s in range(0, n, step):
            chunk = range(s, min(n, s + step))
            if self.zero_copy:
                pages = [slots[i] // self.page_size for i in chunk]
            else:
                pages = list(range(len(chunk)))
                for j, i in enumerate(chunk):
                    data = self.mem_pool_host.get_data_page(slots[i], flat=True)
                    self._staging[j].copy_(data.reshape(-1).view(self._staging.dtype))
            try:
                stored, present = client.publish(self.ns, bid, [key_hash(keys[i]) for i in chunk], pages)
            except OrbitKVError as e:
                log.warning("OrbitKVStorage.batch_set_v1: %s", e)
                self.session.fail(e)
                break
            self.stats["published_pages"] += stored
            self.stats["present_pages"] += present
            for i in chunk:
                result[i] = True
        self.stats["set_failed_pages"] += result.count(False)
        return result

    # ---- the older interface (abstract in HiCacheStorage): not served ----

    def _legacy(self, op: str) -> None:
        if not self._legacy_warned:
            self._legacy_warned = True
            log.warning("OrbitKVStorage.%s: not served (OrbitKV copies into registered memory only); "
                        "add \"interface_v1\": 1 to --hicache-storage-backend-extra-config so SGLang "
                        "calls batch_get_v1/batch_set_v1. Every get is a miss and every set fails until then.", op)

    def get(self, key: str, target_location: Optional[Any] = None, target_sizes: Optional[Any] = None) -> Any:
        """Not served: None (a miss), logged once naming ``interface_v1``."""
        self._legacy("get")
        return None

    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> Any:
        """Not served: None per key (misses), logged once."""
        self._legacy("batch_get")
        return [None] * len(keys or ())

    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        """Not served: False (not stored), logged once."""
        self._legacy("set")
        return False

    def batch_set(self, keys: List[str], values: Optional[Any] = None, target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        """Not served: False (not stored), logged once."""
        self._legacy("batch_set")
        return False

    def close(self) -> None:
        """Close the Manager session."""
        with self._lock:
            self.session.close()
