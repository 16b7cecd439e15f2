"""Where the worker's KV blocks live for the Manager's copies.

Two ways, chosen by ``register_kv_caches``:

* **Zero copy.** The engine allocated its paged KV cache inside an OrbitKV
  ``EngineBuffer`` (``kv_cache_buffer()`` below, used by the test engine and
  by any engine that places its cache in host shared memory): layer l's
  tensor starts at ``buffer.offset(l, 0)`` and block b of it is page b. The
  Manager restores straight into, and publishes straight from, the pages
  the attention reads.
  vLLM itself is brought there through its connector hook
  ``get_mem_pool_context``: ``KVCacheAllocation`` below places the one
  backing allocation vLLM makes for its KV cache (``torch.zeros(size,
  dtype=int8)`` in ``vllm/v1/worker/utils.py:allocate_kv_cache``) in a
  ``kv_cache_buffer`` when ``kv_cache_geometry`` finds its layout to be
  OrbitKV's (layer-major dense pages); vLLM's own code is not changed.
* **GPU direct.** CUDA tensors laid out as one OrbitKV buffer over one
  base allocation are registered by IPC handle (``orbitkv.vllm.gpudirect``);
  the Manager copies straight from and into the device pages.
* **Staging.** Any other tensors: the worker allocates a host
  ``EngineBuffer`` of ``staging_blocks`` pages; a page holds one block of
  one plane of one layer (``layer_planes``), flattened. Loads land in
  staging pages and are copied into layer l in ``wait_for_layer_load(l)``;
  saves are copied out in ``save_kv_layer`` and published in
  ``wait_for_save``.

A block's bytes are, layer after layer, the layer's block flattened in the
tensor's own element order (for the ``[2, num_blocks, ...]`` layouts: its K
half, then its V half), so the byte layout is the engine's:
``orbitkv.kv_layout`` names it in the cache identity. Every mode registers
the same region layers for the same tensors (one per plane: ``layer_planes``),
so a block published in one mode is restored in any other: the Manager
refuses a block whose layer count differs from the buffer's.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any

from ..buffer import EngineBuffer

__all__ = ["kv_cache_buffer", "find_buffer", "view_address", "block_dim", "block_bytes", "layer_planes",
           "plane_page_bytes", "manager_blocks_view", "kv_cache_geometry", "KVCacheAllocation", "slot_views"]

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


def manager_blocks_view(t: Any, num_blocks: int | None, name: str = "KV tensor") -> Any:
    """``t`` with its block dim (``block_dim``) holding vLLM's manager
    blocks, the ids the scheduler's metadata names. vLLM 0.32 hands
    ``register_kv_caches`` and ``save_kv_layer`` views of *kernel* blocks
    when the attention backend cannot take the configured block size
    (``prepare_kernel_block_sizes`` in vllm/v1/worker/utils.py,
    ``create_kv_cache_views`` in vllm/v1/kv_cache_interface.py): ``num_blocks
    x r`` of them, manager block b being kernel blocks ``b*r .. b*r+r-1``,
    adjacent in the block dim. The result is a view of the same memory
    whose block b is manager block b: the r kernel blocks merged into the
    next dim (``t.view``, the rank kept), or, where that view does not
    exist (a non-contiguous tensor), ``t.unflatten(block_dim, (num_blocks,
    r))``;
    ``t`` itself when ``num_blocks`` is None (unknown) or equals the count.
    Raises ``ValueError`` naming ``name`` when the count is not a multiple
    of ``num_blocks``."""
    if not num_blocks:
        return t
    bd = block_dim(t)
    n = int(t.shape[bd])
    if n == num_blocks:
        return t
    if n < num_blocks or n % num_blocks:
        raise ValueError(f"{name} has {n} blocks in dim {bd}, not a multiple of vLLM's {num_blocks} "
                         "(KVCacheConfig.num_blocks): its blocks cannot be grouped into the scheduler's blocks")
    shape = tuple(t.shape)
    r = n // num_blocks
    try:
        # The r kernel blocks of a manager block merged into the next dim
        # (the same memory; the rank unchanged, so block_dim reads it as
        # before); a view that would need a copy raises instead.
        out = t.view(*shape[:bd], num_blocks, r * shape[bd + 1], *shape[bd + 2:]) if t.dim() > bd + 1 else None
    except RuntimeError:
        out = None
    if out is None:
        out = t.unflatten(bd, (num_blocks, r))
    if block_dim(out) != bd:
        raise ValueError(f"{name}: grouped into {num_blocks} blocks of {r} kernel blocks, its shape "
                         f"{tuple(out.shape)} no longer tells its block dim ({bd}) apart; refused rather than "
                         "misread")
    return out


def layer_planes(t: Any) -> list[Any]:
    """The planes of one layer's KV tensor ``t``, each with its blocks in
    dim 0: ``[t[0], t[1]]`` (the K plane, the V plane, each ``[num_blocks,
    ...]``) for the ``[2, num_blocks, ...]`` layouts (``block_dim`` 1), else
    ``[t]``. Each plane is one OrbitKV region layer, block b its page b; a
    block's bytes are its planes' blocks in order (K then V), the same bytes
    as ``t.select(block_dim(t), b)`` flattened."""
    return [t[0], t[1]] if block_dim(t) == 1 else [t]


def plane_page_bytes(plane: Any) -> int:
    """Bytes of one block of one plane (``layer_planes``): its page."""
    return plane.select(0, 0).numel() * plane.element_size()


def slot_views(kv_caches: dict[str, Any], num_blocks: int) -> tuple[list[Any] | None, str]:
    """The layer slots of a KV cache whose groups overlay one backing
    allocation (vLLM's hybrid KV cache manager; ``orbitkv.vllm.groups``):
    ``([view per slot], "")``, each view a ``uint8 [num_blocks,
    page_bytes]`` tensor over the slot's bytes (block b = row b), slots in
    address order; ``(None, why)`` when the tensors are not laid out so.
    Each layer's block dim (``block_dim``) must hold ``num_blocks`` manager
    blocks of one stride, the page, the same for every layer, with every
    element of block b inside page b.

    Layers are of one slot when they start at the same address (vLLM's
    layer-outer layouts: slot j's pages follow slot j-1's). Slots whose
    pages would overlap are one slot when every layer's block lies within
    one page of the lowest start (vLLM's block-outermost layouts, BLHNC and
    BLNHC: each block holds every layer, ``| blk 0 [ l0 | l1 ] | blk 1 [ l0
    | l1 ] |``): a page is then a whole block of all layers. Any other
    overlap, or a slot whose memory ends before its last page does, is
    refused, the layers named: a page is never another block's bytes."""
    import torch

    layers: list[tuple[int, int, str, Any]] = []   # (start, extent, name, tensor)
    page = 0
    for name, t in kv_caches.items():
        bd = block_dim(t)
        es = t.element_size()
        stride = int(t.stride(bd)) * es
        if int(t.shape[bd]) != num_blocks:
            return None, f"layer {name} has {int(t.shape[bd])} blocks, not vLLM's {num_blocks}"
        extent = es * (1 + sum((int(n) - 1) * int(st) for d, (n, st) in enumerate(zip(t.shape, t.stride()))
                               if d != bd))
        if min(t.stride()) < 0 or extent > stride:
            return None, f"layer {name}: a block spans {extent} B, more than its block stride {stride} B"
        if page and stride != page:
            return None, f"layer {name} has block stride {stride} B, another layer {page} B"
        page = stride
        if int(t.stride(-1)) != 1:
            return None, f"layer {name}: its last dim is strided ({int(t.stride(-1))}), not viewable as bytes"
        layers.append((t.data_ptr(), extent, name, t))
    if page % 64:
        return None, f"block stride {page} B: OrbitKV pages are multiples of 64 B"
    slots: dict[int, tuple[str, Any]] = {}
    for start, _, name, t in layers:
        slots.setdefault(start, (name, t))
    starts = sorted(slots)
    clash = next(((a, b) for a, b in zip(starts, starts[1:]) if b < a + num_blocks * page), None)
    if clash is not None:
        low = starts[0]
        if any(start - low + extent > page for start, extent, _, _ in layers):
            a, b = slots[clash[0]][0], slots[clash[1]][0]
            return None, (f"layers {a} and {b} start {clash[1] - clash[0]} B apart, inside {num_blocks} blocks of "
                          f"{page} B: their pages would overlap")
        starts = [low]   # block-outermost: one page is one whole block
    views = []
    for start in starts:
        name, t = slots[start]
        u = t if t.dtype == torch.uint8 else t.view(torch.uint8)   # the same storage, offsets in bytes
        storage = u.untyped_storage() if hasattr(u, "untyped_storage") else u.storage()   # torch < 2.0: storage()
        short = u.storage_offset() + num_blocks * page - storage.nbytes()
        if short > 0:
            return None, (f"layer {name}: its memory ends {short} B before its page {num_blocks - 1} of {page} B "
                          "does")
        views.append(u.as_strided((num_blocks, page), (page, 1), u.storage_offset()))
    return views, ""


def kv_cache_geometry(kv_cache_config: Any) -> tuple[tuple[int, int, int] | None, int, str]:
    """``((layers, page_bytes, page_count), size, "")`` when vLLM's KV
    cache, as ``kv_cache_config`` (vLLM's ``KVCacheConfig``) plans it, is
    one backing allocation of ``size`` bytes laid out as an OrbitKV buffer:
    layer l, block b at ``(l * page_count + b) * page_bytes``, ``page_bytes``
    a multiple of 64 (vLLM's ``KVCacheTensor`` with offset 0,
    ``block_stride == page_bytes``, ``layer_stride == page_count *
    page_bytes``, ``size == layers * layer_stride``). With several KV cache
    groups vLLM plans one ``KVCacheTensor`` per group, all over the same
    bytes (layer slot l of every group shares them): they must then agree
    in every field, and ``layers`` is the slot count; a single slot may end
    in a tail shorter than a page (``page_count`` then rounds up, the
    buffer is at least ``size`` bytes). Otherwise ``(None, 0, why)``: the
    reason names the field that differs."""
    tensors = list(getattr(kv_cache_config, "kv_cache_tensors", None) or [])
    if not tensors:
        return None, 0, "no KV cache tensors planned"
    t = tensors[0]
    if len(tensors) > 1:
        fields = ("size", "offset", "layer_stride", "block_stride")
        for o in tensors[1:]:
            for f in fields + ("layers",):
                a, b = getattr(t, f, None), getattr(o, f, None)
                if (len(a or ()) != len(b or ())) if f == "layers" else a != b:
                    return None, 0, (f"{len(tensors)} KV cache tensors planned that differ in {f}; zero copy "
                                     "needs one placement shared by every KV cache group")
    layers = len(getattr(t, "layers", ()) or ())
    count_of = getattr(kv_cache_config, "num_blocks_of", None)
    blocks = int(count_of(t)) if callable(count_of) else int(getattr(kv_cache_config, "num_blocks", 0) or 0)
    size, offset = int(getattr(t, "size", 0)), int(getattr(t, "offset", 0))
    page = int(getattr(t, "block_stride", 0) or 0)
    layer_stride = int(getattr(t, "layer_stride", 0) or 0)
    if layers < 1 or blocks < 1 or page < 1:
        return None, 0, f"KVCacheTensor layers {layers}, num_blocks {blocks}, block_stride {page}: want each >= 1"
    if offset != 0:
        return None, 0, f"KVCacheTensor.offset {offset}: want 0"
    if page % 64:
        return None, 0, f"KVCacheTensor.block_stride {page}: want a multiple of 64 (OrbitKV pages)"
    if layer_stride == blocks * page:
        count = blocks
    elif len(tensors) > 1 and layer_stride > blocks * page and (layer_stride % page == 0 or layers == 1):
        count = -(-layer_stride // page)   # the groups' slots end in unused pages (or a tail)
    else:
        return None, 0, (f"KVCacheTensor.layer_stride {layer_stride}: want num_blocks x block_stride "
                         f"= {blocks * page} (layer-major pages)")
    if size != layers * layer_stride:
        return None, 0, f"KVCacheTensor.size {size}: want layers x layer_stride = {layers * layer_stride}"
    return (layers, page, count), size, ""


class KVCacheAllocation:
    """The context ``OrbitKVConnector.get_mem_pool_context`` returns: while
    it is entered, the first ``torch.zeros(size, dtype=torch.int8)`` on the
    CPU (vLLM's KV-cache backing allocation; ``size`` from
    ``kv_cache_geometry``) returns an int8 tensor over a new
    ``kv_cache_buffer(*geometry)`` instead (memfd pages are zero, so the
    result is the same zeros); every other call runs unchanged. It works
    through ``torch.overrides.TorchFunctionMode``, torch's public hook for
    intercepting its functions. ``buffer`` is the ``EngineBuffer`` made (None
    before, or if vLLM made no such call). Raises as ``EngineBuffer`` when
    the buffer cannot be allocated."""

    def __init__(self, geometry: tuple[int, int, int], size: int):
        self.geometry, self.size = geometry, size
        self.buffer: EngineBuffer | None = None
        self._mode: Any = None

    def __enter__(self) -> "KVCacheAllocation":
        import torch
        from torch.overrides import TorchFunctionMode

        outer = self

        class _Place(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                if func is torch.zeros and outer.buffer is None and outer._is_backing(torch, args, kwargs):
                    outer.buffer = kv_cache_buffer(*outer.geometry)
                    return torch.frombuffer(outer.buffer.memoryview(), dtype=torch.int8)[:outer.size]
                return func(*args, **kwargs)

        self._mode = _Place()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        mode, self._mode = self._mode, None
        mode.__exit__(*exc)

    def _is_backing(self, torch: Any, args: tuple, kwargs: dict) -> bool:
        shape = args[0] if len(args) == 1 else args
        if isinstance(shape, (tuple, list)) and len(shape) == 1:
            shape = shape[0]
        if isinstance(shape, bool) or not isinstance(shape, int) or shape != self.size:
            return False
        if kwargs.get("dtype") is not torch.int8 or kwargs.get("out") is not None:
            return False
        device = kwargs.get("device")
        return device is None or torch.device(device).type == "cpu"
