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

import ctypes
import threading
import weakref
from typing import Any

from ..buffer import EngineBuffer

__all__ = ["kv_cache_buffer", "find_buffer", "view_address", "block_dim", "block_bytes"]

_lock = threading.Lock()
# buffer -> base address of its Python mapping (EngineBuffer.memoryview()).
# EngineBuffer.address is liborbitkv's own mapping of the same memfd, a
# different address: tensors built over memoryview() live at this one.
_buffers: "weakref.WeakKeyDictionary[EngineBuffer, int]" = weakref.WeakKeyDictionary()


def view_address(buf: EngineBuffer) -> int:
    """Base address of ``buf.memoryview()`` in this process."""
    mv = buf.memoryview()
    try:
        c = (ctypes.c_char * len(mv)).from_buffer(mv)
        addr = ctypes.addressof(c)
        del c
    finally:
        mv.release()
    return addr


def kv_cache_buffer(layers: int, page_bytes: int, page_count: int) -> EngineBuffer:
    """An ``EngineBuffer`` for an engine's paged KV cache, remembered so that
    ``OrbitKVConnector.register_kv_caches`` recognises tensors built over it
    (zero copy). Layer l, block b is ``buf.page(l, b)``. Raises as
    ``EngineBuffer``."""
    buf = EngineBuffer(layers, page_bytes, page_count)
    addr = view_address(buf)
    with _lock:
        _buffers[buf] = addr
    return buf


def find_buffer(address: int) -> tuple[EngineBuffer, int] | None:
    """(buffer, base address of its memoryview) of the remembered, open
    buffer whose Python mapping contains ``address``, else None."""
    with _lock:
        for buf, base in list(_buffers.items()):
            if not buf.closed and base <= address < base + buf.nbytes:
                return buf, base
    return None


def block_dim(t: Any) -> int:
    """The block dimension of a vLLM per-layer KV tensor: 1 for the
    ``[2, num_blocks, block_size, heads, head_dim]`` layouts (FlashAttention,
    CPU), else 0 (``[num_blocks, ...]``: FlashInfer, MLA, the test engine)."""
    return 1 if t.dim() >= 5 and t.shape[0] == 2 else 0


def block_bytes(t: Any) -> int:
    """Bytes of one block of one layer of tensor ``t``."""
    return t.select(block_dim(t), 0).numel() * t.element_size()
