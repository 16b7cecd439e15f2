"""GPU direct: vLLM's CUDA KV cache registered with the Manager by IPC handle.

When the per-layer KV tensors vLLM hands to ``register_kv_caches`` are CUDA
tensors laid out as an OrbitKV buffer over one base allocation, the worker
registers them as ONE ``orbitkv.cuda.CudaRegion`` (legacy IPC handle of the
allocation, the device by UUID, the region's offset inside the allocation)
and publishes from and restores into vLLM's block ids as pages: the Manager
(``--copy-backend cuda``) copies device memory directly, with no staging
buffer and no torch copies. No tensor is pickled: the geometry comes from
the tensors' ``data_ptr``, ``shape``, ``element_size`` and
``is_contiguous``, and only the region's bytes travel.

The layout that goes direct (``direct_layout``): region layer j, page b at
byte ``(j * page_count + b) * page_bytes`` from the region's start, where
the region layers are the layers' planes in order (``kvbuffer.layer_planes``):

* a ``[num_blocks, ...]`` tensor (block dim 0: vLLM 0.32's per-layer
  ``[B, H, N, C]`` views, FlashInfer, MLA) is one region layer, its page one
  block of that layer;
* a ``[2, num_blocks, ...]`` tensor (block dim 1: the FlashAttention layout)
  is two region layers, its K plane then its V plane, page = half a block.

The block bytes equal staging mode's for the same tensors: staging flattens
``t.select(block_dim, b)`` per layer, layers in order, which for a
contiguous tensor is the block's K half then its V half, the same bytes as
the two planes' pages in order. Staging registers the same planes as region
layers (``kvbuffer.layer_planes``), so the Manager's per-block layer count
matches too, and the cache identity (``orbitkv.kv_layout``) is the same in
every mode: a block published GPU-direct restores into a staged worker and
back. (A distinct ``kv_layout`` for this mode would not work anyway: the
scheduler, which looks blocks up under the identity, cannot know which mode
a worker fell into.)

Anything else goes to staging, the reason logged: a tensor not contiguous
(its element order is not its memory order, so its pages would not be
staging's bytes), layers whose planes are not consecutive in one range,
block dims or page sizes or block counts that differ between layers, a
driver that gives no IPC handle (VMM memory from expandable segments or
vLLM's CuMem pool: ``cuIpcGetMemHandle`` refuses it), and a Manager that
refuses CUDA memory (``--copy-backend host``).

vLLM 0.32 (the supported series), read in its wheel: ``allocate_kv_cache``
(vllm/v1/worker/utils.py) makes ONE ``torch.zeros(size, dtype=torch.int8,
device=device)`` backing allocation for every ``KVCacheTensor`` of the plan
(it asserts they share one size) and views each layer in it with
``create_kv_cache_views`` (vllm/v1/kv_cache_interface.py, ``torch.as_strided``
at ``offset + l * layer_stride + b * block_stride``); ``GPUModelRunner.
initialize_kv_cache`` (vllm/v1/worker/gpu_model_runner.py) calls it inside
the connector's ``get_mem_pool_context`` (``Worker.initialize_from_config``,
vllm/v1/worker/gpu_worker.py) and then hands those manager-block views to
``register_kv_caches``. So on a GPU the layers already share one base
allocation; with a layer-outermost layout (``LBHNC``) the views are
contiguous and consecutive and go direct; nothing needs placing, and the
worker's ``get_mem_pool_context`` leaves a CUDA engine's allocation to vLLM
(``WorkerSide.mem_pool_context``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping

from .. import cuda
from .kvbuffer import block_dim, layer_planes, plane_page_bytes

__all__ = ["DirectLayout", "CudaKVBuffer", "direct_layout", "is_cuda"]


def is_cuda(t: Any) -> bool:
    """True when tensor ``t`` says it is on a CUDA device."""
    dev = getattr(t, "device", None)
    return getattr(dev, "type", None) == "cuda"


@dataclasses.dataclass(frozen=True)
class DirectLayout:
    """One OrbitKV buffer in CUDA memory: ``layers`` region layers of
    ``page_count`` pages of ``page_bytes`` bytes, layer-major, starting at
    device address ``ptr`` on device ordinal ``device`` (this process's
    numbering). ``planes`` names each region layer (``"layer.0"``,
    ``"layer.0[K]"``, ...), for log lines."""

    ptr: int
    layers: int
    page_bytes: int
    page_count: int
    device: int
    planes: tuple[str, ...] = ()

    @property
    def nbytes(self) -> int:
        """Bytes of the region: layers x page_count x page_bytes."""
        return self.layers * self.page_count * self.page_bytes


def direct_layout(kv: Mapping[str, Any]) -> tuple[DirectLayout | None, str]:
    """``(layout, "")`` when the per-layer KV tensors ``kv`` (name -> tensor,
    layer order = dict order; each ``[num_blocks, ...]`` or ``[2,
    num_blocks, ...]``, any dtype) are CUDA tensors on one device whose
    planes (``kvbuffer.layer_planes``) lie back to back in memory, region
    layer j (plane j of all layers' planes in order), page b at ``(j *
    page_count + b) * page_bytes`` from the first plane's ``data_ptr``.
    Otherwise ``(None, why)``, ``why`` naming the tensor and what differs:
    not on CUDA, another device, not contiguous, its block dim, its page
    bytes or its block count differing from the first layer's, or its
    planes not where layer-major pages of one range put them. Reads only
    ``device``, ``dim``, ``shape``, ``element_size``, ``is_contiguous`` and
    ``data_ptr``; touches no memory. Whether the range is one allocation is
    the driver's to say (``orbitkv.cuda.cuda_region`` refuses a region that
    leaves its allocation)."""
    if not kv:
        return None, "no KV tensors"
    items = list(kv.items())
    first_name, first = items[0]
    dev0 = getattr(first, "device", None)
    bd0 = block_dim(first)
    planes: list[tuple[str, int, int, int]] = []  # (plane name, data_ptr, page bytes, blocks)
    for name, t in items:
        dev = getattr(t, "device", None)
        if not is_cuda(t):
            return None, f"{name} is on {dev}, not a CUDA device"
        if (dev.index or 0) != (dev0.index or 0):
            return None, f"{name} is on cuda:{dev.index or 0}, {first_name} on cuda:{dev0.index or 0}: a region is on one device"
        if not t.is_contiguous():
            return None, (f"{name} is not contiguous (shape {tuple(t.shape)}, strides {tuple(t.stride())}): "
                          "its pages would not hold its blocks in element order")
        bd = block_dim(t)
        if bd != bd0:
            return None, f"{name} has its blocks in dim {bd}, {first_name} in dim {bd0}: the layers' block dims differ"
        shape = tuple(t.shape)
        blocks = shape[bd]
        page = math.prod(shape[bd + 1:]) * t.element_size()
        if blocks < 1 or page < 1:
            return None, f"{name} has {blocks} blocks of {page} B: want at least one non-empty block"
        ps = layer_planes(t)
        suffixes = ("[K]", "[V]") if len(ps) == 2 else ("",)
        planes.extend((name + sfx, p.data_ptr(), plane_page_bytes(p), int(p.shape[0])) for sfx, p in zip(suffixes, ps))
    p0name, base, page, count = planes[0]
    for pname, ptr, pbytes, blocks in planes[1:]:
        if pbytes != page:
            return None, f"{pname} has {pbytes} B pages, {p0name} {page} B: the page sizes differ"
        if blocks != count:
            return None, f"{pname} has {blocks} blocks, {p0name} {count}: the block counts differ"
    for j, (pname, ptr, _, _) in enumerate(planes):
        want = base + j * count * page
        if ptr != want:
            return None, (f"{pname} starts {ptr - base:+d} B from {p0name}, want {j * count * page} (region "
                          f"layer {j} of layer-major pages): the layers are not consecutive in one allocation")
    return DirectLayout(base, len(planes), page, count, dev0.index or 0, tuple(p[0] for p in planes)), ""


class CudaKVBuffer:
    """A CUDA KV cache as one registrable OrbitKV buffer: ``layers``,
    ``page_bytes``, ``page_count`` as ``EngineBuffer``'s, and ``region()``,
    which asks the driver afresh for the allocation's IPC handle and the
    device UUID (``Session`` calls it at every (re)registration, so a new
    Manager epoch gets a new handle query). The memory stays vLLM's: this
    object owns nothing and closes nothing."""

    def __init__(self, layout: DirectLayout, driver: Callable[[], Any] = cuda.Driver):
        self.layout = layout
        self.layers, self.page_bytes, self.page_count = layout.layers, layout.page_bytes, layout.page_count
        self._driver = driver

    def region(self) -> cuda.CudaRegion:
        """The IPC-handle ``CudaRegion`` of the layout. Raises ``OSError``
        (no driver library), ``RuntimeError`` (a driver call failed, e.g.
        ``cuIpcGetMemHandle`` on VMM memory) or ``ValueError`` (the region
        leaves its allocation: the layers are not one allocation)."""
        lo = self.layout
        return cuda.cuda_region(lo.ptr, lo.nbytes, lo.device, lo.layers, lo.page_bytes, lo.page_count,
                                driver=self._driver())
