"""CUDA KV buffers registered with the Manager by handle (docs/cuda.md).

An engine whose KV cache lives in GPU memory registers it with
``CacheManagerClient.register_cuda_buffer(region)``: the region names the
device by UUID (ordinals differ between processes under
``CUDA_VISIBLE_DEVICES``), its offset inside the base allocation, its
layer layout, and a handle the Manager opens in its own process — a legacy
CUDA IPC handle (``cuIpcGetMemHandle`` of the base allocation, for plain
``cudaMalloc`` memory) or a VMM allocation's exported POSIX fd. No tensor
is pickled: only these bytes travel, in the RegisterBuffers frame.

``tensor_region`` builds the IPC form from a torch CUDA tensor through the
CUDA driver (``libcuda.so.1``, by ctypes: ``cuMemGetAddressRange``,
``cuIpcGetMemHandle``, ``cuDeviceGetUuid``). The Manager must run
``--copy-backend cuda``. ``$ORBITKV_LIBCUDA``, when set, names the library
instead (the same seam as the Manager's; the tests load the CUDA driver
double, build/native/libokv_cuda_double.so, through it).
"""

from __future__ import annotations

import ctypes
import os

from ._abi import CudaRegion

__all__ = ["CudaRegion", "Driver", "HANDLE_IPC", "HANDLE_VMM_FD", "cuda_region", "tensor_region"]

HANDLE_IPC = 1  # client.h OKV_CUDA_HANDLE_IPC
HANDLE_VMM_FD = 2  # client.h OKV_CUDA_HANDLE_VMM_FD


class Driver:
    """The three driver calls a region needs, on ``path`` (default
    ``$ORBITKV_LIBCUDA``, else ``libcuda.so.1``) through ctypes, in the
    calling process's current context. Raises ``OSError`` when the library
    cannot be loaded and ``RuntimeError`` naming the call and the driver's
    error name."""

    def __init__(self, path: str | None = None):
        self._cu = ctypes.CDLL(path or os.environ.get("ORBITKV_LIBCUDA") or "libcuda.so.1")

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            name = ctypes.c_char_p()
            self._cu.cuGetErrorName(rc, ctypes.byref(name))
            raise RuntimeError(f"{what}: {name.value.decode() if name.value else rc}")

    def address_range(self, ptr: int) -> tuple[int, int]:
        """(base, size) of the allocation holding device address ptr."""
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self._check(self._cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)),
                    "cuMemGetAddressRange")
        return base.value, size.value

    def ipc_handle(self, base: int) -> bytes:
        """The 64-byte legacy IPC handle of the base allocation at base."""
        h = (ctypes.c_char * 64)()
        self._check(self._cu.cuIpcGetMemHandle(h, ctypes.c_uint64(base)), "cuIpcGetMemHandle")
        return bytes(h)

    def device_uuid(self, ordinal: int) -> bytes:
        """The 16-byte UUID of device ordinal (this process's numbering)."""
        dev, u = ctypes.c_int(), (ctypes.c_char * 16)()
        self._check(self._cu.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        self._check(self._cu.cuDeviceGetUuid(u, dev), "cuDeviceGetUuid")
        return bytes(u)


def cuda_region(ptr: int, nbytes: int, device: int, layers: int, page_bytes: int, page_count: int,
                driver=None) -> CudaRegion:
    """The IPC-handle region of nbytes of device memory at ptr on device
    ordinal ``device``, laid out as ``layers`` layers of ``page_count``
    pages of ``page_bytes`` (layer-major, as okv_buffer). ``driver``
    (default ``Driver()``) supplies the allocation's base and size, its IPC
    handle and the device UUID. Raises ``ValueError`` naming the field when
    the layout does not fit nbytes or the region leaves its allocation."""
    for name, v in (("layers", layers), ("page_bytes", page_bytes), ("page_count", page_count), ("bytes", nbytes)):
        if v <= 0:
            raise ValueError(f"{name} = {v}: want > 0")
    if layers * page_bytes * page_count > nbytes:
        raise ValueError(f"bytes = {nbytes}: smaller than layers*page_bytes*page_count = {layers * page_bytes * page_count}")
    drv = driver if driver is not None else Driver()
    base, size = drv.address_range(ptr)
    off = ptr - base
    if off < 0 or off + nbytes > size:
        raise ValueError(f"bytes = {nbytes} at offset {off}: exceeds the allocation of {size} bytes")
    handle, uuid = drv.ipc_handle(base), drv.device_uuid(device)
    if len(handle) != 64 or len(uuid) != 16:
        raise ValueError(f"driver gave a {len(handle)}-byte handle and a {len(uuid)}-byte UUID; want 64 and 16")
    r = CudaRegion()
    r.handle_kind = HANDLE_IPC
    r.layers, r.page_bytes, r.page_count = layers, page_bytes, page_count
    r.offset, r.bytes, r.vmm_fd = off, nbytes, -1
    ctypes.memmove(r.ipc_handle, handle, 64)
    ctypes.memmove(r.device_uuid, uuid, 16)
    return r


def tensor_region(tensor, layers: int, page_bytes: int, page_count: int, driver=None) -> CudaRegion:
    """cuda_region of a contiguous torch CUDA tensor (its data pointer,
    byte size and device index). Raises ``ValueError`` for a tensor that is
    not on a CUDA device or not contiguous."""
    if getattr(tensor, "device", None) is None or tensor.device.type != "cuda":
        raise ValueError(f"tensor on {getattr(tensor, 'device', '?')}: want a CUDA tensor (host KV registers as an EngineBuffer)")
    if not tensor.is_contiguous():
        raise ValueError("tensor is not contiguous: the region must be one range of its allocation")
    return cuda_region(tensor.data_ptr(), tensor.numel() * tensor.element_size(), tensor.device.index or 0,
                       layers, page_bytes, page_count, driver)
