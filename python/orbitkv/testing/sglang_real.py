"""One engine process of ``make e2e-sglang``: real SGLang's HiCache storage
path on the CPU, with ``OrbitKVStorage`` loaded by SGLang itself.

``python -m orbitkv.testing.sglang_real --role ROLE --socket S --out F``
(SGLang's environment, ``build/venv/sglang``; ``PYTHONPATH=python``). What
is SGLang's own code here and what is not:

* SGLang's argument parser turns the flags of docs/adapters.md
  (``--enable-hierarchical-cache --hicache-mem-layout page_first_direct
  --hicache-storage-backend dynamic --hicache-storage-backend-extra-config
  '{...}'``) into ``ServerArgs``, published as the process's runtime
  context (``publish``);
* the device pools of a hybrid model with full attention, sliding-window
  attention and Mamba layers, as SGLang's scheduler builds them, on device
  "cpu": ``SWAKVPool`` (full layers 0 and 2, sliding-window layer 1; its
  ``full_kv_pool`` and ``swa_kv_pool`` are ``MHATokenToKVPool``s),
  ``HybridReqToTokenPool`` with its ``MambaPool`` (Mamba2 layer 3: conv
  state bfloat16, SSM state float32, SGLang's defaults) and
  ``SWATokenToKVPoolAllocator``;
* SGLang's own host-pool assembler for that model,
  ``build_hybrid_mamba_swa_stack``, is called unchanged first; on a CPU it
  stops where it pins the host pools with cudaHostRegister (the exception
  is reported as ``assembler_error``). The same host pools are then built
  as it builds them, with ``pin_memory=False``: two
  ``MHATokenToKVPoolHost`` (SGLang's class for these device pools, with its
  arguments from SGLang's ``_mha_host_inputs``: the KV anchor over
  ``full_kv_pool`` and the ``PoolName.SWA`` pool over ``swa_kv_pool``) and a
  ``MambaPoolHost`` (``PoolName.MAMBA``, one state slot per page), in a
  ``HostPoolGroup`` of SGLang's ``build_pool_entry`` entries, and the
  server's cache controller ``HybridCacheController`` with the arguments
  the assembler gives it: its constructor parses the extra config
  (``parse_storage_backend_extra_config``) and attaches the backend
  through ``StorageBackendFactory`` ("dynamic": module path and class
  name) with the SWA and Mamba pools registered by
  ``register_mem_host_pool_v2``; its threads then call ``OrbitKVStorage``
  (backup thread: ``batch_set_v1``, and ``batch_set_v2`` for a prompt's
  sliding window and Mamba state; prefetch thread: ``batch_exists`` or
  ``batch_exists_v2``; prefetch I/O thread: ``batch_get_v1`` and
  ``batch_get_v2``); page keys are SGLang's ``get_storage_hash_str``;
* not SGLang's: the host pools are unpinned (above); the model config the
  parser reads is a plain 2-layer Qwen2 (nothing runs it: the hybrid layer
  plan above is the device pools' own arguments); the radix tree's part
  (the ``PoolTransfer`` of each pool as ``UnifiedRadixCache``'s SWA and
  Mamba components build them for a backup and for a prefetch, the
  prefetch's host slots through the controller's ``allocate_storage_hit``
  and the sidecars' staging slots as ``_alloc_prefetch_aux_staging``
  takes them, handing the operation to the I/O thread) is done here as
  ``UnifiedRadixCache`` does it. No model runs.

Roles (each one process, so a warm role's SGLang state starts empty):

* ``save`` - backs up the "shared" prompt (KV only) and the hybrid ones:
  "hybrid" with its sliding window and Mamba state, "mamba_gap" and
  "swa_gap" whose full KV is stored but whose Mamba state, or sliding
  window, is stored only for their first 2 pages (KV seeded by each
  page's key);
* ``warm`` - prefetches "shared", "diverge" and the hybrid prompts (with
  their window and state): hit tokens, loaded tokens, the bytes compared
  with what ``save`` wrote; more v2 calls made directly with SGLang's own
  ``PoolTransfer`` types on the SWA and Mamba pools;
* ``other`` - prefetches under another model revision: expects 0;
* ``kill`` - prefetches while the gate pauses then SIGKILLs the Manager
  mid-restore: the pages must come back as misses within the load timeout,
  the host slots untouched; then backs up and prefetches again until the
  restarted Manager serves.

Writes a JSON result to ``--out``; exit status 0 when the process ran to
the end (the gate judges the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback

PAGE, LAYERS, HEADS, DIM = 32, 2, 2, 64
SLOTS = 2048
WINDOW = 2  # pages of the sliding-window pool a hybrid prompt keeps
#: The hybrid model's layers: full attention, sliding-window attention, Mamba.
FULL_LAYERS, SWA_LAYERS, MAMBA_LAYERS = [0, 2], [1], [3]
MAMBA_SLOTS = 16  # the device MambaPool's state slots (its host pool: 2x, +1)
#: Host pool name -> the seed offset of its page data (equal keys, other data).
SEED = {"kv": 0, "swa": 1, "mamba": 2}

#: The prompts: token ids. "shared" is 4 full pages (an exact multiple of
#: the page size); "diverge" shares its first 2.5 pages with "shared" and
#: differs mid-page 3, so only 2 pages may hit; the hybrid ones are 4 pages
#: each, none sharing a page with another.
PROMPTS = {
    "shared": [(i * 7 + 3) % 1000 for i in range(4 * PAGE)],
    "diverge": [(i * 7 + 3) % 1000 for i in range(2 * PAGE + PAGE // 2)] + [999] * (PAGE + PAGE // 2),
    "hybrid": [(i * 11 + 5) % 1000 for i in range(4 * PAGE)],
    "mamba_gap": [(i * 13 + 1) % 1000 for i in range(4 * PAGE)],
    "swa_gap": [(i * 17 + 2) % 1000 for i in range(4 * PAGE)],
}

#: What ``save`` backs up of each hybrid prompt, one controller backup
#: each: (pages, sliding-window pages, with its Mamba state). The first
#: write of the gap prompts stores their first 2 pages with both sidecars;
#: the second their 4 pages without the Mamba state (or the window).
HYBRID_SAVES = {
    "hybrid": [(4, WINDOW, True)],
    "mamba_gap": [(2, WINDOW, True), (4, WINDOW, False)],
    "swa_gap": [(2, WINDOW, True), (4, 0, True)],
}


def extra_config(sock: str, revision: str, **more) -> dict:
    """The ``--hicache-storage-backend-extra-config`` object of
    docs/adapters.md, for socket ``sock`` and model revision ``revision``."""
    cfg = {"backend_name": "orbitkv", "module_path": "orbitkv.sglang", "class_name": "OrbitKVStorage",
           "interface_v1": 1, "prefetch_threshold": PAGE, "orbitkv.bootstrap_socket": sock,
           "orbitkv.model_revision": revision}
    cfg.update(more)
    return cfg


def server_flags(model: str, extra: dict) -> list[str]:
    """The SGLang server flags of docs/adapters.md (HiCache with OrbitKV)."""
    return ["--model-path", model, "--device", "cpu", "--dtype", "float32", "--page-size", str(PAGE),
            "--enable-hierarchical-cache", "--hicache-mem-layout", "page_first_direct",
            "--hicache-write-policy", "write_through", "--hicache-io-backend", "direct",
            "--hicache-storage-backend", "dynamic",
            "--hicache-storage-backend-extra-config", json.dumps(extra)]


def write_model_config(path: str) -> None:
    """A Qwen2 config (no weights: nothing runs the model) for ServerArgs."""
    if os.path.exists(os.path.join(path, "config.json")):
        return
    import transformers
    transformers.Qwen2Config(vocab_size=1024, hidden_size=HEADS * DIM * 2, intermediate_size=512,
                             num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=HEADS,
                             max_position_embeddings=1024, torch_dtype="float32",
                             architectures=["Qwen2ForCausalLM"]).save_pretrained(path)


class Engine:
    """SGLang's storage stack for one process (see the module doc)."""

    def __init__(self, flags: list[str]):
        t0 = time.monotonic()
        import torch
        from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.hicache_storage import PoolName
        from sglang.srt.mem_cache.hybrid_cache import hybrid_pool_assembler as hpa
        from sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller import HybridCacheController
        from sglang.srt.mem_cache.memory_pool import HybridReqToTokenPool
        from sglang.srt.mem_cache.pool_host.group import HostPoolGroup
        from sglang.srt.mem_cache.pool_host.mamba import MambaPoolHost
        from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool
        from sglang.srt.runtime_context import get_memory, get_parallel, publish
        from sglang.srt.server_args import ServerArgs
        self.torch = torch
        self.import_s = time.monotonic() - t0

        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        self.server_args = ServerArgs.from_cli_args(parser.parse_args(flags))
        publish(self.server_args, role="scheduler")
        # A single-rank CPU process: the widths the process groups would set.
        get_parallel().override_permanently(dcp_enabled=False, attn_dcp_size=1, attn_dcp_rank=0, tp_rank=0,
                                            tp_size=1, pp_rank=0, pp_size=1)
        mem = get_memory()
        self.layout = mem.hicache_mem_layout
        # The hybrid model's device pools, as the scheduler builds them.
        self.kvcache = SWAKVPool(size=SLOTS, size_swa=SLOTS, page_size=PAGE, dtype=torch.float32, head_num=HEADS,
                                 head_dim=DIM, swa_attention_layer_ids=SWA_LAYERS,
                                 full_attention_layer_ids=FULL_LAYERS, device="cpu", enable_memory_saver=False)
        self.req_pool = HybridReqToTokenPool(size=8, mamba_size=MAMBA_SLOTS, mamba_spec_state_size=8,
                                             max_context_len=8 * PAGE, device="cpu", enable_memory_saver=False,
                                             cache_params=mamba_params(), mamba_layer_ids=MAMBA_LAYERS,
                                             enable_mamba_extra_buffer=False)
        alloc = SWATokenToKVPoolAllocator(SLOTS, SLOTS, PAGE, torch.float32, "cpu", self.kvcache, need_sort=False)
        params = CacheInitParams(disable=False, req_to_token_pool=self.req_pool, token_to_kv_pool_allocator=alloc,
                                 page_size=PAGE)
        full_map, swa_map = hpa._swa_layer_mappings(self.kvcache)
        mamba_pool = self.req_pool.mamba_pool
        (mamba_info,) = mamba_pool.get_device_pool_infos()
        mamba_map = {layer: i for i, layer in enumerate(mamba_info.layer_ids)}
        layers = max(full_map.keys() | swa_map.keys() | mamba_map.keys()) + 1
        extra, self.threshold, *_ = HybridCacheController.parse_storage_backend_extra_config(
            mem.hicache_storage_backend_extra_config)

        # SGLang's own assembler for this model, unchanged (no storage
        # backend: the one under test is attached below).
        self.assembler_error = ""
        try:
            hpa.build_hybrid_mamba_swa_stack(
                params=params, full_kv_pool=self.kvcache.full_kv_pool, swa_kv_pool=self.kvcache.swa_kv_pool,
                mamba_pool=mamba_pool, full_layer_mapping=full_map, swa_layer_mapping=swa_map, start_layer=0,
                page_size=PAGE, tp_group=None, load_cache_event=threading.Event(), storage_backend=None)
        except Exception as e:  # it pins the host pools with cudaHostRegister
            self.assembler_error = f"{type(e).__name__}: {e}".splitlines()[0] + at(e)

        # The same host pools, unpinned, with the assembler's arguments.
        def mha_host(device_pool, label: str):
            cls, info, kwargs = hpa._mha_host_inputs(device_pool)
            return cls(info, mem.hicache_ratio, mem.hicache_size, PAGE, self.layout,
                       allocator_type=hpa._get_allocator_type(), pool_label=label, pin_memory=False, **kwargs)

        self.host = mha_host(self.kvcache.full_kv_pool, "full")
        self.swa = mha_host(self.kvcache.swa_kv_pool, "swa")
        self.mamba = MambaPoolHost(mamba_info.buffer_info, mem.hicache_ratio, 0, device_capacity=mamba_pool.size,
                                   allocator_type=hpa._get_allocator_type(), layout=self.layout, pin_memory=False)
        self.pools = {"kv": self.host, "swa": self.swa, "mamba": self.mamba}
        group = HostPoolGroup([
            hpa.build_pool_entry(name=PoolName.KV, host_pool=self.host, device_pool=self.kvcache.full_kv_pool,
                                 layer_mapping=full_map, transfer_layer_id_max=layers, is_anchor=True),
            hpa.build_pool_entry(name=PoolName.SWA, host_pool=self.swa, device_pool=self.kvcache.swa_kv_pool,
                                 layer_mapping=swa_map, transfer_layer_id_max=layers,
                                 **hpa._swa_allocation_callbacks(alloc.swa_attn_allocator))])
        group.add_entry(hpa.build_pool_entry(
            name=PoolName.MAMBA, host_pool=self.mamba, device_pool=mamba_pool, layer_mapping=mamba_map,
            transfer_layer_id_max=layers, device_alloc_fn=self.req_pool.mamba_allocator.alloc,
            device_free_fn=self.req_pool.mamba_allocator.free))
        self.ctl = HybridCacheController(
            alloc, group, PAGE, None, load_cache_event=threading.Event(), write_policy=mem.hicache_write_policy,
            io_backend=mem.hicache_io_backend, storage_backend=mem.hicache_storage_backend,
            prefetch_threshold=self.threshold, model_name=self.server_args.served_model_name,
            storage_backend_extra_config=extra, transfer_layer_id_max=layers, enable_storage_metrics=False,
            host_memory_mode=mem.hicache_host_memory_mode)
        self.backend = self.ctl.storage_backend
        self.start_s = time.monotonic() - t0

    def keys(self, tokens: list[int]) -> list[str]:
        """SGLang's page keys of ``tokens`` (full pages)."""
        from sglang.srt.mem_cache.utils import get_storage_hash_str
        return get_storage_hash_str(tokens, None, page_size=PAGE)

    def page_data(self, key: str, pool: str = "kv"):
        """The data of the page with SGLang key ``key`` in host pool
        ``pool`` ("kv", "swa", "mamba"), as its flat page (the pool's dtype;
        the Mamba pool's raw bytes): seeded by the key and the pool, so the
        same in every process and equal for equal keys (as a page's KV or
        a prefix's state is)."""
        torch = self.torch
        g = torch.Generator().manual_seed(int(key[:12], 16) + SEED[pool])
        flat = self.pools[pool].get_data_page(0, flat=True)
        if flat.dtype == torch.uint8:
            return torch.randint(0, 256, (flat.numel(),), generator=g, dtype=torch.uint8)
        return torch.randn(flat.numel(), generator=g, dtype=flat.dtype)

    def fill(self, pool: str, slots, keys: list[str]) -> None:
        """Write each key's page data into host pool ``pool`` at ``slots``
        (the pool's ``page_size`` slots per key)."""
        host = self.pools[pool]
        for j, key in enumerate(keys):
            host.set_from_flat_data_page(int(slots[j * host.page_size]), self.page_data(key, pool))

    def equal(self, pool: str, slots, keys: list[str]) -> list[bool]:
        """Per key: the page at its slot in ``pool`` equals its data."""
        host = self.pools[pool]
        return [bool(self.torch.equal(host.get_data_page(int(slots[j * host.page_size]), flat=True),
                                      self.page_data(key, pool))) for j, key in enumerate(keys)]

    def save(self, name: str, pages: int | None = None, window: int = 0, state: bool = False,
             timeout_s: float = 60) -> dict:
        """Back up the first ``pages`` full pages of prompt ``name`` (all
        by default) through the controller's backup thread; with
        ``window``, that many trailing pages of the SWA pool, with
        ``state`` the Mamba state at its last page (``batch_set_v2``, the
        transfers SGLang's components build for a backup). Returns the
        tokens it reports completed and the pages each sidecar stored."""
        from sglang.srt.mem_cache.hicache_storage import PoolHitPolicy, PoolName, PoolTransfer
        full = len(PROMPTS[name]) // PAGE
        pages = full if pages is None else pages
        tokens = PROMPTS[name][: pages * PAGE]
        keys = self.keys(tokens)
        slots = self.host.alloc(len(tokens))
        self.fill("kv", slots, keys)
        extra, held = [], []
        if window:
            side = self.swa.alloc(window * PAGE)
            self.fill("swa", side, keys[-window:])
            extra.append(PoolTransfer(name=PoolName.SWA, host_indices=side, keys=keys[-window:],
                                      hit_policy=PoolHitPolicy.TRAILING_PAGES))
            held.append((self.swa, side))
        if state:
            slot = self.mamba.alloc(1)
            self.fill("mamba", slot, keys[-1:])
            extra.append(PoolTransfer(name=PoolName.MAMBA, host_indices=slot, keys=keys[-1:],
                                      hit_policy=PoolHitPolicy.TRAILING_PAGES))
            held.append((self.mamba, slot))
        self.ctl.write_storage(slots, tokens, hash_value=keys, extra_pools=extra or None)
        op = self.ctl.ack_backup_queue.get(timeout=timeout_s)
        self.host.free(slots)
        for host, s in held:
            host.free(s)
        return {"tokens": op.completed_tokens,
                "pools": {str(k): v for k, v in op.pool_storage_result.extra_pool_hit_pages.items()}}

    def prefetch_transfers(self) -> list:
        """The sidecar transfers SGLang's SWA and Mamba components build for
        a prefetch: placeholder keys, one per page each pool loads (the
        controller fills the real keys once the hit is known)."""
        from sglang.srt.mem_cache.hicache_storage import PoolHitPolicy, PoolName, PoolTransfer
        return [PoolTransfer(name=PoolName.SWA, keys=["__placeholder__"] * WINDOW,
                             hit_policy=PoolHitPolicy.TRAILING_PAGES),
                PoolTransfer(name=PoolName.MAMBA, keys=["__placeholder__"], hit_policy=PoolHitPolicy.TRAILING_PAGES)]

    def prefetch(self, name: str, rid: str, timeout_s: float = 60, sentinel: float | None = None,
                 sidecars: bool = False) -> dict:
        """Prefetch prompt ``name`` the way the radix tree does: the prefetch
        thread's hit query (with ``sidecars``, batch_exists_v2 with the SWA
        window and the Mamba state), then host slots for the hit through
        the controller's ``allocate_storage_hit`` (and the sidecars' staging
        slots) handed to the I/O thread; waits for its final ack. Returns
        hit and loaded tokens, whether each loaded page equals the saved
        one, per sidecar the positions of the keys it loaded among the
        prompt's pages and whether each equals the saved one, and the wall
        times."""
        tokens = PROMPTS[name]
        keys = self.keys(tokens)
        t0 = time.monotonic()
        from sglang.srt.mem_cache.base_prefix_cache import CacheRequestHandle
        op = self.ctl.prefetch(CacheRequestHandle(rid, 0), tokens,
                               extra_pools=self.prefetch_transfers() if sidecars else None)
        got = self.ctl.prefetch_hit_queue.get(timeout=timeout_s)
        assert got is op, "another operation's hit answer"
        hit = op.storage_hit_count
        res = {"hit_tokens": hit, "loaded_tokens": 0, "pages_equal": [], "query_s": time.monotonic() - t0}
        if sidecars:
            res["query_pool_hit_pages"] = {str(k): v for k, v in op.query_pool_hit_pages.items()}
        if hit == 0:
            return res
        slots, granted = self.ctl.allocate_storage_hit(op, hit, allow_partial=True, min_tokens=self.threshold,
                                                       evict_host=lambda n: 0)
        if slots is None or granted != hit:
            raise RuntimeError(f"allocate_storage_hit granted {granted} of {hit} tokens")
        if sentinel is not None:
            for p in range(hit // PAGE):
                self.host.set_from_flat_data_page(int(slots[p * PAGE]),
                                                  self.torch.full_like(self.page_data(keys[p]), sentinel))
        staged = []
        for t in op.pool_transfers or []:
            host = self.pools[str(t.name)]
            t.host_indices = host.alloc(min(len(t.keys), hit // PAGE) * host.page_size)
            staged.append(t)
        op.host_indices = slots
        t1 = time.monotonic()
        self.ctl.prefetch_buffer.put(op)
        loaded = 0
        while True:
            ack = self.ctl.ack_prefetch_queue.get(timeout=timeout_s)
            if ack.completed_tokens is not None:
                loaded = ack.completed_tokens
            if getattr(ack, "pool_hits", None):
                res["pool_hits"] = {str(k): v for k, v in ack.pool_hits.items() if v}
            if ack.completed_req:
                break
        res["load_s"] = time.monotonic() - t1
        res["loaded_tokens"] = loaded
        for p in range(hit // PAGE):
            page = self.host.get_data_page(int(slots[p * PAGE]), flat=True)
            if sentinel is not None and p >= loaded // PAGE:
                res.setdefault("untouched", []).append(bool(self.torch.all(page == sentinel)))
            else:
                res["pages_equal"].append(bool(self.torch.equal(page, self.page_data(keys[p]))))
        self.host.free(slots)
        res["sidecars"] = {}
        for t in staged:
            pool = str(t.name)
            res["sidecars"][pool] = {"pages": [keys.index(k) if k in keys else k for k in t.keys],
                                     "equal": self.equal(pool, t.host_indices, list(t.keys))}
            self.pools[pool].free(t.host_indices)
        return res


def mamba_params(temporal=None):
    """SGLang's cache parameters of the model's Mamba2 layers: conv state
    (80, 3) and SSM state (4, 16, 8) per layer, in SGLang's default dtypes
    (conv bfloat16, SSM float32) or with SSM dtype ``temporal``."""
    from sglang.srt.configs.mamba_utils import (Mamba2CacheParams, Mamba2StateDType, Mamba2StateShape,
                                                mamba2_state_dtype)
    shape = Mamba2StateShape.create(tp_world_size=1, intermediate_size=64, n_groups=1, num_heads=4, head_dim=16,
                                    state_size=8, conv_kernel=4)
    dtype = mamba2_state_dtype(None)
    if temporal is not None:
        dtype = Mamba2StateDType(conv=dtype.conv, temporal=temporal)
    return Mamba2CacheParams(shape=shape, layers=MAMBA_LAYERS, dtype=dtype)


def at(e: BaseException) -> str:
    """Where ``e`` was raised, paths relative to site-packages: ``" (file:line
    function)"`` of the innermost frame, preceded by the innermost frame of
    SGLang when that is another one."""
    tb = traceback.extract_tb(e.__traceback__)
    if not tb:
        return ""

    def name(f) -> str:
        return f"{f.filename.split('site-packages/')[-1]}:{f.lineno} {f.name}"

    ours = [f for f in tb if "site-packages/sglang/" in f.filename]
    frames = ([ours[-1]] if ours and ours[-1] is not tb[-1] else []) + [tb[-1]]
    return " (" + " -> ".join(name(f) for f in frames) + ")"


def interface_facts(engine: Engine) -> dict:
    """How OrbitKVStorage sits on the installed SGLang: the class SGLang's
    factory built, its real base, abstract methods left, each method of
    the real HiCacheStorage whose parameters differ in ours, and per host
    pool the backend registered its SGLang class and what names its
    pages (layout, dtype, tokens and bytes per page)."""
    import inspect

    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage

    import orbitkv.sglang as ours
    cls = type(engine.backend)
    differ = []
    for name, fn in inspect.getmembers(HiCacheStorage, inspect.isfunction):
        if name.startswith("_") or name not in cls.__dict__:
            continue
        want = list(inspect.signature(fn).parameters)
        got = list(inspect.signature(getattr(cls, name)).parameters)
        if want != got:
            differ.append(f"{name}{tuple(got)} vs SGLang {tuple(want)}")
    overridden = sorted(n for n, _ in inspect.getmembers(HiCacheStorage, inspect.isfunction)
                        if not n.startswith("_") and n in cls.__dict__)
    pools = {name: {"class": f"{type(p.host).__module__}.{type(p.host).__qualname__}",
                    "same_object": p.host is engine.pools.get(name), "kv_layout": p.kv_layout,
                    "dtype": p.dtype_name + p.dtype_suffix, "page_size": p.page_size, "page_bytes": p.page_bytes}
             for name, p in engine.backend.pools.items()}
    return {"backend_class": f"{cls.__module__}.{cls.__qualname__}",
            "real_base": HiCacheStorage in cls.__mro__ and ours.SGLANG_AVAILABLE,
            "abstract_left": sorted(getattr(cls, "__abstractmethods__", ())),
            "signature_differences": differ, "overridden": overridden,
            "page_get_func": engine.ctl.page_get_func.__name__,
            "page_set_func": engine.ctl.page_set_func.__name__,
            "controller": f"{type(engine.ctl).__module__}.{type(engine.ctl).__qualname__}",
            "layout": engine.layout, "pools": pools, "assembler_error": engine.assembler_error}


def mamba_refusal(engine: Engine) -> str:
    """SGLang's ``MambaPoolHost`` over the model's Mamba pool on the
    ``layer_first`` layout (unpinned): "built", or the exception."""
    from sglang.srt.mem_cache.pool_host.mamba import MambaPoolHost
    (info,) = engine.req_pool.mamba_pool.get_device_pool_infos()
    try:
        MambaPoolHost(info.buffer_info, 1.0, 0, device_capacity=engine.req_pool.mamba_pool.size,
                      layout="layer_first", pin_memory=False)
        return "built"
    except Exception as e:
        return f"{type(e).__name__}: {e}" + at(e)


def mamba_namespaces(engine: Engine) -> dict:
    """The namespace OrbitKVStorage gives SGLang's ``MambaPoolHost`` of the
    model's Mamba layers, for the registered pool ("registered") and three
    more: SSM states of dtype bfloat16 and float16 (the same bytes per
    state), and the registered pool's dtypes with SGLang's n-gram slot side
    state registered (``HybridReqToTokenPool(ngram_context_len=4)``: 4
    int64 per state). Per pool: the namespace (hex), the page's bytes and
    its staging page's (64-byte multiple)."""
    import torch
    from sglang.srt.mem_cache.memory_pool import HybridReqToTokenPool, MambaPool
    from sglang.srt.mem_cache.pool_host.mamba import MambaPoolHost

    from orbitkv.sglang.pool import PoolMemory
    registered = engine.backend.pools["mamba"]
    out = {"registered": {"namespace": registered.ns.hex(), "page_bytes": registered.page_bytes,
                          "staging_bytes": registered.buf.page_bytes}}
    devices = {str(dt).replace("torch.", ""): MambaPool(size=2, spec_state_size=0, cache_params=mamba_params(dt),
                                                        mamba_layer_ids=MAMBA_LAYERS, device="cpu")
               for dt in (torch.bfloat16, torch.float16)}
    devices["ngram"] = HybridReqToTokenPool(size=2, mamba_size=2, mamba_spec_state_size=2, max_context_len=8 * PAGE,
                                            device="cpu", enable_memory_saver=False, cache_params=mamba_params(),
                                            mamba_layer_ids=MAMBA_LAYERS, enable_mamba_extra_buffer=False,
                                            ngram_context_len=4).mamba_pool
    for name, device in devices.items():
        (info,) = device.get_device_pool_infos()
        host = MambaPoolHost(info.buffer_info, 1.0, 0, device_capacity=device.size, layout=engine.layout,
                             pin_memory=False)
        pool = PoolMemory("mamba", host, 1)
        out[name] = {"namespace": engine.backend._namespace(pool).hex(), "page_bytes": pool.page_bytes,
                     "staging_bytes": pool.buf.page_bytes}
    return out


def pools_v2(engine: Engine) -> dict:
    """The v2 pool API called directly with SGLang's own types on the SWA
    and Mamba host pools: per pool, the "shared" prompt's pages set, then
    got back into other slots with a key never stored after them (per-page
    results, bytes equal); a Mamba state stored under a page no KV pool
    holds, and ``batch_exists`` of that page; and batch_exists_v2 answers
    read the way SGLang reads them (all-pages on the SWA pool, for
    "shared" and for "swa_gap", whose window ``save`` stored for its first
    2 pages only; the prefetch's placeholder transfers of both pools; a
    pool never registered)."""
    from sglang.srt.mem_cache.hicache_storage import PoolName, PoolTransfer
    b = engine.backend
    keys = engine.keys(PROMPTS["shared"])
    never = engine.keys([1] * PAGE)[0]
    out: dict = {"pages": len(keys)}
    for name, pool in (("swa", PoolName.SWA), ("mamba", PoolName.MAMBA)):
        host = engine.pools[name]
        src, dst = host.alloc(len(keys) * host.page_size), host.alloc((len(keys) + 1) * host.page_size)
        engine.fill(name, src, keys)
        set_r = b.batch_set_v2([PoolTransfer(name=pool, host_indices=src, keys=keys)])
        get_r = b.batch_get_v2([PoolTransfer(name=pool, host_indices=dst, keys=keys + [never])])
        out[name] = {"set": set_r.get(pool), "get": get_r.get(pool), "equal": engine.equal(name, dst, keys)}
        host.free(src)
        host.free(dst)
    # A page only a sidecar holds: a prompt of its own, its state stored.
    alone = engine.keys([2] * PAGE)
    slot = engine.mamba.alloc(1)
    engine.fill("mamba", slot, alone)
    out["sidecar_only"] = {"set": b.batch_set_v2([PoolTransfer(name=PoolName.MAMBA, host_indices=slot,
                                                              keys=alone)]).get(PoolName.MAMBA),
                           "kv_exists": b.batch_exists(alone)}
    engine.mamba.free(slot)
    ex_all = b.batch_exists_v2(keys, [PoolTransfer(name=PoolName.SWA, keys=keys)])
    gap = engine.keys(PROMPTS["swa_gap"])  # its window stored for pages 1-2 only
    ex_cut = b.batch_exists_v2(gap, [PoolTransfer(name=PoolName.SWA, keys=gap)])
    ex_trailing = b.batch_exists_v2(keys, engine.prefetch_transfers())
    ex_missing = b.batch_exists_v2(keys, [PoolTransfer(name=PoolName.INDEXER, keys=keys)])
    out.update(exists_all_pages=[ex_all.kv_hit_pages, ex_all.extra_pool_hit_pages.get(PoolName.KV),
                                 ex_all.extra_pool_hit_pages.get(PoolName.SWA)],
               exists_all_pages_cut=[ex_cut.kv_hit_pages, list(ex_cut.restorable_prefix_pages or []),
                                     {str(k): v for k, v in ex_cut.extra_pool_hit_pages.items()}],
               exists_trailing=[ex_trailing.kv_hit_pages, list(ex_trailing.restorable_prefix_pages or []),
                                {str(k): v for k, v in ex_trailing.extra_pool_hit_pages.items()}],
               exists_unregistered_pool=ex_missing.kv_hit_pages)
    return out


def bad_config(engine: Engine, sock: str, tmp: str) -> dict:
    """SGLang's factory on bad OrbitKV settings: an unknown ``orbitkv.*``
    key, and a socket no Manager serves. Each must raise at construction;
    returns the error text of each (or "no error")."""
    import dataclasses

    from sglang.srt.mem_cache.storage.backend_factory import StorageBackendFactory
    out = {}
    dead = os.path.join(tmp, "nobody.sock")
    for name, extra in (("unknown_key", extra_config(sock, "r1", **{"orbitkv.bootstrap_sokcet": sock})),
                        ("dead_socket", extra_config(dead, "r1"))):
        cfg = dataclasses.replace(engine.ctl.storage_config, extra_config=extra)
        t0 = time.monotonic()
        try:
            StorageBackendFactory.create_backend("dynamic", cfg, engine.host)
            out[name] = "no error"
        except Exception as e:
            out[name] = f"{type(e).__name__}: {e}"
        out[name + "_s"] = time.monotonic() - t0
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", required=True, choices=("save", "warm", "other", "kill"))
    ap.add_argument("--socket", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", required=True, help="directory for the model config (created if missing)")
    ap.add_argument("--revision", default="r1")
    a = ap.parse_args()
    res: dict = {"role": a.role, "pid": os.getpid()}
    try:
        write_model_config(a.model)
        extra = extra_config(a.socket, a.revision, **({"orbitkv.load_timeout_s": 10,
                                                        "orbitkv.reconnect_interval_s": 0.2}
                                                       if a.role == "kill" else {}))
        res["flags"] = server_flags(a.model, extra)
        eng = Engine(res["flags"])
        import sglang
        res.update(sglang=sglang.__version__, import_s=eng.import_s, start_s=eng.start_s,
                   facts=interface_facts(eng), page_bytes=eng.backend.kv.page_bytes)
        if a.role == "save":
            res["registered_pools"] = sorted(eng.backend.pools)
            res["saved"] = {"shared": [eng.save("shared")]}
            for name, writes in HYBRID_SAVES.items():
                res["saved"][name] = [eng.save(name, pages, window, state) for pages, window, state in writes]
            res["mamba_layer_first"] = mamba_refusal(eng)
            res["mamba_namespaces"] = mamba_namespaces(eng)
        elif a.role == "warm":
            res["prefetch"] = {n: eng.prefetch(n, f"warm-{n}") for n in ("shared", "diverge")}
            res["kv_restored_bytes"] = eng.backend.stats["restored_bytes"]
            # "shared" first: its KV is stored, no window or state of it yet.
            res["hybrid"] = {n: eng.prefetch(n, f"warm-hybrid-{n}", sidecars=True)
                             for n in ("shared", *HYBRID_SAVES)}
            res["pools_v2"] = pools_v2(eng)
        elif a.role == "other":
            res["prefetch"] = {"shared": eng.prefetch("shared", "other-shared")}
            res["bad_config"] = bad_config(eng, a.socket, os.path.dirname(a.out))
        else:
            print("kill: prefetching", flush=True)
            t0 = time.monotonic()
            res["prefetch"] = {"shared": eng.prefetch("shared", "kill-shared", sentinel=-7.0)}
            res["dead_manager_s"] = time.monotonic() - t0
            print("kill: prefetch returned", flush=True)
            deadline = time.monotonic() + 60
            saved = 0
            while time.monotonic() < deadline and saved == 0:
                saved = eng.save("shared", timeout_s=30)["tokens"]
                if saved == 0:
                    time.sleep(0.5)
            res["saved_after_restart"] = saved
            res["after_restart"] = eng.prefetch("shared", "kill-again")
        res["stats"] = dict(eng.backend.stats)
        res["epochs"] = list(eng.backend.session.epochs)
        res["ok"] = True
    except Exception as e:
        res["ok"] = False
        res["error"] = f"{type(e).__name__}: {e}"
        res["traceback"] = traceback.format_exc()
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1, default=str)
    sys.stdout.flush()
    os._exit(0 if res["ok"] else 1)  # the controller's threads are daemons; do not wait on them


if __name__ == "__main__":
    main()
