"""Where the worker's KV blocks live for the Manager's copies.

Two ways, chosen by ``register_kv_caches``:

* **Zero copy.** The engine allocated its paged KV cache inside an OrbitKV
  ``EngineBuffer`` (``kv_cache_buffer()`` below, used by the test engine and
  by any engine that places its cache in host shared memory): layer l's
  tensor starts at ``buffer.offset(l, 0)`` and block b of it is page b. The
  Manager restores straight into, and publishes straight from, the pages
  the attention reads.
* **Staging.** Any other tensors (vLLM's GPU caches): the worker allocates a
  host ``EngineBuffer`` of ``staging_blocks`` pages; a page holds one
  block of one layer, flattened. Loads land in staging pages and are copied
  into layer l in ``wait_for_layer_load(l)``; saves are copied out in
  ``save_kv_layer`` and published in ``wait_for_save``.

A block's bytes are the layer's block, flattened in the tensor's own
element order, so the byte layout is the engine's: ``orbitkv.kv_layout``
names it in the cache identity.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from ..buffer import EngineBuffer

__all__ = ["kv_cache_buffer", "find_buffer", "block_dim", "block_bytes"]

_lock = threading.Lock()
_buffers: "weakref.WeakSet[EngineBuffer]" = weakref.WeakSet()


def kv_cache_buffer(layers: int, page_bytes: int, page_count: int) -> EngineBuffer:
    """An ``EngineBuffer`` for an engine's paged KV cache, remembered so that
    ``OrbitKVConnector.register_kv_caches`` recognises tensors built over it
    (zero copy). Layer l, block b is ``buf.page(l, b)``. Raises as
    ``EngineBuffer``."""
    buf = EngineBuffer(layers, page_bytes, page_count)
    with _lock:
        _buffers.add(buf)
    return buf


def find_buffer(address: int) -> EngineBuffer | None:
    """The remembered, open buffer whose mapping contains ``address``."""
    with _lock:
        for buf in list(_buffers):
            if not buf.closed and buf.address <= address < buf.address + buf.nbytes:
                return buf
    return None


def block_dim(t: Any) -> int:
    """The block dimension of a vLLM per-layer KV tensor: 1 for the
    ``[2, num_blocks, block_size, heads, head_dim]`` layouts (FlashAttention,
    CPU), else 0 (``[num_blocks, ...]``: FlashInfer, MLA, the test engine)."""
    return 1 if t.dim() >= 5 and t.shape[0] == 2 else 0


def block_bytes(t: Any) -> int:
    """Bytes of one block of one layer of tensor ``t``."""
    return t.select(block_dim(t), 0).numel() * t.element_size()
