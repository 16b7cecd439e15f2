"""gpu_ipc_probe.py — can a CUDA allocation made by torch in one process be
opened in another by legacy IPC handle (cuIpcGetMemHandle /
cuIpcOpenMemHandle), and are the bytes the same? Run by scripts/gpu-check.sh
on the GPU machine; prints "ipc ok" or the exact driver error (a sandboxed
kernel that forbids CUDA IPC between processes shows up here).

Usage: python3 gpu_ipc_probe.py   (the child half runs as: ... child HEX)
"""
import ctypes
import subprocess
import sys

cuda = ctypes.CDLL("libcuda.so.1")


def check(rc, what):
    if rc != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(rc, ctypes.byref(name))
        sys.exit(f"{what}: {name.value.decode() if name.value else rc}")


def main():
    import torch

    t = torch.arange(1 << 20, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    check(cuda.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(t.data_ptr())),
          "cuMemGetAddressRange")
    handle = (ctypes.c_char * 64)()
    check(cuda.cuIpcGetMemHandle(handle, base), "cuIpcGetMemHandle")
    off = t.data_ptr() - base.value
    out = subprocess.run([sys.executable, __file__, "child", bytes(handle).hex(), str(off), str(t.numel() * 4)],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        sys.exit(f"child: {out.stderr.strip() or out.stdout.strip()}")
    want = int(t.sum().item()) & 0xFFFFFFFFFFFFFFFF
    got = int(out.stdout.strip())
    print("ipc ok" if got == want else f"ipc bytes differ: sum {got}, want {want}")
    sys.exit(0 if got == want else 1)


def child(hexhandle, off, n):
    check(cuda.cuInit(0), "cuInit")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    handle = (ctypes.c_char * 64).from_buffer_copy(bytes.fromhex(hexhandle))
    ptr = ctypes.c_uint64()
    check(cuda.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), handle, 1), "cuIpcOpenMemHandle")
    buf = (ctypes.c_int32 * (n // 4))()
    check(cuda.cuMemcpyDtoH_v2(buf, ctypes.c_uint64(ptr.value + off), ctypes.c_size_t(n)), "cuMemcpyDtoH")
    print(sum(buf) & 0xFFFFFFFFFFFFFFFF)
    check(cuda.cuIpcCloseMemHandle(ptr), "cuIpcCloseMemHandle")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
