"""``OrbitKVStorage``: SGLang's HiCache storage backend (``HiCacheStorage``) on OrbitKV.

SGLang (``--enable-hierarchical-cache``) keeps a host KV pool (L2) below the
GPU (L1) and a storage backend (L3) below that. SGLang's
``HiCacheController`` calls:

* ``batch_exists(keys, extra_info)`` - how many leading pages storage holds
  (its prefetch thread decides from it);
* ``batch_get_v1(keys, host_indices, extra_info)`` - read those pages into
  host pool slots; a list of per-page success;
* ``batch_set_v1(keys, host_indices, extra_info)`` - write host pool pages
  (its backup thread, write-back / write-through); a list of per-page
  success.

The hybrid controller (models with Mamba, SWA or indexer pools) registers
those sidecar pools by name (``register_mem_host_pool_v2``, then
``on_host_pools_registered``) and calls the v2 API for them:
``batch_exists_v2(keys, pool_transfers, extra_info)`` (a
``PoolTransferResult``: the KV prefix, each pool's hit, the restorable
prefix lengths, per ``PoolHitPolicy``), ``batch_get_v2(transfers)`` and
``batch_set_v2(transfers)`` (per pool name, per-page success). KV pages
still go through v1. Each pool has its own namespace and buffer (``pool``).

``keys`` are SGLang's page hashes (hex strings, each chained over the
page's tokens and the previous key); ``host_indices`` holds the pool's
token slots, ``page_size`` per page, page k's first slot at
``host_indices[k * page_size]``. A key becomes an OrbitKV block hash with
``block_hash16(("sglang", key))``.

Configure with ``--hicache-storage-backend dynamic`` and
``--hicache-storage-backend-extra-config '{"backend_name": "orbitkv",
"module_path": "orbitkv.sglang", "class_name": "OrbitKVStorage",
"interface_v1": 1, "orbitkv.bootstrap_socket": "/run/orbitkv/manager.sock"}'``
(``interface_v1``: SGLang calls ``batch_get_v1``/``batch_set_v1`` of a
dynamic backend only when it is set; without it SGLang uses the older
calls, which this backend answers as failures): SGLang's factory
calls ``OrbitKVStorage(storage_config, kwargs)``, then
``register_mem_pool_host(pool)``. Options (``extra_config``, prefix
``orbitkv.``): ``bootstrap_socket`` (default: the rule of
``orbitkv.resolve_socket_path``, at each connect), ``tp_shard_bootstrap_sockets``,
``wait_for_full_prefix``, ``model_revision``, ``dtype``, ``salt``,
``timeout_ms``, ``load_timeout_s``, ``reconnect_interval_s``,
``staging_pages``, ``local_discovery``, ``manager_uid`` (the uid of a
Manager serving tenants of other uids, trusted besides this process's own).

Versions: when SGLang imports, ``OrbitKVStorage`` subclasses its real
``HiCacheStorage`` and refuses at construction any SGLang not in
``version.SUPPORTED_SGLANG`` (``UnsupportedSGLang``). Without SGLang
(the stdlib tests, the test engine) it subclasses a stand-in with the same
method names.

Pool memory (``pool.PoolMemory``): a host pool with an ``orbitkv_buffer``
attribute (an ``EngineBuffer``, layer-major, one page per SGLang page per
layer, as the test engine's) is restored into and published from in
place; any other pool (SGLang's own ``MHATokenToKVPoolHost`` and
``MambaPoolHost``) goes through a staging ``EngineBuffer`` page by page with
the pool's ``get_data_page(index, flat=True)`` /
``set_from_flat_data_page(index, data)``.

Errors never raise into HiCache's threads: a failure is a False in the
per-page list (a miss, or a page not backed up), logged; the Manager going
away is survived by reconnecting (``orbitkv.vllm.session``). Calls before
``register_mem_pool_host`` and v1 calls whose ``host_indices`` do not match
the keys raise (SGLang never makes them; a caller bug must not look like a
miss).

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
from dataclasses import dataclass, field
from typing import Any, List, Optional

from .._abi import QueryFlags, Role
from ..errors import OrbitKVError, TimedOut
from ..hashes import BlockHashes
from ..identity import CacheIdentity
from ..revision import resolve_revision
from ..vllm.session import Session
from .options import key_hash, options
from .pool import PoolMemory
from .version import check_sglang, installed_sglang

__all__ = ["OrbitKVStorage", "HiCacheStorage", "PoolTransferResult", "SGLANG_AVAILABLE", "key_hash"]

log = logging.getLogger("orbitkv.sglang")

try:  # pragma: no cover - SGLang is not installed where the stdlib tests run
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage  # type: ignore
    from sglang.srt.mem_cache.hicache_storage import PoolName, PoolTransferResult  # type: ignore

    SGLANG_AVAILABLE = True
    #: The KV pool's key in ``PoolTransferResult.extra_pool_hit_pages``
    #: (SGLang looks it up as ``PoolName.KV``, which hashes unlike "kv").
    _KV_KEY: Any = PoolName.KV
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

    @dataclass
    class PoolTransferResult:  # type: ignore[no-redef]
        """Stand-in for SGLang's ``PoolTransferResult`` (same fields)."""

        kv_hit_pages: int
        extra_pool_hit_pages: dict = field(default_factory=dict)
        restorable_prefix_pages: Optional[List[int]] = None

    _KV_KEY = "kv"

class OrbitKVStorage(HiCacheStorage):
    """HiCache L3 backend on the node's OrbitKV Manager.

    ``OrbitKVStorage(storage_config, kwargs=None)``: ``storage_config`` is
    SGLang's ``HiCacheStorageConfig`` (tp/pp/cp ranks and sizes,
    ``model_name``, ``is_mla_model``, ``extra_config``). Checks the
    installed SGLang (``UnsupportedSGLang`` for a release not in
    ``SUPPORTED_SGLANG``), then connects at once: raises ``OptionError``
    for a bad option and the ``OrbitKVError`` of the failed connect naming
    the option and path. The namespace is fixed by
    ``register_mem_pool_host`` (it needs the pool's dtype and page size);
    calls before it raise ``RuntimeError``.

    ``stats``: counts and bytes over every pool (``restored_bytes`` among
    them).
    """

    def __init__(self, storage_config: Any, kwargs: Any = None):
        if SGLANG_AVAILABLE:
            check_sglang(installed_sglang())
        self._lock = threading.RLock()
        self._legacy_warned = False
        self.config = storage_config
        tp_size = int(getattr(storage_config, "tp_size", 1) or 1)
        self.opts = options(getattr(storage_config, "extra_config", None), tp_size)
        self.tp_rank = int(getattr(storage_config, "tp_rank", 0) or 0)
        if self.opts["tp_shard_bootstrap_sockets"]:
            path = self.opts["tp_shard_bootstrap_sockets"][self.tp_rank]
            option = f"orbitkv.tp_shard_bootstrap_sockets[{self.tp_rank}]"
        else:
            path, option = self.opts["bootstrap_socket"], "orbitkv.bootstrap_socket"
        self.session = Session(path, option, who=f"OrbitKVStorage(tp{self.tp_rank})",
                               instance_id=f"sglang-tp{self.tp_rank}-{os.getpid()}", role=Role.WORKER,
                               timeout_ms=self.opts["timeout_ms"],
                               reconnect_interval_s=self.opts["reconnect_interval_s"],
                               manager_uid=self.opts["manager_uid"])
        self.mem_pool_host = None
        self.kv: PoolMemory | None = None
        self.pools: dict[str, PoolMemory] = {}
        self.stats = {"local_exists": 0, "exists_calls": 0, "hit_pages": 0, "restored_pages": 0, "restored_bytes": 0,
                      "get_failed_pages": 0, "published_pages": 0, "present_pages": 0, "set_failed_pages": 0}

    # ---- setup ----

    @property
    def ns(self) -> bytes | None:
        """The KV pool's namespace (None before ``register_mem_pool_host``)."""
        return self.kv.ns if self.kv is not None else None

    @property
    def zero_copy(self) -> bool:
        """Whether the KV pool is restored into in place (its
        ``orbitkv_buffer``) rather than through staging pages."""
        return self.kv is not None and self.kv.zero_copy

    @property
    def page_size(self) -> int:
        """Tokens per page of the KV pool (0 before registration)."""
        return self.kv.page_size if self.kv is not None else 0

    def _namespace(self, pool: PoolMemory) -> bytes:
        """The namespace of ``pool``: model, revision, dtype (with a Mamba
        pool's SSM state dtype), the pool's layout, name and (a staged
        sidecar) page bytes, page size and shard (``pool.PoolMemory``)."""
        c = self.config
        mla = bool(getattr(c, "is_mla_model", False))
        model = str(getattr(c, "model_name", "") or "")
        revision = resolve_revision(self.opts["model_revision"], str(getattr(c, "model_path", "") or model),
                                    "OrbitKVStorage (orbitkv.model_revision)")
        return CacheIdentity(
            model, revision, (self.opts["dtype"] or pool.dtype_name) + pool.dtype_suffix, pool.kv_layout,
            pool.page_size,
            0 if mla else self.tp_rank, 1 if mla else int(getattr(c, "tp_size", 1) or 1),
            int(getattr(c, "pp_rank", 0) or 0), int(getattr(c, "pp_size", 1) or 1),
            int(getattr(c, "attn_cp_rank", 0) or 0), int(getattr(c, "attn_cp_size", 1) or 1),
            salt=self.opts["salt"]).namespace()

    def _add_pool(self, name: str, host: Any) -> PoolMemory:
        pool = PoolMemory(name, host, self.opts["staging_pages"])
        pool.ns = self._namespace(pool)
        self.session.register(pool.buf)
        self.pools[name] = pool
        return pool

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        """Take the anchor (KV) host pool: register its ``orbitkv_buffer``
        (zero copy) or a staging buffer, and fix its namespace. Raises
        ``ValueError`` for a pool without a usable ``page_size`` and the
        ``OrbitKVError`` of a failed buffer registration."""
        with self._lock:
            self.mem_pool_host = mem_pool_host
            self.kv = self._add_pool("kv", mem_pool_host)

    def register_mem_host_pool_v2(self, host_pool: Any, host_pool_name: Any) -> None:
        """Take sidecar host pool ``host_pool_name`` (a ``PoolName``: Mamba
        state, SWA, indexer, ...) for the v2 calls: its own buffer (zero
        copy or staging) and namespace. Registering the KV pool's name
        again is ignored (it is the anchor). Raises as
        ``register_mem_pool_host``."""
        name = str(getattr(host_pool_name, "value", host_pool_name))
        with self._lock:
            if name == "kv" and self.kv is not None:
                return
            self._add_pool(name, host_pool)
            if name == "kv":
                self.kv = self.pools[name]

    def on_host_pools_registered(self) -> None:
        """The registration burst is over; pools are usable as they come,
        so nothing remains to do (a sidecar registered later is taken by
        ``register_mem_host_pool_v2`` alone)."""

    def _ready(self, op: str) -> PoolMemory:
        if self.kv is None:
            raise RuntimeError(f"OrbitKVStorage.{op}: register_mem_pool_host first")
        return self.kv

    # ---- existence ----

    def batch_exists(self, keys: List[str], extra_info: Any = None) -> int:
        """Leading pages of ``keys`` OrbitKV holds (RAM, or RAM and SSD with
        ``wait_for_full_prefix``); 0 on any error. With
        ``orbitkv.local_discovery`` (default true) the RAM answer comes from
        the Manager's shared-memory discovery index, without a round trip:
        SGLang follows this count with per-page ``batch_get_v1``, where a
        page evicted meanwhile is a recoverable miss, so the advisory
        answer is used as it is (docs/discover.md)."""
        kv = self._ready("batch_exists")
        with self._lock:
            return self._leading(kv, keys)

    def _leading(self, pool: PoolMemory, keys: List[str]) -> int:
        """Leading pages of ``keys`` held in ``pool``'s namespace; 0 on a
        Manager error (logged). ``ValueError`` for an empty key."""
        if not keys:
            return 0
        self.stats["exists_calls"] += 1
        client = self.session.get()
        if client is None:
            return 0
        if self.opts["local_discovery"] and not self.session.manager_alive():
            # A dead Manager's index stays mapped and would answer for good;
            # the session is failed: the next call reconnects.
            return 0
        batch = BlockHashes([key_hash(k) for k in keys])
        if self.opts["local_discovery"]:
            try:
                # RAM residency is what the index holds: the round trip's
                # ram_hits, or its hit_count when there is no tier below RAM.
                if not self.opts["wait_for_full_prefix"] or client.discover_complete(pool.ns):
                    n = client.discover_local(pool.ns, batch)
                    batch.close()
                    self.stats["local_exists"] += 1
                    self.stats["hit_pages"] += n
                    return n
            except OrbitKVError as e:
                log.debug("OrbitKVStorage: local discovery in pool %s unavailable (%s); asking the Manager", pool.name, e)
        try:
            a = client.lookup(pool.ns, batch, flags=QueryFlags.DISCOVER)
        except OrbitKVError as e:
            log.warning("OrbitKVStorage: lookup in pool %s: %s; a miss", pool.name, e)
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

    def batch_exists_v2(self, keys: List[str], pool_transfers: Optional[List[Any]] = None,
                        extra_info: Any = None) -> Any:
        """SGLang's v2 existence query: the leading KV pages of ``keys``
        held, cut by each sidecar pool of ``pool_transfers`` per its
        ``hit_policy``: ``all_pages`` (every page of the prefix held in that
        pool), ``trailing_pages`` (the last ``len(transfer.keys)`` pages of
        a prefix held, at least 1). A transfer's keys are counted, never
        looked up: SGLang's SWA and Mamba components send placeholders
        ("__placeholder__", one per page the pool will load) and fill in
        the hit's keys before ``batch_get_v2``. A ``PoolTransferResult``:
        kv_hit_pages (the longest prefix every pool can restore, so a
        missing window page or Mamba state shortens the whole hit),
        extra_pool_hit_pages (per pool name its own boundary; "kv" the KV
        prefix) and restorable_prefix_pages (the prefix lengths all pools
        can restore). A pool never registered, a ``block_groups`` policy
        (not served) or any error: that pool restores nothing, so the hit
        is 0 (logged); never raises into HiCache."""
        try:
            kv = self._ready("batch_exists_v2")
            with self._lock:
                return self._exists_v2(kv, keys, pool_transfers or [])
        except Exception as e:
            log.warning("OrbitKVStorage.batch_exists_v2: %s; a miss", e)
            return PoolTransferResult(0, {}, [])

    def _exists_v2(self, kv: PoolMemory, keys: List[str], transfers: List[Any]) -> Any:
        kv_pages = self._leading(kv, keys)
        hits: dict = {_KV_KEY: kv_pages} if kv_pages else {}
        restorable = set(range(1, kv_pages + 1))
        for t in transfers:
            if not restorable:
                break
            name = str(getattr(t.name, "value", t.name))
            pool = self.pools.get(name)
            policy = str(getattr(t.hit_policy, "value", t.hit_policy))
            if pool is None or policy not in ("all_pages", "trailing_pages"):
                log.warning("OrbitKVStorage.batch_exists_v2: pool %s (%s) %s; no hit", name, policy,
                            "was never registered" if pool is None else "has a hit policy not served")
                restorable = set()
                break
            if policy == "all_pages":
                boundary = self._leading(pool, keys[:kv_pages])
                ok = set(range(1, boundary + 1))
            else:
                trailing = max(1, len(t.keys) if t.keys else 1)
                held = {i for i in range(kv_pages) if self._leading(pool, [keys[i]]) == 1}
                ok = {p for p in range(1, kv_pages + 1) if all(i in held for i in range(max(0, p - trailing), p))}
                boundary = max(ok, default=0)
            if boundary:
                hits[t.name] = boundary
            restorable &= ok
        order = sorted(restorable)
        return PoolTransferResult(order[-1] if order else 0, hits, order)

    # ---- reads ----

    def batch_get_v1(self, keys: List[str], host_indices: Any, extra_info: Any = None) -> List[bool]:
        """Restore the KV pages of ``keys`` into the host pool slots
        ``host_indices``; returns per-page success (a leading run of True:
        the lease covers a prefix). Returns only after every restore reached
        its terminal result; the pool's pages are untouched by the Manager
        afterwards. Raises ``RuntimeError`` before registration and
        ``ValueError`` when ``host_indices`` is not ``len(keys) *
        page_size`` slots."""
        kv = self._ready("batch_get_v1")
        with self._lock:
            if not keys:
                return []
            return self._read(kv, keys, kv.slots(host_indices, len(keys)))

    def batch_get_v2(self, transfers: List[Any], extra_info: Any = None) -> dict:
        """Restore each transfer's pages (``transfer.keys`` into
        ``transfer.host_indices`` of the pool named ``transfer.name``);
        per pool name, per-page success (a leading run of True). A pool
        never registered, mismatched indices or any error: False for its
        pages (logged); never raises into HiCache."""
        return self._v2("batch_get_v2", self._read, transfers)

    def _v2(self, op: str, run: Any, transfers: List[Any]) -> dict:
        results: dict = {}
        with self._lock:
            for t in transfers:
                keys = list(t.keys or [])
                name = str(getattr(t.name, "value", t.name))
                try:
                    pool = self.pools.get(name)
                    if pool is None:
                        raise ValueError(f"host pool {name!r} was never registered (register_mem_host_pool_v2)")
                    if t.host_indices is None:
                        raise ValueError(f"host pool {name!r}: no host indices")
                    results[t.name] = run(pool, keys, pool.slots(t.host_indices, len(keys))) if keys else []
                except Exception as e:
                    log.warning("OrbitKVStorage.%s: %s; its %d pages failed", op, e, len(keys))
                    results[t.name] = [False] * len(keys)
        return results

    def _read(self, pool: PoolMemory, keys: List[str], slots: list) -> List[bool]:
        n = len(keys)
        ok = 0
        done = 0
        while done < n:
            k = min(n - done, pool.round_pages)
            got = self._get(pool, keys, done, k, slots[done:done + k])
            ok += got
            done += k
            if got < k:
                break
        self.stats["get_failed_pages"] += n - ok
        return [True] * ok + [False] * (n - ok)

    def _get(self, pool: PoolMemory, keys: List[str], first: int, k: int, slots: list[int]) -> int:
        """Restore keys[first:first+k] of ``pool`` (the lease covers
        keys[:first+k]); returns pages restored."""
        client = self.session.get()
        if client is None:
            return 0
        batch = BlockHashes([key_hash(x) for x in keys[:first + k]])
        lease = 0
        try:
            flags = QueryFlags.WAIT_FOR_FULL_PREFIX if self.opts["wait_for_full_prefix"] else 0
            a = client.lookup(pool.ns, batch, flags=flags, timeout_s=self.opts["load_timeout_s"])
            lease = a.lease_id if a.status == "Ok" else 0
            got = max(0, min(a.hit_count, first + k) - first) if lease else 0
            if got == 0:
                return 0
            pages = pool.targets(slots[:got])
            bid = self.session.buffer_id(pool.buf)
            step = client.max_restore_entries
            entries = [(first + i, pages[i]) for i in range(got)]
            ops = [client.start_restore(lease, bid, entries[i:i + step]) for i in range(0, got, step)]
            for op in ops:
                client.wait_restore(op, self.opts["load_timeout_s"])
            pool.stage_in(slots[:got])
            self.stats["restored_pages"] += got
            self.stats["restored_bytes"] += got * pool.page_bytes
            return got
        except OrbitKVError as e:
            log.warning("OrbitKVStorage: restore into pool %s: %s; pages treated as misses", pool.name, e)
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

    # ---- writes ----

    def batch_set_v1(self, keys: List[str], host_indices: Any, extra_info: Any = None) -> List[bool]:
        """Publish the KV host pool pages at ``host_indices`` under
        ``keys``; per-page success (a page already held counts as success).
        Returns after the Manager's copy completed and the pages are
        visible. A page whose publish failed (or may have failed) is
        False. Raises as ``batch_get_v1`` for a caller's mistake."""
        kv = self._ready("batch_set_v1")
        with self._lock:
            if not keys:
                return []
            return self._write(kv, keys, kv.slots(host_indices, len(keys)))

    def batch_set_v2(self, transfers: List[Any], extra_info: Any = None) -> dict:
        """Publish each transfer's pages (``transfer.host_indices`` of the
        pool named ``transfer.name``, under ``transfer.keys``); per pool
        name, per-page success. Failures as ``batch_get_v2``."""
        return self._v2("batch_set_v2", self._write, transfers)

    def _write(self, pool: PoolMemory, keys: List[str], slots: list) -> List[bool]:
        n = len(keys)
        result = [False] * n
        client = self.session.get()
        if client is None:
            self.stats["set_failed_pages"] += n
            return result
        bid = self.session.buffer_id(pool.buf)
        for s in range(0, n, pool.round_pages):
            chunk = range(s, min(n, s + pool.round_pages))
            round_slots = [slots[i] for i in chunk]
            pool.stage_out(round_slots)
            try:
                stored, present = client.publish(pool.ns, bid, [key_hash(keys[i]) for i in chunk],
                                                 pool.targets(round_slots))
            except OrbitKVError as e:
                log.warning("OrbitKVStorage: publish from pool %s: %s", pool.name, e)
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
