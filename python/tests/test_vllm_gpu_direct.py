"""The vLLM adapter's GPU-direct mode (orbitkv.vllm.gpudirect): CUDA KV
tensors registered with the Manager as one region by IPC handle, published
from and restored into vLLM's block ids with no staging.

There is no GPU here. ``CudaLooking`` below stands in for a torch CUDA
tensor: a CPU tensor that reports ``device.type == "cuda"``. In the end to
end tests its memory is "device memory" of the CUDA driver double
(build/native/libokv_cuda_double.so, a test double of libcuda.so.1 whose
device memory is host memory), allocated by the double's cuMemAlloc in this
process; the worker asks the double (ORBITKV_LIBCUDA) for the allocation's
IPC handle, and a Manager on --copy-backend cuda over the same double opens
that handle in its own process (/proc/<pid>/fd of the double's memfd) and
copies through it. What this proves is the adapter's geometry, its
registration and fallbacks, and that the bytes cross processes through the
registered region; nothing here ran on a GPU (scripts/gpu-check.sh is for
that)."""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import tempfile
import unittest
from types import SimpleNamespace

from . import support

orbitkv = support.import_orbitkv()
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

from orbitkv.vllm import (KVConnectorRole, LoadSpec, OrbitKVConnector, OrbitKVConnectorMetadata,  # noqa: E402
                          chain_block_hashes, parse_options)
from orbitkv.vllm import gpudirect  # noqa: E402
from orbitkv._abi import Code  # noqa: E402
from orbitkv.errors import Closed  # noqa: E402
from orbitkv.vllm.kvbuffer import block_dim  # noqa: E402

from .test_vllm_adapter import Blocks, config, engine_step, new_step, request  # noqa: E402

DOUBLE = os.path.join(support.REPO, "build", "native", "libokv_cuda_double.so")
BLOCK, LAYERS, NUM_BLOCKS, HEADS, DIM = 4, 2, 8, 2, 4


_DUMPABLE = support.DumpableEngine()


def setUpModule():
    logging.getLogger("orbitkv").setLevel(logging.ERROR)
    _DUMPABLE.start()


def tearDownModule():
    _DUMPABLE.stop()


class CudaLooking:
    """A torch CPU tensor that says it is on CUDA device 0 (a GPU this
    machine lacks): ``device`` is ``torch.device("cuda", 0)``; ``shape``,
    ``stride()``, ``element_size()``, ``is_contiguous()``, ``data_ptr()``,
    ``dim()`` and ``dtype`` are the wrapped tensor's. Indexing and
    ``select`` return the wrapped tensor's (plain CPU) results, which is
    what staging mode's copies act on."""

    def __init__(self, t, index: int = 0):
        self.t = t
        self.device = torch.device("cuda", index)

    def __getattr__(self, name):
        return getattr(self.t, name)

    def __getitem__(self, i):
        return self.t[i]

    def unflatten(self, dim, sizes):
        return CudaLooking(self.t.unflatten(dim, sizes), self.device.index)

    def view(self, *shape):
        return CudaLooking(self.t.view(*shape), self.device.index)


def fa_layers(mem) -> dict:
    """FlashAttention layout: layer l is ``mem[l]``, ``[2, blocks, BLOCK, HEADS, DIM]``."""
    return {f"layer.{l}": CudaLooking(mem[l]) for l in range(mem.shape[0])}


@unittest.skipIf(torch is None, "torch not installed (python3-torch)")
class TestDirectLayout(unittest.TestCase):
    """direct_layout: the geometry from the tensors, and every refusal."""

    def test_block_major_layers_are_one_region_layer_each(self):
        mem = torch.zeros(LAYERS, NUM_BLOCKS, BLOCK, HEADS, DIM)
        lo, why = gpudirect.direct_layout({f"layer.{l}": CudaLooking(mem[l]) for l in range(LAYERS)})
        self.assertEqual(why, "")
        self.assertEqual((lo.ptr, lo.layers, lo.page_bytes, lo.page_count, lo.device),
                         (mem.data_ptr(), LAYERS, BLOCK * HEADS * DIM * 4, NUM_BLOCKS, 0))
        self.assertEqual(lo.nbytes, mem.numel() * 4)
        self.assertEqual(lo.planes, ("layer.0", "layer.1"))

    def test_flash_attention_layers_are_a_k_and_a_v_region_layer_of_half_blocks(self):
        mem = torch.zeros(LAYERS, 2, NUM_BLOCKS, BLOCK, HEADS, DIM)
        kv = fa_layers(mem)
        self.assertEqual(block_dim(kv["layer.0"]), 1)
        lo, why = gpudirect.direct_layout(kv)
        self.assertEqual(why, "")
        self.assertEqual((lo.ptr, lo.layers, lo.page_bytes, lo.page_count),
                         (mem.data_ptr(), 2 * LAYERS, BLOCK * HEADS * DIM * 4, NUM_BLOCKS))
        self.assertEqual(lo.planes, ("layer.0[K]", "layer.0[V]", "layer.1[K]", "layer.1[V]"))

    def test_a_blocks_region_bytes_are_the_bytes_staging_publishes(self):
        # Staging flattens t.select(block_dim, b) per layer, layers in order;
        # the region's pages of block b, region layers in order, must be the
        # same bytes, or the two modes would not share one cache identity.
        for name, shape in (("block dim 0", (LAYERS, NUM_BLOCKS, BLOCK, HEADS, DIM)),
                            ("FlashAttention", (LAYERS, 2, NUM_BLOCKS, BLOCK, HEADS, DIM))):
            with self.subTest(name):
                mem = torch.randn(*shape)
                kv = {f"layer.{l}": CudaLooking(mem[l]) for l in range(LAYERS)}
                lo, _ = gpudirect.direct_layout(kv)
                raw = mem.view(-1).view(torch.uint8)
                for b in (0, 3, NUM_BLOCKS - 1):
                    region = torch.cat([raw[(j * lo.page_count + b) * lo.page_bytes:][:lo.page_bytes]
                                        for j in range(lo.layers)])
                    staged = torch.cat([t.select(block_dim(t), b).reshape(-1).view(torch.uint8)
                                        for t in kv.values()])
                    self.assertTrue(torch.equal(region, staged), f"block {b}")

    def test_layouts_that_do_not_fit_are_refused_naming_the_tensor(self):
        fa = torch.zeros(LAYERS, 2, NUM_BLOCKS, BLOCK, HEADS, DIM)
        flat = torch.zeros(LAYERS, NUM_BLOCKS, BLOCK, HEADS, DIM)
        half = BLOCK * HEADS * DIM
        mixed = torch.zeros(2 * NUM_BLOCKS * half + NUM_BLOCKS * half)
        wide = torch.zeros(NUM_BLOCKS * BLOCK * HEADS * DIM * 3)
        cases = [
            ("not contiguous", {"layer.0": CudaLooking(flat[0].transpose(1, 2)), "layer.1": CudaLooking(flat[1])},
             "layer.0 is not contiguous"),
            ("layers not consecutive", {"layer.0": CudaLooking(fa[1]), "layer.1": CudaLooking(fa[0])},
             "layer.1[K] starts"),
            ("a gap between layers", {"layer.0": CudaLooking(flat[0]), "layer.1": CudaLooking(fa[1, 0])},
             "not consecutive in one allocation"),
            ("differing page sizes",
             {"layer.0": CudaLooking(wide[:NUM_BLOCKS * half].view(NUM_BLOCKS, BLOCK, HEADS, DIM)),
              "layer.1": CudaLooking(wide[NUM_BLOCKS * half:].view(NUM_BLOCKS, BLOCK, HEADS, 2 * DIM))},
             "layer.1 has 256 B pages, layer.0 128 B: the page sizes differ"),
            ("block dim mismatch",
             {"layer.0": CudaLooking(mixed[:2 * NUM_BLOCKS * half].view(2, NUM_BLOCKS, BLOCK, HEADS, DIM)),
              "layer.1": CudaLooking(mixed[2 * NUM_BLOCKS * half:].view(NUM_BLOCKS, BLOCK, HEADS, DIM))},
             "layer.1 has its blocks in dim 0, layer.0 in dim 1"),
            ("differing block counts",
             {"layer.0": CudaLooking(flat[0]), "layer.1": CudaLooking(flat[1, :NUM_BLOCKS - 1])},
             "layer.1 has 7 blocks, layer.0 8"),
            ("a host tensor among them", {"layer.0": CudaLooking(flat[0]), "layer.1": flat[1]},
             "layer.1 is on cpu, not a CUDA device"),
            ("another device", {"layer.0": CudaLooking(flat[0]), "layer.1": CudaLooking(flat[1], index=1)},
             "layer.1 is on cuda:1, layer.0 on cuda:0"),
        ]
        for name, kv, want in cases:
            with self.subTest(name):
                lo, why = gpudirect.direct_layout(kv)
                self.assertIsNone(lo)
                self.assertIn(want, why)

    def test_a_region_past_its_allocation_is_refused_by_the_driver_check(self):
        # Consecutive tensors that are not one allocation: the driver's
        # allocation range ends before the region does.
        from tests.test_cuda_region import FixedDriver
        mem = torch.zeros(LAYERS, NUM_BLOCKS, BLOCK, HEADS, DIM)
        lo, _ = gpudirect.direct_layout({f"layer.{l}": CudaLooking(mem[l]) for l in range(LAYERS)})
        d = FixedDriver(base=lo.ptr, size=lo.nbytes // 2)
        with self.assertRaises(ValueError) as cm:
            gpudirect.CudaKVBuffer(lo, driver=lambda: d).region()
        self.assertIn("exceeds the allocation", str(cm.exception))
        d.size = lo.nbytes
        r = gpudirect.CudaKVBuffer(lo, driver=lambda: d).region()
        self.assertEqual((r.handle_kind, r.offset, r.bytes, r.layers, r.page_bytes, r.page_count),
                         (orbitkv.cuda.HANDLE_IPC, 0, lo.nbytes, LAYERS, lo.page_bytes, NUM_BLOCKS))


class TestMemPoolOnCUDA(unittest.TestCase):
    def test_a_cuda_engine_keeps_vllms_own_allocation(self):
        # vLLM 0.32 allocates the GPU KV cache as one backing tensor itself;
        # a context here would only displace its CuMem pool.
        from orbitkv.vllm import worker
        side = worker.WorkerSide.__new__(worker.WorkerSide)
        side.opts = parse_options({})
        page = 256
        plan = SimpleNamespace(num_blocks=NUM_BLOCKS, kv_cache_tensors=[SimpleNamespace(
            size=LAYERS * NUM_BLOCKS * page, layers=["a", "b"], layer_stride=NUM_BLOCKS * page, block_stride=page,
            offset=0)])
        old = worker._engine_on_cuda
        self.addCleanup(setattr, worker, "_engine_on_cuda", old)
        worker._engine_on_cuda = lambda: False
        self.assertIsNotNone(side.mem_pool_context(plan))  # the host engine's zero copy
        worker._engine_on_cuda = lambda: True
        self.assertIsNone(side.mem_pool_context(plan))


class DoubleMemory:
    """``nbytes`` of the driver double's "device memory" (its cuMemAlloc in
    this process: a memfd mapping), freed by ``free()``."""

    def __init__(self, nbytes: int):
        self.lib = ctypes.CDLL(DOUBLE)
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self.lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        self.lib.okv_cuda_double_calls.argtypes = [ctypes.c_char_p]
        p = ctypes.c_uint64()
        if self.lib.cuMemAlloc_v2(ctypes.byref(p), nbytes) != 0:
            raise AssertionError("the double's cuMemAlloc failed")
        self.ptr, self.nbytes = p.value, nbytes
        self.array = (ctypes.c_uint8 * nbytes).from_address(self.ptr)

    def tensor(self, *shape):
        return torch.frombuffer(self.array, dtype=torch.float32).view(*shape)

    def calls(self, fn: str) -> int:
        return self.lib.okv_cuda_double_calls(fn.encode())

    def free(self):
        self.lib.cuMemFree_v2(self.ptr)


@unittest.skipIf(torch is None, "torch not installed (python3-torch)")
class GpuDirectCase(unittest.TestCase):
    """Scheduler and worker connectors in this process; "CUDA" KV tensors
    over the double's device memory; a Manager (--copy-backend cuda over the
    double unless ``backend`` says otherwise) in another process."""

    backend = ("--copy-backend", "cuda")

    def setUp(self):
        from orbitkv.testing.manager import ManagerProcess, free_port
        if not os.access(support.MANAGER_BIN, os.X_OK):
            self.skipTest(f"{support.MANAGER_BIN} not built (run `make go`)")
        if not os.path.exists(DOUBLE):
            self.skipTest(f"{DOUBLE} not built (make native)")
        old = os.environ.get("ORBITKV_LIBCUDA")
        os.environ["ORBITKV_LIBCUDA"] = DOUBLE   # the Manager's driver and the worker's
        self.addCleanup(lambda: os.environ.__setitem__("ORBITKV_LIBCUDA", old) if old is not None
                        else os.environ.pop("ORBITKV_LIBCUDA", None))
        self.dir = tempfile.mkdtemp(prefix="orbitkv-pytest-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.sock = os.path.join(self.dir, "okv.sock")
        port = free_port()
        self.start = lambda: ManagerProcess(support.MANAGER_BIN, self.sock, port, ram="64MiB", extra=self.backend)
        self.manager = self.start()
        self.addCleanup(lambda: self.manager.kill())
        self.mem = DoubleMemory(LAYERS * 2 * NUM_BLOCKS * BLOCK * HEADS * DIM * 4)
        self.addCleanup(self.mem.free)   # last: after the connectors and the Manager let go
        torch.manual_seed(0)
        self.fa = self.mem.tensor(LAYERS, 2, NUM_BLOCKS, BLOCK, HEADS, DIM)
        self.fa.copy_(torch.randn(self.fa.shape))

    def connectors(self, kv, **extra):
        s = OrbitKVConnector(config(self.sock, **extra), KVConnectorRole.SCHEDULER)
        w = OrbitKVConnector(config(self.sock, **extra), KVConnectorRole.WORKER)
        self.addCleanup(s.shutdown)
        self.addCleanup(w.shutdown)
        w.register_kv_caches(kv)
        return s, w

    def step(self, s, w, kv, so):
        return engine_step(s, w, kv, so)

    def staged(self, kv, **extra):
        """connectors(kv) that must stage: (s, w, the one staging log line)."""
        with self.assertLogs("orbitkv.vllm", level="INFO") as cm:
            s, w = self.connectors(kv, **extra)
        self.assertEqual(w.kv_mode, "staging")
        line = [m for m in cm.output if "staging pages" in m]
        self.assertEqual(len(line), 1, cm.output)
        return s, w, line[0]

    def publish(self, s, w, kv, rid, prompt, blocks):
        self.assertEqual(s.get_num_new_matched_tokens(request(rid, prompt), 0), (0, False))
        meta, _ = self.step(s, w, kv, new_step(rid, prompt, blocks, 0, len(prompt)))
        s.request_finished(request(rid, prompt), blocks)
        return meta

    def restore(self, s, w, kv, rid, prompt, blocks, tokens):
        req = request(rid, prompt)
        self.assertEqual(s.get_num_new_matched_tokens(req, 0), (tokens, False))
        s.update_state_after_alloc(req, Blocks(blocks), tokens)
        return self.step(s, w, kv, new_step(rid, prompt, blocks, tokens, len(prompt) - tokens))

    def round_trip(self, s, w, kv, dim: int):
        """Publish blocks 5 and 6 of ``kv``, wipe blocks 1 and 2, restore the
        prefix into 1 and 2: every byte of every layer compared."""
        prompt = list(range(11))   # 2 full blocks of 4 (+3 tokens)
        published = w.stats["published_blocks"]
        meta = self.publish(s, w, kv, "a", prompt, [5, 6, 7])
        self.assertEqual([sv.block_ids for sv in meta.saves], [[5, 6]])
        self.assertEqual(w.stats["published_blocks"] - published, 2)
        want = {n: t.t.index_select(dim, torch.tensor([5, 6])).clone() for n, t in kv.items()}
        for t in kv.values():
            t.t.narrow(dim, 1, 2).zero_()
        _, errors = self.restore(s, w, kv, "b", prompt, [1, 2, 3], 8)
        self.assertEqual(errors, set())
        for n, t in kv.items():
            self.assertTrue(torch.equal(t.t.narrow(dim, 1, 2), want[n]), n)
        return want


class TestGpuDirect(GpuDirectCase):
    def test_flash_attention_tensors_go_direct_and_round_trip_every_byte(self):
        kv = fa_layers(self.fa)
        s, w = self.connectors(kv)
        self.assertEqual(w.kv_mode, "gpu-direct")
        self.assertIsNone(w._worker._staging)   # no host pages, no torch copies
        self.round_trip(s, w, kv, dim=1)
        self.assertEqual(w.stats["restored_bytes"], 2 * LAYERS * 2 * BLOCK * HEADS * DIM * 4)

    def test_block_major_tensors_go_direct_and_round_trip_every_byte(self):
        flat = self.mem.tensor(LAYERS, 2 * NUM_BLOCKS, BLOCK, HEADS, DIM)
        kv = {f"layer.{l}": CudaLooking(flat[l]) for l in range(LAYERS)}
        s, w = self.connectors(kv)
        self.assertEqual(w.kv_mode, "gpu-direct")
        self.round_trip(s, w, kv, dim=0)

    def test_the_device_is_synchronized_before_a_publish_and_before_restores(self):
        # The Manager copies on its own streams: the engine's queued device
        # work must be done before it reads (publish) or writes (restore).
        # torch sees no CUDA device here, so the worker has no sync of its
        # own (None); a counter stands in for torch.cuda.synchronize.
        kv = fa_layers(self.fa)
        s, w = self.connectors(kv)
        self.assertIsNone(w._worker._device_sync)
        syncs = []
        w._worker._device_sync = lambda: syncs.append(w.stats["published_blocks"])
        prompt = list(range(60, 71))
        self.publish(s, w, kv, "a", prompt, [5, 6, 7])
        self.assertEqual(syncs, [0])   # once, before the step's publish
        self.restore(s, w, kv, "b", prompt, [1, 2, 3], 8)
        self.assertEqual(syncs, [0, 2])   # once more, before the step's restores

    def test_blocks_published_direct_restore_into_a_staged_worker_and_back(self):
        # One cache identity across modes: the same bytes and region layers.
        kv = fa_layers(self.fa)
        s, w = self.connectors(kv)
        prompt = list(range(20, 31))
        self.publish(s, w, kv, "a", prompt, [5, 6, 7])
        host = {n: torch.zeros(2, NUM_BLOCKS, BLOCK, HEADS, DIM) for n in kv}
        s2, w2 = self.connectors(host)
        self.assertEqual(w2.kv_mode, "staging")
        _, errors = self.restore(s2, w2, host, "b", prompt, [1, 2, 3], 8)
        self.assertEqual(errors, set())
        for n in kv:
            self.assertTrue(torch.equal(host[n][:, 1:3], kv[n].t[:, 5:7]), n)
        prompt2 = list(range(40, 51))
        for t in host.values():
            t[:, 4:6] = torch.randn(2, 2, BLOCK, HEADS, DIM)
        self.publish(s2, w2, host, "c", prompt2, [4, 5, 6])
        _, errors = self.restore(s, w, kv, "d", prompt2, [0, 1, 2], 8)
        self.assertEqual(errors, set())
        for n in kv:
            self.assertTrue(torch.equal(kv[n].t[:, 0:2], host[n][:, 4:6]), n)

    def test_tensors_that_are_not_one_buffer_are_staged_saying_why(self):
        kv = {"layer.0": CudaLooking(self.fa[1]), "layer.1": CudaLooking(self.fa[0])}   # layers swapped
        s, w, line = self.staged(kv)
        self.assertIn("layer.1[K] starts", line)
        self.round_trip(s, w, kv, dim=1)

    def test_gpu_direct_off_stages(self):
        kv = fa_layers(self.fa)
        with self.assertLogs("orbitkv.vllm", level="INFO") as cm:
            s, w = self.connectors(kv, **{"orbitkv.gpu_direct": False})
        self.assertEqual(w.kv_mode, "staging")
        self.assertTrue(any("orbitkv.gpu_direct=false" in m for m in cm.output), cm.output)
        self.round_trip(s, w, kv, dim=1)

    def test_a_driver_that_gives_no_handle_stages_saying_why(self):
        kv = fa_layers(self.fa)
        os.environ["ORBITKV_LIBCUDA"] = "/nonexistent/libcuda.so.1"   # the worker's only: the Manager is up
        with self.assertLogs("orbitkv.vllm", level="INFO") as cm:
            s, w = self.connectors(kv)
        self.assertEqual(w.kv_mode, "staging")
        self.assertTrue(any("no IPC region for the CUDA KV tensors" in m and "/nonexistent/libcuda.so.1" in m
                            for m in cm.output), cm.output)
        self.round_trip(s, w, kv, dim=1)

    def test_a_restarted_manager_gets_the_region_again_by_a_new_handle_query(self):
        kv = fa_layers(self.fa)
        s, w = self.connectors(kv)
        queried = self.mem.calls("cuIpcGetMemHandle")
        self.round_trip(s, w, kv, dim=1)
        epoch = w.epochs[0]
        self.manager.kill()
        with support.hang_guard(60):
            prompt = list(range(11))
            self.assertEqual(s.get_num_new_matched_tokens(request("x", prompt), 0), (0, False))
            w.bind_connector_metadata(OrbitKVConnectorMetadata(
                loads=[LoadSpec("x", chain_block_hashes(prompt, BLOCK), 0, [3, 4])]))
            w.start_load_kv(None)
            w.wait_for_layer_load("layer.0")
            self.assertEqual(w.get_block_ids_with_load_errors(), {3, 4})   # the worker saw it go
            w.clear_connector_metadata()
            self.manager = self.start()   # same socket: a new epoch, empty
            self.round_trip(s, w, kv, dim=1)
        self.assertEqual(len(w.epochs), 2)
        self.assertNotEqual(w.epochs[1], epoch)
        self.assertEqual(w.kv_mode, "gpu-direct")
        self.assertEqual(self.mem.calls("cuIpcGetMemHandle"), queried + 1)


class TestKernelBlocks(GpuDirectCase):
    """vLLM 0.32 hands register_kv_caches and save_kv_layer views of kernel
    blocks when the attention backend cannot take the configured block
    size (num_blocks x r of them; prepare_kernel_block_sizes): the block ids
    the scheduler names are manager blocks, each r adjacent kernel blocks.
    A restore must land in the manager blocks named, in every mode."""

    R = 2

    def run_case(self, **extra):
        manager_blocks = 2 * NUM_BLOCKS
        mgr = self.mem.tensor(LAYERS, manager_blocks, HEADS, BLOCK, DIM)   # the scheduler's view of the bytes
        kern = self.mem.tensor(LAYERS, manager_blocks * self.R, HEADS, BLOCK // self.R, DIM)
        mgr.copy_(torch.randn(mgr.shape))
        kv = {f"layer.{l}": CudaLooking(kern[l]) for l in range(LAYERS)}
        cache = SimpleNamespace(num_blocks=manager_blocks)
        s = OrbitKVConnector(config(self.sock, **extra), KVConnectorRole.SCHEDULER)
        w = OrbitKVConnector(config(self.sock, **extra), KVConnectorRole.WORKER, kv_cache_config=cache)
        self.addCleanup(s.shutdown)
        self.addCleanup(w.shutdown)
        w.register_kv_caches(kv)
        prompt = list(range(11))
        want = mgr[:, 5:7].clone()
        self.publish(s, w, kv, "a", prompt, [5, 6, 7])
        mgr[:, 1:3].zero_()
        _, errors = self.restore(s, w, kv, "b", prompt, [1, 2, 3], 8)
        self.assertEqual(errors, set())
        self.assertTrue(torch.equal(mgr[:, 1:3], want), "the restore did not land in manager blocks 1 and 2")
        return w

    def test_gpu_direct_pages_are_manager_blocks(self):
        w = self.run_case()
        self.assertEqual(w.kv_mode, "gpu-direct")
        self.assertEqual(w._worker.buf.page_count, 2 * NUM_BLOCKS)

    def test_staging_pages_are_manager_blocks(self):
        w = self.run_case(**{"orbitkv.gpu_direct": False})
        self.assertEqual(w.kv_mode, "staging")

    def test_two_manager_blocks_are_never_misread_as_a_k_and_a_v_plane(self):
        # Kernel views of 2 manager blocks: unflattened to [2, r, ...] they
        # would look like the [2, blocks, ...] K/V layout. A contiguous
        # [2*r, ...] view merges into [2, r*..., ...] (rank kept, block dim
        # 0); what would still be misread is refused, never misgrouped.
        from orbitkv.vllm.kvbuffer import manager_blocks_view
        t = torch.zeros(4, HEADS, BLOCK // 2, DIM)
        out = manager_blocks_view(t, 2, "layer.0")
        self.assertEqual((block_dim(out), out.shape[0], out.data_ptr()), (0, 2, t.data_ptr()))
        self.assertEqual(out.select(0, 1).numel(), t.numel() // 2)
        for name, t in (("5-D [2*r, 2, ...] (FlashInfer of 2 blocks)", torch.zeros(4, 2, BLOCK // 2, HEADS, DIM)),
                        ("non-contiguous [2*r, ...]", torch.zeros(HEADS, 4, BLOCK // 2, DIM).transpose(0, 1))):
            with self.subTest(name):
                with self.assertRaises(ValueError) as cm:
                    manager_blocks_view(t, 2, "layer.0")
                self.assertIn("refused rather than misread", str(cm.exception))

    def test_a_count_that_is_no_multiple_is_refused_naming_the_layer(self):
        kern = self.mem.tensor(LAYERS, 2 * NUM_BLOCKS * self.R, HEADS, BLOCK // self.R, DIM)
        w = OrbitKVConnector(config(self.sock), KVConnectorRole.WORKER, kv_cache_config=SimpleNamespace(num_blocks=3))
        self.addCleanup(w.shutdown)
        with self.assertRaises(ValueError) as cm:
            w.register_kv_caches({f"layer.{l}": CudaLooking(kern[l]) for l in range(LAYERS)})
        self.assertIn("layer.0 has 32 blocks in dim 0, not a multiple of vLLM's 3", str(cm.exception))


def double_maps(pid: int) -> int:
    """Mappings of the driver double's device memory in process pid."""
    with open(f"/proc/{pid}/maps") as f:
        return sum(1 for line in f if "okv-cuda-double" in line)


class TestRegisterWhileTheManagerRestarts(GpuDirectCase):
    """vLLM registers its KV cache after loading its model, minutes after
    the connector connected: a Manager that restarted meanwhile must not
    crash vLLM, and the cache is registered (once) when the session is
    back."""

    def test_a_restart_before_register_kv_caches_does_not_raise_and_recovers(self):
        for name, kv in (("gpu-direct", fa_layers(self.fa)),
                         ("staging", {f"layer.{l}": torch.zeros(NUM_BLOCKS, BLOCK, HEADS, DIM) for l in range(LAYERS)})):
            with self.subTest(name):
                s = OrbitKVConnector(config(self.sock), KVConnectorRole.SCHEDULER)
                w = OrbitKVConnector(config(self.sock, **{"orbitkv.reconnect_interval_s": 0}), KVConnectorRole.WORKER)
                self.addCleanup(s.shutdown)
                self.addCleanup(w.shutdown)
                self.manager.kill()
                self.manager = self.start()
                with self.assertLogs("orbitkv.vllm", level="WARNING"):
                    w.register_kv_caches(kv)   # must not raise into vLLM
                self.assertEqual(w.kv_mode, name)
                if name == "gpu-direct":
                    self.round_trip(s, w, kv, dim=1)

    def test_a_session_down_at_register_maps_the_region_once(self):
        w = OrbitKVConnector(config(self.sock), KVConnectorRole.WORKER)
        self.addCleanup(w.shutdown)
        sess = w._worker.session
        sess.client.close()
        sess.client = None   # dropped, e.g. after a control call timed out
        w.register_kv_caches(fa_layers(self.fa))
        self.assertEqual(w.kv_mode, "gpu-direct")
        self.assertEqual(double_maps(self.manager.pid), 1, "the Manager mapped the one allocation twice")


class TestRegisterAtAHostManagerAfterAnOutage(GpuDirectCase):
    """The session is down when vLLM registers its CUDA KV cache, and the
    Manager that comes back runs --copy-backend host: its refusal of the
    region reaches the worker as a refusal, which stages (not as "no
    Manager", which would keep the refused region for every reconnect)."""

    def test_the_refusal_falls_back_to_staging(self):
        w = OrbitKVConnector(config(self.sock, **{"orbitkv.reconnect_interval_s": 0}), KVConnectorRole.WORKER)
        self.addCleanup(w.shutdown)
        self.manager.kill()
        self.backend = ()
        self.manager = self.start()
        w._worker.session.fail(Closed("test", Code.ECLOSED, "the Manager went away"))
        w.register_kv_caches(fa_layers(self.fa))
        self.assertEqual(w.kv_mode, "staging")
        self.assertEqual(len(w._worker.session._buffers), 1, "the refused region was kept for later reconnects")


class TestSchedulerAfterARestart(GpuDirectCase):
    """A scheduler answering misses from the discovery index alone
    (orbitkv.local_discovery, the default) makes no round trip that would
    find its Manager dead: it must notice the restart (the Manager's pidfd)
    and see the new Manager's blocks, not a dead index's misses for good."""

    backend = ()

    def test_the_old_scheduler_sees_the_new_managers_blocks(self):
        import time
        mk = lambda: {f"layer.{l}": torch.randn(NUM_BLOCKS, BLOCK, HEADS, DIM) for l in range(LAYERS)}
        kv = mk()
        s, w = self.connectors(kv)
        self.publish(s, w, kv, "a", list(range(11)), [5, 6, 7])
        self.manager.kill()
        self.manager = self.start()
        kv2 = mk()
        s2, w2 = self.connectors(kv2)   # another engine, on the new Manager
        prompt = list(range(50, 61))
        self.publish(s2, w2, kv2, "b", prompt, [5, 6, 7])
        seen = []
        for i in range(6):
            seen.append(s.get_num_new_matched_tokens(request(f"q{i}", prompt), 0)[0])
            if seen[-1]:
                break
            time.sleep(0.5)
        self.assertEqual(seen[-1], 8, f"the old scheduler's answers after the restart: {seen}")


class TestGpuDirectHostManager(GpuDirectCase):
    """A Manager on the host backend refuses CUDA memory: the worker stages."""

    backend = ()

    def test_the_refusal_is_logged_and_staging_round_trips_every_byte(self):
        kv = fa_layers(self.fa)
        s, w, line = self.staged(kv)
        self.assertIn("the Manager refused the CUDA region", line)
        self.assertIn("regions[0].handle_kind", line)
        self.assertIn("--copy-backend", line)
        self.round_trip(s, w, kv, dim=1)


if __name__ == "__main__":
    unittest.main()
