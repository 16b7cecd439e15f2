"""gpu_kv_check.py — the Manager copies KV that torch allocated in another
process (issue 19 item 6), run by scripts/gpu-check.sh on a GPU machine.

This process allocates a KV buffer with torch on cuda:0 (layers x pages x
page_bytes, uint8), registers it with a Manager started with
--copy-backend cuda by its legacy IPC handle (orbitkv.cuda.tensor_region:
no pickling), fills pages 0..n-1 with random bytes, publishes them (the
Manager copies D2H from this process's memory), zeroes pages n..2n-1,
restores the blocks into them (H2D) and compares on the device. Prints
"kv ok" and the publish/restore wall times, or the exact error (a sandboxed
kernel that forbids CUDA IPC between processes shows up at registration).

Usage: python3 gpu_kv_check.py SOCKET   (a Manager serving on SOCKET)
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
        print(f"kv {'ok' if same else 'FAIL: restored bytes differ'}: {N} blocks of {LAYERS}x{PAGE} B; "
              f"publish {mib / (t1 - t0):.0f} MiB/s, restore {mib / (t3 - t2):.0f} MiB/s (wall, one round trip each)")
        return 0 if same else 1
    finally:
        c.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
