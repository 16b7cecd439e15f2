"""One engine process of ``make e2e-sglang``: real SGLang's HiCache storage
path on the CPU, with ``OrbitKVStorage`` loaded by SGLang itself.

``python -m orbitkv.testing.sglang_real --role ROLE --socket S --out F``
(SGLang's environment, ``build/venv/sglang``; ``PYTHONPATH=python``). What
is SGLang's own code here and what is not:

* SGLang's argument parser turns the flags of docs/adapters.md
  (``--enable-hierarchical-cache --hicache-storage-backend dynamic
  --hicache-storage-backend-extra-config '{...}'``) into ``ServerArgs``,
  published as the process's runtime context (``publish``);
* SGLang's ``MHATokenToKVPool`` (device "cpu"), its
  ``PagedTokenToKVPoolAllocator``, two host pools ``MHATokenToKVPoolHost``
  in a ``HostPoolGroup`` (the KV anchor and a one-layer SWA sidecar, as a
  hybrid model has), and the server's cache controller
  ``HybridCacheController``: its constructor parses the extra config
  (``parse_storage_backend_extra_config``) and attaches the backend
  through ``StorageBackendFactory`` ("dynamic": module path and class
  name) with the sidecar registered by ``register_mem_host_pool_v2``;
  its threads then call ``OrbitKVStorage`` (backup thread:
  ``batch_set_v1``, and ``batch_set_v2`` for a prompt's sliding window;
  prefetch thread: ``batch_exists`` or ``batch_exists_v2``; prefetch I/O
  thread: ``batch_get_v1`` and ``batch_get_v2``); page keys are SGLang's
  ``get_storage_hash_str``;
* not SGLang's: the host pool is built with ``pin_memory=False`` (SGLang's
  assembler pins it with cudaHostRegister, which needs a GPU; the
  exception is reported as ``assembler_error``), and the radix tree's part
  of a prefetch (allocating host slots for the hit, handing the operation
  to the I/O thread) is done here as ``UnifiedRadixCache`` does it. No
  model runs.

Roles (each one process, so a warm role's SGLang state starts empty):

* ``save`` - backs up the "shared" prompt, and the "hybrid" one with its
  sliding window (KV seeded by each page's key);
* ``warm`` - prefetches "shared", "diverge" and "hybrid" (with its
  window): hit tokens, loaded tokens, the bytes compared with what
  ``save`` wrote; more v2 calls made directly with SGLang's own
  ``PoolTransfer`` types on the sidecar pool;
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
WINDOW = 2  # pages of the sliding-window sidecar a hybrid prompt keeps

#: The prompts: token ids. "shared" is 4 full pages (an exact multiple of
#: the page size); "diverge" shares its first 2.5 pages with "shared" and
#: differs mid-page 3, so only 2 pages may hit.
PROMPTS = {
    "shared": [(i * 7 + 3) % 1000 for i in range(4 * PAGE)],
    "diverge": [(i * 7 + 3) % 1000 for i in range(2 * PAGE + PAGE // 2)] + [999] * (PAGE + PAGE // 2),
    "hybrid": [(i * 11 + 5) % 1000 for i in range(4 * PAGE)],
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
            "--enable-hierarchical-cache", "--hicache-mem-layout", "layer_first",
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
        from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
        from sglang.srt.mem_cache.hicache_storage import PoolName
        from sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller import HybridCacheController
        from sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler import build_kv_only_group, build_pool_entry
        from sglang.srt.mem_cache.pool_host.group import HostPoolGroup
        from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
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
        self.device = self.device_pool(LAYERS)
        # The sidecar of a hybrid model (one sliding-window layer): its own
        # device and host pools, an entry of the host pool group, so the
        # controller registers it with register_mem_host_pool_v2.
        self.side_device = self.device_pool(1)
        alloc = PagedTokenToKVPoolAllocator(SLOTS, PAGE, torch.float32, "cpu", self.device, False)
        self.assembler_error = ""
        try:
            build_kv_only_group(page_size=PAGE, kv_pool=self.device, full_layer_mapping={0: 0, 1: 1}, use_mla=False)
        except Exception as e:  # the assembler pins host memory with cudaHostRegister
            self.assembler_error = f"{type(e).__name__}: {e}"
        self.host = self.host_pool(MHATokenToKVPoolHost, mem.hicache_ratio, self.device)
        self.side = self.host_pool(MHATokenToKVPoolHost, mem.hicache_ratio, self.side_device)
        layers = LAYERS + 1
        group = HostPoolGroup([
            build_pool_entry(name=PoolName.KV, host_pool=self.host, device_pool=self.device,
                             layer_mapping={i: i for i in range(LAYERS)}, transfer_layer_id_max=layers,
                             is_anchor=True),
            build_pool_entry(name=PoolName.SWA, host_pool=self.side, device_pool=self.side_device,
                             layer_mapping={LAYERS: 0}, transfer_layer_id_max=layers)])
        extra, threshold, *_ = HybridCacheController.parse_storage_backend_extra_config(
            mem.hicache_storage_backend_extra_config)
        self.ctl = HybridCacheController(
            alloc, group, PAGE, None, threading.Event(), write_policy=mem.hicache_write_policy,
            io_backend=mem.hicache_io_backend, storage_backend=mem.hicache_storage_backend,
            prefetch_threshold=threshold, model_name=self.server_args.served_model_name,
            storage_backend_extra_config=extra, transfer_layer_id_max=layers)
        self.backend = self.ctl.storage_backend
        self.start_s = time.monotonic() - t0

    def device_pool(self, layers: int):
        """SGLang's device KV pool of ``layers`` layers, on the CPU."""
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool
        return MHATokenToKVPool(size=SLOTS, page_size=PAGE, dtype=self.torch.float32, head_num=HEADS,
                                head_dim=DIM, layer_num=layers, device="cpu", enable_memory_saver=False)

    def host_pool(self, cls, ratio: float, d):
        """SGLang's host pool class ``cls`` over device pool ``d``, unpinned."""
        return cls(d.get_device_pool_infos()[0].buffer_info, ratio, 0, PAGE, "layer_first", pin_memory=False,
                   device="cpu", device_capacity_tokens=d.size if d.host_capacity_tokens is None
                   else d.host_capacity_tokens, start_layer=d.start_layer, end_layer=d.end_layer,
                   write_back_staging=d.hicache_write_back_staging)

    def keys(self, tokens: list[int]) -> list[str]:
        """SGLang's page keys of ``tokens`` (full pages)."""
        from sglang.srt.mem_cache.utils import get_storage_hash_str
        return get_storage_hash_str(tokens, None, page_size=PAGE)

    def page_data(self, key: str, pool=None):
        """The KV of the page with SGLang key ``key`` in host pool ``pool``
        (the KV pool by default), as its flat page: seeded by the key and
        the pool, so the same in every process and equal for equal keys (as
        a page's KV is)."""
        pool = self.host if pool is None else pool
        g = self.torch.Generator().manual_seed(int(key[:12], 16) + (0 if pool is self.host else 1))
        flat = pool.get_data_page(0, flat=True)
        return self.torch.randn(flat.numel(), generator=g, dtype=flat.dtype)

    def window(self, keys: list[str], slots=None):
        """The sliding-window sidecar transfer of a prompt: its last
        ``WINDOW`` pages (SGLang's trailing-pages policy)."""
        from sglang.srt.mem_cache.hicache_storage import PoolHitPolicy, PoolName, PoolTransfer
        return [PoolTransfer(name=PoolName.SWA, host_indices=slots, keys=keys[-WINDOW:],
                             hit_policy=PoolHitPolicy.TRAILING_PAGES)]

    def save(self, name: str, timeout_s: float = 60, sidecar: bool = False) -> dict:
        """Back up prompt ``name``'s full pages through the controller's
        backup thread (with ``sidecar``, its last WINDOW pages of the SWA
        pool too: batch_set_v2); returns the tokens it reports completed
        and, with ``sidecar``, the pages each pool stored."""
        tokens = PROMPTS[name][: len(PROMPTS[name]) // PAGE * PAGE]
        slots = self.host.alloc(len(tokens))
        keys = self.keys(tokens)
        for p, key in enumerate(keys):
            self.host.set_from_flat_data_page(int(slots[p * PAGE]), self.page_data(key))
        extra = None
        if sidecar:
            side = self.side.alloc(WINDOW * PAGE)
            for j, key in enumerate(keys[-WINDOW:]):
                self.side.set_from_flat_data_page(int(side[j * PAGE]), self.page_data(key, self.side))
            extra = self.window(keys, side)
        self.ctl.write_storage(slots, tokens, hash_value=keys, extra_pools=extra)
        op = self.ctl.ack_backup_queue.get(timeout=timeout_s)
        self.host.free(slots)
        if sidecar:
            self.side.free(side)
        return {"tokens": op.completed_tokens,
                "pools": {str(k): v for k, v in op.pool_storage_result.extra_pool_hit_pages.items()}}

    def prefetch(self, name: str, rid: str, timeout_s: float = 60, sentinel: float | None = None,
                 sidecar: bool = False) -> dict:
        """Prefetch prompt ``name`` the way the radix tree does: the prefetch
        thread's hit query (with ``sidecar``, batch_exists_v2 over the SWA
        window), then host slots for the hit (and the window) handed to the
        I/O thread; waits for its final ack. Returns hit and loaded tokens,
        whether each loaded page equals the saved one, and the wall times."""
        tokens = PROMPTS[name]
        keys = self.keys(tokens)
        t0 = time.monotonic()
        from sglang.srt.mem_cache.base_prefix_cache import CacheRequestHandle
        op = self.ctl.prefetch(CacheRequestHandle(rid, 0), tokens,
                               extra_pools=self.window(keys) if sidecar else None)
        got = self.ctl.prefetch_hit_queue.get(timeout=timeout_s)
        assert got is op, "another operation's hit answer"
        hit = op.storage_hit_count
        res = {"hit_tokens": hit, "loaded_tokens": 0, "pages_equal": [], "query_s": time.monotonic() - t0}
        if hit == 0:
            return res
        slots = self.host.alloc(hit)
        if sentinel is not None:
            for p in range(hit // PAGE):
                self.host.set_from_flat_data_page(int(slots[p * PAGE]),
                                                  self.torch.full_like(self.page_data(keys[p]), sentinel))
        op.host_indices = slots
        side = None
        if sidecar:
            res["query_pool_hit_pages"] = {str(k): v for k, v in op.query_pool_hit_pages.items()}
            side = self.side.alloc(WINDOW * PAGE)
            for t in op.pool_transfers:
                t.host_indices = side
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
        if side is not None:
            res["window_equal"] = [bool(self.torch.equal(self.side.get_data_page(int(side[j * PAGE]), flat=True),
                                                         self.page_data(key, self.side)))
                                   for j, key in enumerate(op.pool_transfers[0].keys)]
            self.side.free(side)
        return res


def interface_facts(engine: Engine) -> dict:
    """How OrbitKVStorage sits on the installed SGLang: the class SGLang's
    factory built, its real base, abstract methods left, and each method of
    the real HiCacheStorage whose parameters differ in ours."""
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
    return {"backend_class": f"{cls.__module__}.{cls.__qualname__}",
            "real_base": HiCacheStorage in cls.__mro__ and ours.SGLANG_AVAILABLE,
            "abstract_left": sorted(getattr(cls, "__abstractmethods__", ())),
            "signature_differences": differ, "overridden": overridden,
            "page_get_func": engine.ctl.page_get_func.__name__,
            "page_set_func": engine.ctl.page_set_func.__name__,
            "controller": f"{type(engine.ctl).__module__}.{type(engine.ctl).__qualname__}",
            "host_pool": f"{type(engine.host).__module__}.{type(engine.host).__qualname__}",
            "assembler_error": engine.assembler_error}


def pools_v2(engine: Engine) -> dict:
    """The v2 pool API called directly with SGLang's own types on the SWA
    sidecar host pool: pages set and got back into other slots, and
    batch_exists_v2 answers read the way SGLang reads them (all-pages,
    trailing, a pool never registered)."""
    from sglang.srt.mem_cache.hicache_storage import PoolHitPolicy, PoolName, PoolTransfer, count_pool_hits
    torch = engine.torch
    side = engine.side
    b = engine.backend
    tokens = PROMPTS["shared"]
    keys = engine.keys(tokens)
    src, dst = side.alloc(len(tokens)), side.alloc(len(tokens))
    side.kv_buffer.copy_(torch.randn(side.kv_buffer.shape, generator=torch.Generator().manual_seed(7)))
    set_r = b.batch_set_v2([PoolTransfer(name=PoolName.SWA, host_indices=src, keys=keys)])
    get_r = b.batch_get_v2([PoolTransfer(name=PoolName.SWA, host_indices=dst, keys=keys)])
    equal = all(torch.equal(side.get_data_page(int(src[p * PAGE]), flat=True),
                            side.get_data_page(int(dst[p * PAGE]), flat=True)) for p in range(len(keys)))
    last = [PoolTransfer(name=PoolName.SWA, keys=keys[-1:], hit_policy=PoolHitPolicy.TRAILING_PAGES)]
    ex_all = b.batch_exists_v2(keys, [PoolTransfer(name=PoolName.SWA, keys=keys)])
    ex_trailing = b.batch_exists_v2(keys, last)
    ex_missing = b.batch_exists_v2(keys, [PoolTransfer(name=PoolName.MAMBA, keys=keys)])
    return {"set": count_pool_hits(set_r), "get": count_pool_hits(get_r), "bytes_equal": equal, "pages": len(keys),
            "exists_all_pages": [ex_all.kv_hit_pages, ex_all.extra_pool_hit_pages.get(PoolName.KV),
                                 ex_all.extra_pool_hit_pages.get(PoolName.SWA)],
            "exists_trailing": [ex_trailing.kv_hit_pages, list(ex_trailing.restorable_prefix_pages or [])],
            "exists_unregistered_pool": ex_missing.kv_hit_pages}


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
            res["saved"] = {"shared": eng.save("shared"), "hybrid": eng.save("hybrid", sidecar=True)}
        elif a.role == "warm":
            res["prefetch"] = {n: eng.prefetch(n, f"warm-{n}") for n in ("shared", "diverge")}
            res["kv_restored_bytes"] = eng.backend.stats["restored_bytes"]
            res["hybrid"] = eng.prefetch("hybrid", "warm-hybrid", sidecar=True)
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
