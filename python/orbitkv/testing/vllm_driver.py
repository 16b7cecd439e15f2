"""Drive ``OrbitKVConnector`` the way vLLM v1's scheduler and worker do.

Stand-ins carry the fields of vLLM's objects that the connector reads
(``Request``, ``KVCacheBlocks``, ``SchedulerOutput`` with ``NewRequestData``
and ``CachedRequestData``, ``VllmConfig``). Per request (one at a time):

1. scheduler: ``get_num_new_matched_tokens(request, 0)`` (asked again while
   it answers None), allocate blocks, ``update_state_after_alloc``;
2. each step (prefill one block per step - chunked prefill with a 16-token
   budget - then one token per step): ``build_connector_meta``; worker:
   ``bind_connector_metadata``, ``start_load_kv``, per layer
   ``wait_for_layer_load`` before the layer reads its cache and
   ``save_kv_layer`` after it writes it, ``wait_for_save``,
   ``get_finished``, ``get_block_ids_with_load_errors``,
   ``build_connector_worker_meta`` (handed to the scheduler's
   ``update_connector_output``), ``clear_connector_metadata``;
3. load errors: vLLM's recompute policy - the step's output is discarded and
   ``num_computed_tokens`` goes back to the first failed block, which is
   then computed again;
4. ``request_finished`` and a step carrying ``finished_req_ids``.
"""

from __future__ import annotations

import dataclasses
import time
from types import SimpleNamespace
from typing import Any

from ..vllm import KVConnectorRole, OrbitKVConnector
from .engine import Engine, _digest
from .workload import MODEL_ID

__all__ = ["VllmDriver", "vllm_config"]

LAYOUT = "orbitkv-test-engine-pages-v1"


def vllm_config(socket: str, revision: str, dtype: str, block: int = 16, kv_role: str = "kv_both",
                **extra: Any) -> SimpleNamespace:
    """A ``VllmConfig`` stand-in with the fields the connector reads."""
    cfg = {"orbitkv.bootstrap_socket": socket, "orbitkv.kv_layout": LAYOUT}
    cfg.update(extra)
    return SimpleNamespace(
        model_config=SimpleNamespace(model=MODEL_ID, revision=revision, dtype=dtype),
        cache_config=SimpleNamespace(block_size=block, cache_dtype="auto"),
        parallel_config=SimpleNamespace(tensor_parallel_size=1, pipeline_parallel_size=1, rank=0),
        kv_transfer_config=SimpleNamespace(kv_connector="OrbitKVConnector", kv_role=kv_role,
                                           kv_connector_extra_config=cfg))


@dataclasses.dataclass
class Request:
    request_id: str
    prompt_token_ids: list[int]
    num_computed_tokens: int = 0
    lora_request: Any = None
    cache_salt: Any = None
    mm_features: list = dataclasses.field(default_factory=list)


class KVCacheBlocks:
    def __init__(self, ids: list[int]):
        self._ids = ids

    def get_block_ids(self) -> tuple[list[int], ...]:
        return (list(self._ids),)


def scheduler_output(new: list = (), cached: Any = None, scheduled: dict | None = None,
                     finished: set | None = None) -> SimpleNamespace:
    if cached is None:
        cached = SimpleNamespace(req_ids=[], resumed_req_ids=set(), new_token_ids=[], new_block_ids=[],
                                 num_computed_tokens=[])
    scheduled = scheduled or {}
    return SimpleNamespace(scheduled_new_reqs=list(new), scheduled_cached_reqs=cached,
                           num_scheduled_tokens=scheduled, total_num_scheduled_tokens=sum(scheduled.values()),
                           finished_req_ids=set(finished or ()))


class VllmDriver:
    def __init__(self, engine: Engine):
        a = engine.args
        self.engine = engine
        cfg = vllm_config(a.socket, a.revision, a.dtype, engine.cfg.block_tokens,
                          "kv_consumer" if a.read_only else "kv_both", **{"orbitkv.reconnect_interval_s": a.reconnect_interval},
                          **({"orbitkv.kv_layout": a.kv_layout} if a.kv_layout else {}))
        self.sched = OrbitKVConnector(cfg, KVConnectorRole.SCHEDULER)
        self.worker = OrbitKVConnector(cfg, KVConnectorRole.WORKER)
        self.names = [f"model.layers.{l}.self_attn.attn" for l in range(engine.cfg.layers)]
        self.worker.register_kv_caches({n: engine.model.layer_tensor(l) for l, n in enumerate(self.names)})
        self.load_errors = 0
        self.recomputed_tokens = 0
        self._pending_finish: set[str] = set()

    def _step(self, so: Any, tokens: list[int], start: int, pages: list[int]):
        meta = self.sched.build_connector_meta(so)
        w, eng = self.worker, self.engine
        w.bind_connector_metadata(meta)
        w.start_load_kv(SimpleNamespace(attn_metadata={}, no_compile_layers={}))
        loading = bool(meta.loads)

        def before(l: int) -> None:
            if loading and l == 0:
                eng.emit("load-wait-enter", f"blocks={sum(len(s.block_ids) for s in meta.loads)}")
            w.wait_for_layer_load(self.names[l])
            if loading and l == 0:
                eng.emit("load-wait-return")
                # The engine's own check that it reads no page the Manager
                # may still write: every restore of this step is terminal.
                assert not w._worker._pending, "restores still in flight after wait_for_layer_load"
                if eng.args.corrupt_restored and meta.loads and meta.loads[0].block_ids:
                    if w.stats["restored_blocks"]:
                        eng.corrupt(meta.loads[0].block_ids[0])
                eng.emit("page-read", "layer=0")

        def after(l: int) -> None:
            w.save_kv_layer(self.names[l], eng.model.layer_tensor(l), None)

        logits = eng.model.forward(tokens, start, pages, before, after)
        w.wait_for_save()
        w.get_finished(self._pending_finish)
        self._pending_finish = set()
        errors = w.get_block_ids_with_load_errors()
        self.sched.update_connector_output(SimpleNamespace(kv_connector_worker_meta=w.build_connector_worker_meta()))
        w.clear_connector_metadata()
        return logits, errors

    def generate(self, rid: str, prompt: list[int], max_new: int) -> dict:
        eng, B = self.engine, self.engine.cfg.block_tokens
        t0 = time.monotonic()
        req = Request(rid, list(prompt))
        while True:
            n_ext, load_async = self.sched.get_num_new_matched_tokens(req, 0)
            if n_ext is not None:
                break
            time.sleep(0.01)
        assert not load_async
        pages = eng.alloc(len(prompt) + max_new)
        self.sched.update_state_after_alloc(req, KVCacheBlocks(pages), n_ext)
        req.num_computed_tokens = n_ext
        out: list[int] = []
        ttft, digest, first_step = 0.0, "", True
        while len(out) < max_new:
            seq = prompt + out
            computed = req.num_computed_tokens
            n = eng.chunk(computed, len(seq))
            sched = {rid: n}
            if first_step:
                nr = SimpleNamespace(req_id=rid, prompt_token_ids=list(prompt), block_ids=(list(pages),),
                                     num_computed_tokens=computed, lora_request=None, mm_features=[])
                so = scheduler_output(new=[nr], scheduled=sched)
                first_step = False
            else:
                cached = SimpleNamespace(req_ids=[rid], resumed_req_ids=set(), new_token_ids=[out[-1:]],
                                         new_block_ids=[None], num_computed_tokens=[computed])
                so = scheduler_output(cached=cached, scheduled=sched)
            logits, errors = self._step(so, seq[computed:computed + n], computed, pages)
            bad = [i for i, p in enumerate(pages) if p in errors]
            if bad:
                # vLLM: the step's sampled output is discarded and the request
                # resumes from the first block that failed to load.
                self.load_errors += len(bad)
                back = min(computed, bad[0] * B)
                self.recomputed_tokens += computed + n - back
                eng.emit("load-errors", f"blocks={len(bad)}", f"recompute_from={back}")
                req.num_computed_tokens = back
                continue
            req.num_computed_tokens = computed + n
            if req.num_computed_tokens == len(seq):
                if not out:
                    ttft, digest = time.monotonic() - t0, _digest(logits)
                out.append(int(logits.argmax()))
        self.sched.request_finished(req, pages)
        self.sched.build_connector_meta(scheduler_output(finished={rid}))
        self._pending_finish = {rid}
        eng.release(pages)
        return {"id": rid, "tokens": out, "ttft_s": ttft, "logits_sha256": digest,
                "external_tokens": n_ext}

    def report(self) -> dict:
        w = self.worker.stats
        return {"restored_bytes": w["restored_bytes"], "restored_blocks": w["restored_blocks"],
                "load_error_blocks": self.load_errors, "recomputed_tokens": self.recomputed_tokens,
                "published_blocks": w["published_blocks"], "present_blocks": w["present_blocks"],
                "save_errors": w["save_errors"], "scheduler": self.sched.stats, "worker": w,
                "epochs": sorted(set(self.worker.epochs + self.sched.epochs)),
                "zero_copy": self.worker._worker.mode == "zero-copy"}

    def close(self) -> None:
        self.worker.shutdown()
        self.sched.shutdown()
