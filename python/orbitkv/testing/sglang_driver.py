"""Drive ``OrbitKVStorage`` the way SGLang's HiCache drives a storage backend.

The engine's paged KV buffer plays SGLang's host pool (on a CPU engine the
host and device pools are the same memory): a ``HostPool`` stand-in with
``page_size``, ``dtype``, ``layout`` and ``orbitkv_buffer``. Per request:

1. prefetch: page keys of the prompt (SGLang's chained SHA-256 page hashes)
   -> ``batch_exists(keys)`` -> ``batch_get_v1(keys[:hit], host_indices)``
   (token slots of the request's pages); the leading successful pages count
   as computed, the engine reads them only after the call returned;
2. prefill the rest (one block per step) and decode;
3. write-through backup: ``batch_set_v1`` of the full prompt pages that were
   not fetched, with per-page success counted.
"""

from __future__ import annotations

import hashlib
import time
from types import SimpleNamespace

import torch

from ..sglang import OrbitKVStorage
from .engine import Engine, _digest
from .workload import MODEL_ID

__all__ = ["SGLangDriver", "page_keys", "storage_config"]


def page_keys(tokens: list[int], page_size: int) -> list[str]:
    """SGLang-style page keys: hex SHA-256 of (previous key, page tokens as
    little-endian uint32), one per full page."""
    keys: list[str] = []
    prior = None
    for i in range(len(tokens) // page_size):
        h = hashlib.sha256()
        if prior is not None:
            h.update(bytes.fromhex(prior))
        for t in tokens[i * page_size:(i + 1) * page_size]:
            h.update(int(t).to_bytes(4, "little"))
        prior = h.hexdigest()
        keys.append(prior)
    return keys


def storage_config(socket: str, revision: str, **extra) -> SimpleNamespace:
    """A ``HiCacheStorageConfig`` stand-in."""
    cfg = {"orbitkv.bootstrap_socket": socket, "orbitkv.model_revision": revision}
    cfg.update(extra)
    return SimpleNamespace(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                           is_mla_model=False, enable_storage_metrics=False, is_page_first_layout=False,
                           model_name=MODEL_ID, extra_config=cfg)


class FlatHostPool:
    """A host pool without an OrbitKV buffer (``--staging``), with SGLang's
    ``get_data_page(index, flat=True)`` / ``set_from_flat_data_page(index,
    data)``: a page's data is every layer's page of the engine's KV memory,
    layer after layer, flattened."""

    def __init__(self, engine: Engine, dtype: str):
        self.engine = engine
        self.page_size = engine.cfg.block_tokens
        self.dtype, self.layout = dtype, "layer_first"

    def get_data_page(self, index: int, flat: bool = True) -> torch.Tensor:
        page = int(index) // self.page_size
        return torch.cat([self.engine.model.layer_tensor(l)[page].reshape(-1).clone()
                          for l in range(self.engine.cfg.layers)])

    def set_from_flat_data_page(self, index: int, data: torch.Tensor) -> None:
        page = int(index) // self.page_size
        per = data.numel() // self.engine.cfg.layers
        for l in range(self.engine.cfg.layers):
            t = self.engine.model.layer_tensor(l)[page]
            t.copy_(data[l * per:(l + 1) * per].view(t.shape))


class SGLangDriver:
    def __init__(self, engine: Engine):
        a = engine.args
        self.engine = engine
        B = engine.cfg.block_tokens
        if a.staging:
            self.host = FlatHostPool(engine, a.dtype)
        else:
            self.host = SimpleNamespace(page_size=B, dtype=a.dtype, layout="layer_first",
                                        orbitkv_buffer=engine.buf)
        self.storage = OrbitKVStorage(storage_config(a.socket, a.revision,
                                                     **{"orbitkv.reconnect_interval_s": a.reconnect_interval}),
                                      {})
        self.storage.register_mem_pool_host(self.host)

    def generate(self, rid: str, prompt: list[int], max_new: int) -> dict:
        eng, B = self.engine, self.engine.cfg.block_tokens
        t0 = time.monotonic()
        keys = page_keys(prompt, B)
        limit = (len(prompt) - 1) // B
        pages = eng.alloc(len(prompt) + max_new)
        fetched = 0
        hit = self.storage.batch_exists(keys[:limit]) if limit else 0
        if hit:
            slots = torch.tensor([p * B + i for p in pages[:hit] for i in range(B)], dtype=torch.int64)
            eng.emit("load-wait-enter", f"blocks={hit}")
            ok = self.storage.batch_get_v1(keys[:hit], slots)
            eng.emit("load-wait-return")
            fetched = ok.index(False) if False in ok else len(ok)
            if eng.args.corrupt_restored and fetched:
                eng.corrupt(pages[0])
            eng.emit("page-read", "layer=0")
        computed = fetched * B
        out: list[int] = []
        ttft, digest, backed_up = 0.0, "", False
        while len(out) < max_new:
            seq = prompt + out
            n = eng.chunk(computed, len(seq))
            logits = eng.model.forward(seq[computed:computed + n], computed, pages)
            computed += n
            if not backed_up and computed >= len(prompt) and not eng.args.read_only:
                backed_up = True
                full = len(prompt) // B
                if full > fetched:
                    slots = torch.tensor([p * B + i for p in pages[fetched:full] for i in range(B)],
                                         dtype=torch.int64)
                    self.storage.batch_set_v1(keys[fetched:full], slots)
            if computed == len(seq):
                if not out:
                    ttft, digest = time.monotonic() - t0, _digest(logits)
                out.append(int(logits.argmax()))
        eng.release(pages)
        return {"id": rid, "tokens": out, "ttft_s": ttft, "logits_sha256": digest, "external_tokens": fetched * B}

    def report(self) -> dict:
        s = self.storage.stats
        return {"restored_bytes": s["restored_bytes"], "restored_blocks": s["restored_pages"],
                "load_error_blocks": s["get_failed_pages"], "published_blocks": s["published_pages"],
                "present_blocks": s["present_pages"], "save_errors": s["set_failed_pages"], "storage": s,
                "epochs": sorted(set(self.storage.session.epochs)), "zero_copy": self.storage.zero_copy}

    def close(self) -> None:
        self.storage.close()
