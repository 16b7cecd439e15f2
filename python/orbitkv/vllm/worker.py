"""Worker side of ``OrbitKVConnector``: restores and publishes blocks.

Per step (vLLM's order): ``start_load_kv`` looks each load's chain up under
a lease (one ticket per request, ``wait_for_full_prefix`` awaits SSD
blocks) and starts one restore of the leased blocks into the request's
pages; the first ``wait_for_layer_load`` waits for every restore's terminal
result (a restore copies all layers of a block at once), releases the
leases, and (staging mode) copies layer l into vLLM's tensor; the engine
reads no page before that. ``save_kv_layer`` (staging mode) copies the
step's saved blocks out of layer l; ``wait_for_save`` publishes them.

Where the bytes go (``register_kv_caches``, ``mode``): ``"zero-copy"`` (host
KV tensors inside an OrbitKV buffer), ``"gpu-direct"`` (CUDA KV tensors laid
out as one OrbitKV buffer, registered by IPC handle:
``orbitkv.vllm.gpudirect``) — both restore into and publish from vLLM's
block ids as pages — or ``"staging"`` (host pages and torch copies; any
other tensors, with one log line giving the reason).

With KV cache groups (``orbitkv.vllm.groups``) the buffer's layers are the
layer slots the groups share (``kvbuffer.slot_views``) and a page is one
block of one group, whatever its kind: zero copy when the slots are an
OrbitKV buffer, else staging (all slots copied at once: loads when their
restores settle, which for vLLM's asynchronous loads, started after the
forward pass, is in ``wait_for_save`` or ``get_transfer_results``; saves
in ``wait_for_save``; a load or saves larger
than the free staging pages go in rounds of ``staging_blocks`` blocks, each
copied before the next reuses the pages); GPU direct does not take them.

Failures never raise into the engine: a block that is not restored (lease
shorter than planned, a restore error, the Manager gone) goes into
``get_block_ids_with_load_errors`` so vLLM recomputes it; a failed publish
is a future miss. A session the Manager ended is reopened by ``Session``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import Any

from .._abi import Code, QueryFlags, Role
from ..buffer import EngineBuffer
from ..errors import Closed, OrbitKVError, Rejected, TimedOut
from ..hashes import BlockHashes
from .gpudirect import CudaKVBuffer, direct_layout, is_cuda
from .groups import KVGroups
from .kvbuffer import (KVCacheAllocation, block_bytes, block_dim, find_buffer, kv_cache_geometry, layer_planes,
                       manager_blocks_view, plane_page_bytes, slot_views)
from .metadata import LoadSpec, OrbitKVConnectorMetadata
from .options import ConnectorOptions, make_identity
from .session import SESSION_ENDING, Session
from .stats import Interval

__all__ = ["WorkerSide"]

log = logging.getLogger("orbitkv.vllm")


@dataclasses.dataclass
class _Restore:
    spec: LoadSpec
    lease_id: int
    ops: list[int]
    pages: list[int]       # buffer pages, one per restored block
    block_ids: list[int]   # engine blocks restored (same order)


class WorkerSide:
    """The worker half (one per vLLM worker process: one TP/PP rank)."""

    def __init__(self, opts: ConnectorOptions, base: dict[str, Any], tp_rank: int, pp_rank: int,
                 groups: KVGroups | None = None):
        self.opts = opts
        self.groups = groups   # vLLM's KV cache groups (None: one full-attention table)
        self._slots: list[Any] = []   # KV cache groups: a uint8 [blocks, page] view per layer slot
        self.base = base
        self.tp_rank, self.pp_rank = tp_rank, pp_rank
        path, option = opts.socket_for(tp_rank)
        self.session = Session(path, option, who=f"OrbitKVConnector(worker tp{tp_rank} pp{pp_rank})",
                               instance_id=f"vllm-worker-tp{tp_rank}-pp{pp_rank}-{os.getpid()}",
                               role=Role.WORKER, timeout_ms=opts.call_timeout_ms,
                               reconnect_interval_s=opts.reconnect_interval_s, manager_uid=opts.manager_uid)
        self._ns: dict[str, bytes] = {}
        self.layer_index: dict[str, int] = {}
        self.kv: list[Any] = []
        self.buf: EngineBuffer | CudaKVBuffer | None = None
        self.mode = ""
        self._staging = None   # torch uint8 view [region layers, pages, page_bytes] (staging mode)
        self._first_plane: list[int] = []   # layer l's first region layer (staging mode)
        self._num_blocks: int | None = None   # vLLM's manager blocks (register_kv_caches)
        self._device_sync = None   # gpu-direct: waits for the engine's device work (None: nothing to wait for)
        self._pending: list[_Restore] = []
        self._staged_loads: list[tuple[int, int]] = []   # (page, block id) landed this step
        self._saves: list[tuple[Any, list[int]]] = []     # (SaveSpec, pages) this step
        self._step: Any = None
        self._next_page = 0
        self._errors: set[int] = set()
        self._settled: set[str] = set()   # requests whose loads settled since the last worker meta
        # Whole (KV cache group) loads, asynchronous for vLLM: requests whose
        # load ended since the last get_transfer_results, and those that failed.
        self._recv_done: set[str] = set()
        self._recv_failed: set[str] = set()
        self._failed_meta: set[str] = set()   # whole loads failed since the last worker meta
        self._identity = tuple(sorted(base.items()))
        self.interval = Interval()   # this stats interval's figures (orbitkv.vllm.stats)
        self._deadline = 0.0   # time.monotonic() by which this step's loads end (start_load_kv)
        self.stats = {"restored_blocks": 0, "restored_bytes": 0, "load_error_blocks": 0,
                      "published_blocks": 0, "present_blocks": 0, "save_errors": 0, "lookups": 0,
                      "leased_blocks": 0, "recorded_blocks": 0}

    # ---- registration ----

    def mem_pool_context(self, kv_cache_config: Any) -> KVCacheAllocation | None:
        """The allocation context for vLLM's KV cache (zero copy, see
        ``orbitkv.vllm.kvbuffer``), or None (vLLM allocates as usual and
        ``register_kv_caches`` stages) when ``orbitkv.zero_copy`` is false
        or the planned layout is not OrbitKV's, or on a CUDA engine; the
        reason is logged.

        On a CUDA engine vLLM's own allocation is kept: vLLM 0.32's
        ``allocate_kv_cache`` (vllm/v1/worker/utils.py) already makes one
        backing ``torch.zeros(size, dtype=torch.int8, device=cuda)`` for all
        layers, inside this context (``GPUModelRunner.initialize_kv_cache``),
        so ``register_kv_caches`` can register it whole by IPC handle
        (gpu-direct) when its layout is layer-major; returning a context
        here would only displace vLLM's CuMem pool
        (``Worker._maybe_get_memory_pool_context``, vllm/v1/worker/gpu_worker.py)."""
        if _engine_on_cuda():
            log.info("OrbitKV: vLLM allocates its CUDA KV cache itself (one backing tensor); register_kv_caches "
                     "registers it by IPC handle when its layout is OrbitKV's")
            return None
        if not self.opts.zero_copy:
            log.info("OrbitKV: zero copy off (orbitkv.zero_copy=false); the KV cache will be staged")
            return None
        geometry, size, why = kv_cache_geometry(kv_cache_config)
        if geometry is None:
            log.info("OrbitKV: KV cache layout allows no zero copy (%s); it will be staged", why)
            return None
        log.info("OrbitKV: vLLM's KV cache (%d layers x %d blocks x %d B) goes into an OrbitKV buffer",
                 geometry[0], geometry[2], geometry[1])
        return KVCacheAllocation(geometry, size)

    def namespace(self, lora: str = "") -> bytes:
        ns = self._ns.get(lora)
        if ns is None:
            ns = self._ns[lora] = make_identity(self.base, self.tp_rank, self.pp_rank, lora).namespace()
        return ns

    def register_kv_caches(self, kv_caches: dict[str, Any], num_blocks: int | None = None) -> None:
        """Register vLLM's per-layer KV tensors (``{layer name: tensor}``,
        layer order = dict order; each ``[blocks, ...]`` or ``[2, blocks,
        ...]``) with the Manager: gpu-direct for CUDA tensors that fit
        (``gpudirect.direct_layout``, ``orbitkv.gpu_direct``), zero-copy for
        host tensors in an OrbitKV buffer, else staging (the reason
        logged). ``num_blocks`` is vLLM's manager block count
        (``KVCacheConfig.num_blocks``; None: the tensors' own count): views
        of kernel blocks are grouped into manager blocks first
        (``kvbuffer.manager_blocks_view``), so a page is always one of the
        scheduler's blocks. Raises ``ValueError`` for no tensors, a block
        count that is not a multiple of ``num_blocks``, or, in staging,
        planes of differing page sizes. A Manager that is gone or restarts
        meanwhile does not raise: the buffer is registered when the session
        reconnects (``Session``), and lookups miss until then."""
        if not kv_caches:
            raise ValueError("OrbitKVConnector.register_kv_caches: no KV cache tensors")
        self._num_blocks = num_blocks
        kv_caches = {name: manager_blocks_view(t, num_blocks, name) for name, t in kv_caches.items()}
        if self.groups is not None:
            self._register_slots(kv_caches, num_blocks)
            return
        self.layer_index = {name: i for i, name in enumerate(kv_caches)}
        self.kv = list(kv_caches.values())
        if is_cuda(self.kv[0]):
            why = self._gpu_direct(kv_caches)
            if why is None:
                return
        else:
            sizes = {block_bytes(t) for t in self.kv}
            found = find_buffer(self.kv[0].data_ptr())
            buf, base = found if found else (None, 0)
            why = (f"layers differ in block bytes {sorted(sizes)}" if len(sizes) != 1
                   else self._zero_copy_mismatch(buf, base, sizes.pop()))
            if why is None:
                self.buf, self.mode = buf, "zero-copy"
                self._register(self.buf, "the KV cache (zero copy)")
                return
        self._register_staging(kv_caches, why)

    def _register_slots(self, kv_caches: dict[str, Any], num_blocks: int | None) -> None:
        """KV cache groups: register the layer slots (``slot_views``) in
        place when they are an OrbitKV buffer, else through staging pages.
        Raises ``ValueError`` when the tensors are not laid out as slots
        (the reason named): no block of theirs could be restored safely."""
        import torch
        if self.groups.unsupported:
            log.warning("OrbitKV: %s; nothing is registered", self.groups.unsupported)
            return
        if not num_blocks:
            num_blocks = int(next(iter(kv_caches.values())).shape[block_dim(next(iter(kv_caches.values())))])
        views, why = slot_views(kv_caches, num_blocks)
        if views is None:
            raise ValueError(f"OrbitKVConnector.register_kv_caches: the KV cache groups' tensors are not one "
                             f"set of layer slots: {why}")
        self._slots = views
        page = int(views[0].shape[1])
        found = None if views[0].device.type != "cpu" else find_buffer(views[0].data_ptr())
        if found is not None:
            buf, base = found
            if buf.layers == len(views) and buf.page_bytes == page and buf.page_count >= num_blocks and all(
                    v.data_ptr() == base + buf.offset(j, 0) for j, v in enumerate(views)):
                self.buf, self.mode = buf, "zero-copy"
                log.info("OrbitKV: %d KV cache groups over %d layer slots x %d blocks x %d B (zero copy)",
                         len(self.groups.groups), len(views), num_blocks, page)
                self._register(buf, "the KV cache (zero copy)")
                return
            why = f"buffer is {buf.layers} layers x {buf.page_bytes} B pages, the slots {len(views)} x {page}"
        else:
            why = "the KV cache groups' slots are not in an orbitkv.vllm.kv_cache_buffer"
        self.buf = EngineBuffer(len(views), page, self.opts.staging_blocks)
        self._staging = torch.frombuffer(self.buf.memoryview(), dtype=torch.uint8).view(
            len(views), self.opts.staging_blocks, page)
        self.mode = "staging"
        log.info("OrbitKV: %d KV cache groups over %d layer slots via %d staging pages (%s)",
                 len(self.groups.groups), len(views), self.opts.staging_blocks, why)
        self._register(self.buf, "the staging buffer")

    def _register(self, buf: Any, what: str) -> None:
        """Register buf (``what`` it holds, for the log) with the session;
        a session that ended meanwhile (the Manager gone or restarting:
        ``SESSION_ENDING``) is logged, not raised into vLLM: ``Session``
        keeps buf and registers it at its reconnect. Raises what
        ``Session.register`` raises otherwise."""
        try:
            self.session.register(buf)
        except SESSION_ENDING as e:
            log.warning("OrbitKV: registering %s waits for the Manager: %s; lookups miss until the session "
                        "reconnects", what, e)

    def _gpu_direct(self, kv_caches: dict[str, Any]) -> str | None:
        """Register the CUDA KV tensors as one CUDA region; None when done,
        else why not (for the staging log line)."""
        if not self.opts.gpu_direct:
            return "CUDA KV tensors, but orbitkv.gpu_direct=false"
        layout, why = direct_layout(kv_caches)
        if layout is None:
            return f"CUDA KV tensors are not one OrbitKV buffer: {why}"
        buf = CudaKVBuffer(layout)
        try:
            self._register(buf, "the CUDA KV cache")
        except Rejected as e:
            return f"the Manager refused the CUDA region: {e}"
        except OrbitKVError:
            raise   # the session's own failure (some subclass OSError/ValueError), as for a host buffer
        except (OSError, RuntimeError, ValueError) as e:
            return f"no IPC region for the CUDA KV tensors: {e}"
        self.buf, self.mode = buf, "gpu-direct"
        self._device_sync = _device_sync(layout.device)
        log.info("OrbitKV: vLLM's CUDA KV cache registered by IPC handle: %d region layers x %d blocks x %d B "
                 "on cuda:%d; the Manager copies device pages directly", layout.layers, layout.page_count,
                 layout.page_bytes, layout.device)
        return None

    def _register_staging(self, kv_caches: dict[str, Any], why: str) -> None:
        import torch
        planes = [layer_planes(t) for t in self.kv]
        sizes = {(name, plane_page_bytes(p)) for name, ps in zip(kv_caches, planes) for p in ps}
        if len({n for _, n in sizes}) != 1:
            raise ValueError(f"OrbitKVConnector.register_kv_caches: layers differ in page bytes {sorted(sizes)}; "
                             "OrbitKV pages need one size")
        page_bytes = sizes.pop()[1]
        self._first_plane, layers = [], 0
        for ps in planes:
            self._first_plane.append(layers)
            layers += len(ps)
        self.buf = EngineBuffer(layers, page_bytes, self.opts.staging_blocks)
        self._staging = torch.frombuffer(self.buf.memoryview(), dtype=torch.uint8).view(
            layers, self.opts.staging_blocks, page_bytes)
        self.mode = "staging"
        log.info("OrbitKV: KV cache via %d staging pages (%s)", self.opts.staging_blocks, why)
        self._register(self.buf, "the staging buffer")

    def _zero_copy_mismatch(self, buf: EngineBuffer | None, base: int, page_bytes: int) -> str | None:
        if buf is None:
            return "KV tensors are not in an orbitkv.vllm.kv_cache_buffer"
        if buf.layers != len(self.kv) or buf.page_bytes != page_bytes:
            return f"buffer is {buf.layers} layers x {buf.page_bytes} B pages, KV is {len(self.kv)} x {page_bytes}"
        for l, t in enumerate(self.kv):
            if block_dim(t) != 0 or not t.is_contiguous() or t.shape[0] != buf.page_count or \
                    t.data_ptr() != base + buf.offset(l, 0):
                return f"layer {l} is not pages 0..{buf.page_count - 1} of buffer layer {l}"
        return None

    # ---- per step ----

    def _begin(self, meta: Any) -> None:
        if meta is not self._step:
            self._step = meta
            self._next_page = 0
            self._staged_loads = []
            self._saves = []

    def _pages(self, n: int) -> list[int]:
        """n staging pages for this step (fewer when full)."""
        k = max(0, min(n, self.opts.staging_blocks - self._next_page))
        pages = list(range(self._next_page, self._next_page + k))
        self._next_page += k
        return pages

    def check_identity(self, meta: OrbitKVConnectorMetadata) -> None:
        """Raise ``ValueError`` naming the first cache-identity field (block
        size, model, ...) where the scheduler's step differs from this
        worker: its blocks would be restored into the wrong shape or model."""
        theirs = dict(getattr(meta, "identity", ()) or ())
        if not theirs:
            return
        for name, mine in self._identity:
            if theirs.get(name) != mine:
                raise ValueError(f"OrbitKVConnector: scheduler and worker tp{self.tp_rank} disagree on the cache "
                                 f"identity: {name} is {theirs.get(name)!r} at the scheduler, {mine!r} at the "
                                 "worker (same vLLM config and orbitkv.* options on both sides)")

    def start_load_kv(self, meta: OrbitKVConnectorMetadata) -> None:
        if meta is not self._step:
            self.check_identity(meta)
        self._begin(meta)
        if self._device_sync is not None and meta.loads:
            # Device work the engine queued may still use the pages the
            # Manager is about to write (its copies run on its own streams).
            self._device_sync()
        if meta.loads:
            # One bound for the whole step: its lookups and restore waits
            # together block the engine at most load_timeout_s.
            self._deadline = time.monotonic() + self.opts.load_timeout_s
        for spec in meta.loads:
            self._settled.add(spec.req_id)
            self._start(spec)

    def worker_meta(self) -> tuple[set[str], set[str]]:
        """(the requests whose loads settled, those whose whole load failed)
        since the last call (both cleared)."""
        self.settle()
        done, self._settled = self._settled, set()
        failed, self._failed_meta = self._failed_meta, set()
        return done, failed

    def _fail_load(self, spec: LoadSpec, ids: list[int]) -> None:
        """Blocks ``ids`` of ``spec`` were not restored: vLLM recomputes
        them (block ids for one-table loads; the whole request for a whole
        load, reported through ``take_recving`` since vLLM cannot map block
        ids of several KV cache groups back to requests)."""
        if not ids:
            return
        if spec.whole:
            self._recv_failed.add(spec.req_id)
            self._failed_meta.add(spec.req_id)
            self.stats["load_error_blocks"] += len(ids)
            self.interval.add("load_error_blocks", len(ids))
            return
        self._fail_blocks(ids)

    def take_recving(self) -> tuple[set[str], set[str]]:
        """(requests whose whole loads ended, those of them that failed)
        since the last call, after waiting for this step's restores."""
        self.settle()
        done, failed = self._recv_done | self._recv_failed, self._recv_failed
        self._recv_done, self._recv_failed = set(), set()
        return done, failed

    def _fail_blocks(self, ids: list[int]) -> None:
        self._errors.update(ids)
        self.stats["load_error_blocks"] += len(ids)
        self.interval.add("load_error_blocks", len(ids))

    def _left_s(self) -> float:
        """Seconds left of this step's load bound (at least 1 ms, so an
        expired bound still lets a reply that is already there be read)."""
        return max(0.001, self._deadline - time.monotonic())

    def _start(self, spec: LoadSpec) -> None:
        if spec.whole:
            self._recv_done.add(spec.req_id)
        if not spec.block_ids:
            return
        client = self.session.get()
        if client is None or self.buf is None:
            self._fail_load(spec, spec.block_ids)
            return
        flags = QueryFlags.WAIT_FOR_FULL_PREFIX if self.opts.wait_for_full_prefix else 0
        batch = BlockHashes(spec.hashes)
        lease = 0
        try:
            self.stats["lookups"] += 1
            a = client.lookup(self.namespace(spec.lora_id), batch, flags=flags, timeout_s=self._left_s())
            lease = a.lease_id if a.status == "Ok" else 0
            hits = min(a.hit_count, len(spec.hashes)) if lease else 0
            self.stats["leased_blocks"] += hits
            n = max(0, hits - spec.first) if not spec.whole or hits == len(spec.hashes) else 0
            if spec.whole and self._slots and self.mode == "staging" and n > self.opts.staging_blocks - self._next_page:
                lease, held = 0, lease
                self._restore_in_rounds(client, spec, held, n)
                return
            pages = spec.block_ids[:n] if self.mode != "staging" else self._pages(n)
            n = len(pages)
            self._fail_load(spec, spec.block_ids[n:])
            if n == 0:
                if lease:
                    client.release(lease)
                return
            entries = [(spec.first + i, pages[i]) for i in range(n)]
            step = client.max_restore_entries
            bid = self.session.buffer_id(self.buf)
            ops = [client.start_restore(lease, bid, entries[i:i + step]) for i in range(0, n, step)]
            self._pending.append(_Restore(spec, lease, ops, pages, spec.block_ids[:n]))
        except OrbitKVError as e:
            log.warning("OrbitKV load of request %s failed: %s; vLLM recomputes its blocks", spec.req_id, e)
            self._fail_load(spec, [b for b in spec.block_ids if b not in self._errors])
            # A session-ending error first: a release on a session that just
            # timed out would wait out another deadline in the same step.
            self.session.fail(e)
            self._release(lease)
        finally:
            batch.close()

    def _restore_in_rounds(self, client: Any, spec: LoadSpec, lease: int, n: int) -> None:
        """A whole load of ``n`` blocks (KV cache groups, staging mode) that
        this step's free staging pages cannot hold: the restores already
        started are settled first (their pages copied into the slots, so
        every page is free), then the blocks are restored
        ``staging_blocks`` at a time, each round copied into the slots
        before the next reuses the pages. All or nothing as any whole load:
        an error fails the request (``_fail_load``); a timed-out restore
        ends the session as in ``settle``. Releases ``lease``."""
        self.settle()
        self._next_page = 0
        t0 = time.perf_counter()
        try:
            bid = self.session.buffer_id(self.buf)
            step = client.max_restore_entries
            for done in range(0, n, self.opts.staging_blocks):
                k = min(n - done, self.opts.staging_blocks)
                entries = [(spec.first + done + i, i) for i in range(k)]
                for op in [client.start_restore(lease, bid, entries[i:i + step]) for i in range(0, k, step)]:
                    client.wait_restore(op, self._left_s())
                for i in range(k):
                    block = spec.block_ids[done + i]
                    for j, v in enumerate(self._slots):
                        v[block].copy_(self._staging[j, i])
            self.stats["restored_blocks"] += n
            self.interval.add("restored_blocks", n)
            self.stats["restored_bytes"] += n * self.buf.layers * self.buf.page_bytes
        except OrbitKVError as e:
            log.warning("OrbitKV restore for request %s failed: %s; vLLM recomputes it", spec.req_id, e)
            self._fail_load(spec, spec.block_ids)
            if isinstance(e, TimedOut):
                self.session.close()
            self.session.fail(e)
        finally:
            self._release(lease)
            self.interval.wait(time.perf_counter() - t0)

    def _release(self, lease: int) -> None:
        client = self.session.client
        if lease and client is not None and not client.closed:
            try:
                client.release(lease)
            except OrbitKVError as e:
                self.session.fail(e)

    def settle(self) -> None:
        """Wait for every restore of this step to reach its terminal result."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        t0 = time.perf_counter()
        for r in pending:
            client = self.session.client
            try:
                if client is None or client.closed:
                    raise Closed("wait_restore", Code.ECLOSED, "session ended before the restore finished")
                for op in r.ops:
                    client.wait_restore(op, self._left_s())
                n = len(r.block_ids)
                self.stats["restored_blocks"] += n
                self.interval.add("restored_blocks", n)
                self.stats["restored_bytes"] += n * self.buf.layers * self.buf.page_bytes
                if self.mode == "staging":
                    self._staged_loads.extend(zip(r.pages, r.block_ids))
            except OrbitKVError as e:
                log.warning("OrbitKV restore for request %s failed: %s; vLLM recomputes its blocks",
                            r.spec.req_id, e)
                self._fail_load(r.spec, r.block_ids)
                if isinstance(e, TimedOut):
                    # The pages are still the Manager's: end the session so
                    # it drains its copies before anything else happens.
                    self.session.close()
                self.session.fail(e)
            finally:
                self._release(r.lease_id)
        if self._slots and self.mode == "staging":
            # Every slot at once, before the engine reads any of them (an
            # asynchronous load may settle in a step with no forward pass).
            loads, self._staged_loads = self._staged_loads, []
            for page, block in loads:
                for j, v in enumerate(self._slots):
                    v[block].copy_(self._staging[j, page])
        self.interval.wait(time.perf_counter() - t0)

    def wait_for_layer_load(self, layer_name: str) -> None:
        self.settle()
        if self.mode == "staging" and self._staged_loads and not self._slots:
            l = self.layer_index[layer_name]
            for p, plane in enumerate(layer_planes(self.kv[l])):
                r = self._first_plane[l] + p
                for page, block in self._staged_loads:
                    dst = plane.select(0, block)
                    dst.copy_(self._staging[r, page].view(plane.dtype).view(dst.shape))

    def save_kv_layer(self, layer_name: str, kv_layer: Any, meta: OrbitKVConnectorMetadata | None) -> None:
        if meta is None or self.mode != "staging" or self._slots:
            return
        self._begin(meta)
        if not self._saves and meta.saves:
            self._saves = [(s, self._pages(len(s.block_ids))) for s in meta.saves]
        l = self.layer_index[layer_name]
        kv_layer = manager_blocks_view(kv_layer, self._num_blocks, layer_name)
        for p, plane in enumerate(layer_planes(kv_layer)):
            r = self._first_plane[l] + p
            for spec, pages in self._saves:
                for page, block in zip(pages, spec.block_ids):
                    src = plane.select(0, block).reshape(-1)
                    self._staging[r, page].copy_(src.cpu().view(self._staging.dtype))

    def wait_for_save(self, meta: OrbitKVConnectorMetadata | None) -> None:
        self.settle()
        if meta is None or not meta.saves:
            return
        self._begin(meta)
        fill = None   # KV cache groups, staging: copies a round's blocks into its pages before its publish
        # Each save's BlockRecord (or None) per block, for every way of cutting it below.
        recs = {id(s): _records(s) for s in meta.saves}
        if self.mode != "staging":
            work = [(s, list(s.block_ids), recs[id(s)]) for s in meta.saves]
            if self._device_sync is not None and work:
                # The forward pass wrote these pages on the engine's streams:
                # they must have landed before the Manager reads them.
                self._device_sync()
        elif self._slots:
            # KV cache groups: every slot of staging_blocks blocks at a time
            # copied out (the forward pass wrote them all by now) and
            # published before the next round reuses the pages (this step's
            # loads were settled above: every page is free).
            size = self.opts.staging_blocks
            work = [(dataclasses.replace(spec, hashes=spec.hashes[i:i + size], block_ids=spec.block_ids[i:i + size]),
                     list(range(min(size, len(spec.block_ids) - i))), recs[id(spec)][i:i + size])
                    for spec in meta.saves for i in range(0, len(spec.block_ids), size)]
            fill = self._copy_out
        else:
            work = [(s, pages, recs.get(id(s)) or _records(s)) for s, pages in self._saves]
        client = self.session.get()
        if client is not None and self.buf is not None:
            try:
                # A publish, once sent, waits for the Manager's reply with no
                # deadline (the publish fence: the Manager may be reading
                # the pages). A Ping first, under the call deadline, finds a
                # Manager that stopped answering before any publish is sent,
                # so a stopped Manager holds this step at most one deadline.
                client.ping()
            except OrbitKVError as e:
                self.session.fail(e)
                client = None
        if client is None or self.buf is None:
            self.stats["save_errors"] += sum(len(s.hashes) for s, _, _ in work)
            return
        bid = self.session.buffer_id(self.buf)
        for spec, pages, records in work:
            n = len(pages)
            if n == 0:
                continue
            if fill is not None:
                fill(spec, pages)
            # A publish carries a record for each of its blocks or for none:
            # the blocks with records (vLLM hashed them; KV cache groups: the
            # first full-attention group's) go in one, the others in another.
            with_rec = [i for i in range(n) if records[i] is not None]
            parts = [(with_rec, True), ([i for i in range(n) if records[i] is None], False)] \
                if 0 < len(with_rec) < n else [(range(n), bool(with_rec))]
            for idx, recorded in parts:
                if not self._publish(client, bid, spec, [spec.hashes[i] for i in idx], [pages[i] for i in idx],
                                     [records[i] for i in idx] if recorded else None):
                    return

    def _publish(self, client: Any, bid: int, spec: Any, hashes: list[bytes], pages: list[int],
                 records: list | None) -> bool:
        """Publish ``hashes`` from ``pages`` (with ``records``, one per
        block, or none), counted in the stats; False when the failure ended
        the session (nothing more can be published this step)."""
        n = len(pages)
        try:
            stored, present = client.publish(self.namespace(spec.lora_id), bid, hashes, pages, records=records)
            self.stats["published_blocks"] += stored
            self.interval.add("published_blocks", stored)
            self.stats["present_blocks"] += present
            if records is not None:
                self.stats["recorded_blocks"] += n
        except OrbitKVError as e:
            self.stats["save_errors"] += n
            log.warning("OrbitKV publish for request %s failed: %s", spec.req_id, e)
            if self.session.fail(e):
                return False
        return True

    def _copy_out(self, spec: Any, pages: list[int]) -> None:
        """Staging with KV cache groups: every slot's block ``spec.block_ids[i]``
        into staging page ``pages[i]``."""
        for page, block in zip(pages, spec.block_ids):
            for j, v in enumerate(self._slots):
                self._staging[j, page].copy_(v[block])

    def get_block_ids_with_load_errors(self) -> set[int]:
        errors, self._errors = self._errors, set()
        return errors

    def shutdown(self) -> None:
        self.settle()
        self.session.close()
        if self._staging is not None:
            self._staging = None


def _records(spec: Any) -> list:
    """spec's ``BlockRecord`` (or None) per block (``SaveSpec.records``);
    all None when it has none, or records that do not fit its blocks
    (logged: the blocks are published without them)."""
    n = len(spec.hashes)
    if spec.records is None:
        return [None] * n
    try:
        return spec.records.per_block(n)
    except ValueError as e:
        log.warning("OrbitKV: save of request %s published without block records: %s", spec.req_id, e)
        return [None] * n


def _engine_on_cuda() -> bool:
    """True when this worker's engine runs on CUDA (vLLM's platform is
    CUDA-like); False without vLLM."""
    try:  # pragma: no cover - needs vLLM
        from vllm.platforms import current_platform  # type: ignore
        return bool(current_platform.is_cuda_alike())
    except Exception:
        return False


def _device_sync(device: int):
    """A callable that waits for all work queued on CUDA device ``device``
    (``torch.cuda.synchronize``), or None when torch sees no CUDA device:
    the tests' CUDA tensors are host memory of the driver double, with no
    device work to wait for."""
    try:
        import torch
        if not torch.cuda.is_available():
            return None
    except ImportError:
        return None
    return lambda: torch.cuda.synchronize(device)
