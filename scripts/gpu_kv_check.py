"""gpu_kv_check.py — the Manager copies KV that torch allocated in another
process, run by scripts/gpu-check.sh on a GPU machine.

This process allocates a KV buffer with torch on cuda:0 (layers x pages x
page_bytes, uint8), registers it with a Manager started with
--copy-backend cuda by its legacy IPC handle (orbitkv.cuda.tensor_region:
no pickling), fills pages 0..n-1 with random bytes, publishes them (the
Manager copies D2H from this process's memory), zeroes pages n..2n-1,
restores the blocks into them (H2D) and compares on the device. Then the
vLLM adapter's GPU-direct mode (orbitkv.vllm.gpudirect): per-layer KV views
of one torch CUDA allocation, in the block-major and the FlashAttention
layouts, handed to a worker OrbitKVConnector's register_kv_caches, which
must choose "gpu-direct"; blocks saved from some block ids are restored
into others and compared on the device. The last line is "kv ok ...;
adapter gpu-direct ok" with the publish/restore wall times, or the exact
error (a sandboxed kernel that forbids CUDA IPC between processes shows up
at registration).

Usage: python3 gpu_kv_check.py SOCKET   (a Manager serving on SOCKET)
       python3 gpu_kv_check.py --fault SOCKET HTTP_PORT FAULT_PTX
The second form is the device-side fault through the failpoint build (a
Manager built with -tags failpoints, --copy-backend cuda, --http-addr
127.0.0.1:HTTP_PORT): it registers a small torch KV buffer by IPC handle,
publishes one block (must succeed), arms the Manager's device fault
(POST /debug/failpoints/cuda-device-fault?module=FAULT_PTX: the next copy
job first launches fault.cu's kernel on its stream), publishes again and
expects that publish to fail with the Manager gone; gpu-check.sh then
checks the Manager's exit and its "fail-stop:" line. Its last line is
"fault armed; publish failed: ..." or what went wrong.
"""
import os
import sys
import time

import torch

import orbitkv
from orbitkv import cuda

LAYERS, PAGE, PAGES, N = 4, 1 << 20, 64, 16


def main(sock: str) -> int:
    kv = torch.empty(LAYERS * PAGES * PAGE, dtype=torch.uint8, device="cuda:0")
    region = cuda.tensor_region(kv, LAYERS, PAGE, PAGES)
    pages = kv.view(LAYERS, PAGES, PAGE)
    pages[:, :N].random_(0, 256)
    pages[:, N:2 * N].zero_()
    torch.cuda.synchronize()
    c = orbitkv.CacheManagerClient(socket_path=sock)
    try:
        bid = c.register_cuda_buffer(region)
        ident = orbitkv.CacheIdentity(model_id="gpu-check", revision="r1", dtype="uint8", kv_layout="gpu-check",
                                      block_tokens=16, tp_rank=0, tp_size=1, pp_rank=0, pp_size=1)
        ns = ident.namespace()
        hs = [orbitkv.block_hash16(("gpu-check", os.getpid(), i)) for i in range(N)]
        t0 = time.monotonic()
        stored, present = c.publish(ns, bid, hs, list(range(N)))
        t1 = time.monotonic()
        answer = c.lookup(ns, orbitkv.BlockHashes(hs))
        if stored != N or answer.hit_count != N:
            print(f"kv FAIL: published {stored}/{N} (present {present}), lookup hit {answer.hit_count}")
            return 1
        t2 = time.monotonic()
        op = c.start_restore(answer.lease_id, bid, [(i, N + i) for i in range(N)])
        c.wait_restore(op, timeout_s=60)
        t3 = time.monotonic()
        c.release(answer.lease_id)
        same = torch.equal(pages[:, :N], pages[:, N:2 * N])
        mib = LAYERS * N * PAGE / (1 << 20)
        line = (f"kv {'ok' if same else 'FAIL: restored bytes differ'}: {N} blocks of {LAYERS}x{PAGE} B; "
                f"publish {mib / (t1 - t0):.0f} MiB/s, restore {mib / (t3 - t2):.0f} MiB/s (wall, one round trip each)")
        if not same:
            print(line)
            return 1
    finally:
        c.close()
    adapter = adapter_check(sock)
    print(f"{line}; adapter {adapter}")
    return 0 if adapter.startswith("gpu-direct ok") else 1


def adapter_check(sock: str) -> str:
    """The vLLM worker adapter in GPU-direct mode against the Manager at
    sock: "gpu-direct ok (...)" or what failed."""
    from types import SimpleNamespace

    from orbitkv.vllm import KVConnectorRole, LoadSpec, OrbitKVConnector, OrbitKVConnectorMetadata, SaveSpec

    cfg = SimpleNamespace(
        model_config=SimpleNamespace(model="gpu-check/adapter", revision="r1", dtype="float16"),
        cache_config=SimpleNamespace(block_size=16, cache_dtype="auto"),
        parallel_config=SimpleNamespace(tensor_parallel_size=1, pipeline_parallel_size=1, rank=0),
        kv_transfer_config=SimpleNamespace(kv_role="kv_both", kv_connector_extra_config={
            "orbitkv.bootstrap_socket": sock, "orbitkv.kv_layout": f"gpu-check-{os.getpid()}"}))
    blocks, n = 32, 8
    for name, shape in (("block-major", (LAYERS, blocks, 16, 8, 128)), ("flash-attention", (LAYERS, 2, blocks, 16, 8, 128))):
        mem = torch.randn(*shape, dtype=torch.float16, device="cuda:0")   # one allocation, layers back to back
        kv = {f"layer.{l}": mem[l] for l in range(LAYERS)}
        dim = 1 if len(shape) == 6 else 0
        w = OrbitKVConnector(cfg, KVConnectorRole.WORKER)
        try:
            w.register_kv_caches(kv)
            if w.kv_mode != "gpu-direct":
                return f"FAIL: {name} KV went {w.kv_mode!r}, not gpu-direct (see the orbitkv.vllm log line)"
            hs = [orbitkv.block_hash16(("gpu-check-adapter", name, os.getpid(), i)) for i in range(n)]
            w.bind_connector_metadata(OrbitKVConnectorMetadata(saves=[SaveSpec("a", hs, list(range(n)))]))
            w.start_load_kv(None)
            w.wait_for_save()
            w.clear_connector_metadata()
            if w.stats["published_blocks"] != n:
                return f"FAIL: {name}: published {w.stats['published_blocks']}/{n} blocks"
            for t in kv.values():
                t.narrow(dim, n, n).zero_()
            w.bind_connector_metadata(OrbitKVConnectorMetadata(loads=[LoadSpec("b", hs, 0, list(range(n, 2 * n)))]))
            w.start_load_kv(None)
            w.wait_for_layer_load("layer.0")
            errors = w.get_block_ids_with_load_errors()
            w.clear_connector_metadata()
            if errors:
                return f"FAIL: {name}: load errors for blocks {sorted(errors)}"
            for lname, t in kv.items():
                if not torch.equal(t.narrow(dim, 0, n), t.narrow(dim, n, n)):
                    return f"FAIL: {name}: {lname} restored bytes differ"
        finally:
            w.shutdown()
    return f"gpu-direct ok (block-major and flash-attention, {n} blocks each)"


def fault_check(sock: str, http_port: str, ptx: str) -> int:
    """The failpoint build's device fault against the Manager at sock
    (HTTP control on 127.0.0.1:http_port): 0 when the publish after the
    fault is armed fails (the Manager must be ending in fail-stop)."""
    import urllib.parse
    import urllib.request

    kv = torch.zeros(2 * 8 * PAGE, dtype=torch.uint8, device="cuda:0")
    torch.cuda.synchronize()
    c = orbitkv.CacheManagerClient(socket_path=sock)
    try:
        bid = c.register_cuda_buffer(cuda.tensor_region(kv, 2, PAGE, 8))
        ident = orbitkv.CacheIdentity(model_id="gpu-check-fault", revision="r1", dtype="uint8", kv_layout="gpu-check",
                                      block_tokens=16, tp_rank=0, tp_size=1, pp_rank=0, pp_size=1)
        ns = ident.namespace()
        hs = [orbitkv.block_hash16(("gpu-check-fault", os.getpid(), i)) for i in range(2)]
        if c.publish(ns, bid, hs[:1], [0])[0] != 1:
            print("fault FAIL: the publish before the fault stored nothing")
            return 1
        url = f"http://127.0.0.1:{http_port}/debug/failpoints/cuda-device-fault?module={urllib.parse.quote(ptx)}"
        urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=30).close()
        try:
            c.publish(ns, bid, hs[1:], [1])
        except orbitkv.errors.OrbitKVError as e:
            print(f"fault armed; publish failed: {type(e).__name__}: {e}")
            return 0
        print("fault FAIL: the publish after the device fault succeeded")
        return 1
    finally:
        c.close()


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--fault":
        sys.exit(fault_check(sys.argv[2], sys.argv[3], sys.argv[4]))
    sys.exit(main(sys.argv[1]))
