"""``PoolMemory``: one SGLang host pool as OrbitKV copies into and out of it.

SGLang registers one anchor pool (the KV pool, ``register_mem_pool_host``)
and, with the hybrid cache controller, sidecar pools by name
(``register_mem_host_pool_v2``: Mamba state, SWA, indexer, ...). Each pool
has its own page geometry, so each gets its own OrbitKV buffer and its own
namespace (``kv_layout`` names the pool).

Two ways to reach a pool's memory:

* zero copy: the pool carries an ``orbitkv_buffer`` attribute (an
  ``EngineBuffer``, layer-major, one buffer page per SGLang page per layer);
  the Manager restores into and publishes from the pool's own pages, buffer
  page = host slot // page_size;
* staging (any other pool, SGLang's own ``MHATokenToKVPoolHost`` and
  ``MambaPoolHost`` among them): a staging ``EngineBuffer`` of one layer and
  ``staging_pages`` pages of the pool's flat page size (rounded up to a
  multiple of 64 bytes, the tail unused); pages move with the
  pool's ``get_data_page(index, flat=True)`` and
  ``set_from_flat_data_page(index, data)``, at most ``staging_pages`` per
  round trip. The flat page is whatever dtype the pool hands out: the KV
  pools' own dtype, ``MambaPoolHost``'s raw bytes (uint8: its conv and SSM
  states and any registered slot side states, one slot per page,
  ``page_size`` 1).

What names a pool's pages (its namespace, besides the model and shard):

* ``dtype_name`` (the pool's ``dtype``, "float32"; the backend's
  ``orbitkv.dtype`` replaces it) and ``dtype_suffix``: for a pool holding
  a second state dtype (``MambaPoolHost``: ``dtype`` is its conv
  state's, ``temporal_dtype`` its SSM state's, which SGLANG_MAMBA_SSM_DTYPE
  sets apart) ``"+ssm-<temporal_dtype>"``, else "": the same bytes read
  as float16 or as bfloat16 are different states;
* ``kv_layout``: ``sglang-<layout>-orbitkv-pages`` (zero copy) or
  ``sglang-<layout>-flat``, and for a sidecar ``-<bytes>B-pool-<name>``:
  a sidecar's page length follows the engine's flags (``MambaPoolHost``
  appends each registered slot side state to its page), and a page of
  another length must never be restored into it.

Not thread-safe: the storage backend uses a pool under its own lock.
"""

from __future__ import annotations

from typing import Any

from ..buffer import EngineBuffer

__all__ = ["PoolMemory"]


def _dtype_name(dtype: Any) -> str:
    """``torch.bfloat16`` -> "bfloat16" (any other value as its str)."""
    return str(dtype).replace("torch.", "")


class PoolMemory:
    """The OrbitKV side of SGLang host pool ``host`` named ``name``.

    Raises ``ValueError`` naming the pool when its ``page_size`` is not a
    positive int, or its flat page is empty. ``ns`` is None until the
    backend assigns the namespace."""

    def __init__(self, name: str, host: Any, staging_pages: int):
        self.name = name
        self.host = host
        page_size = getattr(host, "page_size", None)
        if not isinstance(page_size, int) or isinstance(page_size, bool) or page_size < 1:
            raise ValueError(f"OrbitKVStorage: host pool {name!r}: page_size {page_size!r}; want an int >= 1")
        self.page_size = page_size
        self.layout = str(getattr(host, "layout", "layer_first"))
        self.dtype_name = _dtype_name(getattr(host, "dtype", ""))
        temporal = getattr(host, "temporal_dtype", None)
        self.dtype_suffix = "" if temporal is None else "+ssm-" + _dtype_name(temporal)
        self.ns: bytes | None = None
        self._staging = None
        buf = getattr(host, "orbitkv_buffer", None)
        if isinstance(buf, EngineBuffer):
            self.buf, self.zero_copy = buf, True
            self.kv_layout = f"sglang-{self.layout}-orbitkv-pages"
        else:
            import torch
            flat = host.get_data_page(0, flat=True)
            self._data_bytes = flat.numel() * flat.element_size()
            if self._data_bytes <= 0:
                raise ValueError(f"OrbitKVStorage: host pool {name!r}: its flat data page is empty")
            page_bytes = -(-self._data_bytes // 64) * 64  # EngineBuffer pages are whole cache lines
            self.buf, self.zero_copy = EngineBuffer(1, page_bytes, staging_pages), False
            self._staging = torch.frombuffer(self.buf.memoryview(), dtype=torch.uint8).view(
                staging_pages, page_bytes)[:, :self._data_bytes]
            self._dtype = flat.dtype
            self.kv_layout = f"sglang-{self.layout}-flat"
        if name != "kv":
            if not self.zero_copy:
                self.kv_layout += f"-{self._data_bytes}B"
            self.kv_layout += f"-pool-{name}"

    @property
    def round_pages(self) -> int:
        """The most pages one restore or publish round moves (a large
        number for zero copy: every page is in place)."""
        return 1 << 30 if self.zero_copy else len(self._staging)

    @property
    def page_bytes(self) -> int:
        """Bytes of one SGLang page of this pool over all its layers (for
        staging, the flat page's bytes, without the padding of its staging
        page to a multiple of 64)."""
        return self.buf.layers * self.buf.page_bytes if self.zero_copy else self._data_bytes

    def slots(self, host_indices: Any, n: int) -> list[int]:
        """The first host slot of each of ``n`` pages in ``host_indices``
        (``page_size`` slots per page). Raises ``ValueError`` when
        ``host_indices`` does not hold exactly ``n * page_size`` slots."""
        count = len(host_indices)
        if count != n * self.page_size:
            raise ValueError(f"OrbitKVStorage: host pool {self.name!r}: {count} host indices for {n} pages of "
                             f"{self.page_size}; want {n * self.page_size}")
        return [int(i) for i in host_indices[: n * self.page_size: self.page_size]]

    def targets(self, slots: list[int]) -> list[int]:
        """Buffer pages a round over ``slots`` (at most ``round_pages``)
        restores into or publishes from."""
        return [s // self.page_size for s in slots] if self.zero_copy else list(range(len(slots)))

    def stage_out(self, slots: list[int]) -> None:
        """Before a publish: copy the pool's pages at ``slots`` into the
        staging pages (nothing for zero copy)."""
        if self.zero_copy:
            return
        for j, s in enumerate(slots):
            data = self.host.get_data_page(s, flat=True)
            self._staging[j].copy_(data.reshape(-1).view(self._staging.dtype))

    def stage_in(self, slots: list[int]) -> None:
        """After a completed restore: copy the staging pages into the
        pool's pages at ``slots`` (nothing for zero copy)."""
        if self.zero_copy:
            return
        for j, s in enumerate(slots):
            self.host.set_from_flat_data_page(s, self._staging[j].view(self._dtype))
