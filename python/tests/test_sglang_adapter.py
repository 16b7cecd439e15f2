"""The SGLang adapter (orbitkv.sglang.OrbitKVStorage): HiCache's calls
against a real Manager, with a pool in an OrbitKV buffer (zero copy) and a
pool of plain tensors (staging), and the failures HiCache must survive."""

from __future__ import annotations

import errno
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

from orbitkv.sglang import OrbitKVStorage  # noqa: E402
from orbitkv.vllm import OptionError  # noqa: E402

PAGE, LAYERS, PAGES, HEADS, DIM = 4, 2, 8, 2, 4


def setUpModule():
    logging.getLogger("orbitkv").setLevel(logging.ERROR)


def storage_config(sock: str, **extra) -> SimpleNamespace:
    cfg = {"orbitkv.bootstrap_socket": sock, "orbitkv.reconnect_interval_s": 0}
    cfg.update(extra)
    return SimpleNamespace(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                           is_mla_model=False, model_name="unit/model", extra_config=cfg)


class FakeHostPool:
    """SGLang's MHATokenToKVPoolHost, layer_first: kv [2, layers, slots, heads, dim]."""

    def __init__(self):
        self.page_size, self.dtype, self.layout = PAGE, torch.float32, "layer_first"
        self.kv = torch.randn(2, LAYERS, PAGES * PAGE, HEADS, DIM)

    def get_data_page(self, index, flat=True):
        return self.kv[:, :, index:index + self.page_size].flatten()

    def set_from_flat_data_page(self, index, data):
        self.kv[:, :, index:index + self.page_size] = data.reshape(2, LAYERS, self.page_size, HEADS, DIM)


def slots(pages):
    return torch.tensor([p * PAGE + i for p in pages for i in range(PAGE)], dtype=torch.int64)


class TestConstruction(unittest.TestCase):
    def test_a_bad_socket_or_option_fails_at_construction(self):
        path = os.path.join(tempfile.gettempdir(), "orbitkv-no-such-dir", "okv.sock")
        with support.hang_guard(30):
            with self.assertRaises(orbitkv.NativeOSError) as cm:
                OrbitKVStorage(storage_config(path), {})
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        self.assertIn("orbitkv.bootstrap_socket", str(cm.exception))
        with self.assertRaises(OptionError) as cm:
            OrbitKVStorage(storage_config(path, **{"orbitkv.staging_page": 4}), {})
        self.assertIn("orbitkv.staging_page", str(cm.exception))


@unittest.skipIf(torch is None, "torch not installed (python3-torch)")
class TestStorage(unittest.TestCase):
    def setUp(self):
        from orbitkv.testing.manager import ManagerProcess, free_port
        if not os.access(support.MANAGER_BIN, os.X_OK):
            self.skipTest(f"{support.MANAGER_BIN} not built (run `make go`)")
        self.dir = tempfile.mkdtemp(prefix="orbitkv-pytest-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.sock = os.path.join(self.dir, "okv.sock")
        port = free_port()
        self.start = lambda: ManagerProcess(support.MANAGER_BIN, self.sock, port, ram="64MiB")
        self.manager = self.start()
        self.addCleanup(lambda: self.manager.kill())

    def storage(self, pool):
        st = OrbitKVStorage(storage_config(self.sock), {})
        self.addCleanup(st.close)
        st.register_mem_pool_host(pool)
        return st

    def buffer_pool(self):
        buf = orbitkv.EngineBuffer(LAYERS, 2 * PAGE * HEADS * DIM * 4, PAGES)
        mem = torch.frombuffer(buf.memoryview(), dtype=torch.float32)
        mem.copy_(torch.randn(mem.numel()))
        return SimpleNamespace(page_size=PAGE, dtype=torch.float32, layout="layer_first", orbitkv_buffer=buf), mem

    def test_pages_set_from_a_buffer_pool_are_found_and_read_back_in_place(self):
        pool, mem = self.buffer_pool()
        st = self.storage(pool)
        keys = ["k0", "k1", "k2"]
        self.assertEqual(st.batch_exists(keys), 0)
        self.assertEqual(st.batch_set_v1(keys, slots([0, 1, 2])), [True] * 3)
        self.assertEqual(st.batch_set_v1(keys[:1], slots([0])), [True])  # already held: success
        self.assertEqual(st.stats["present_pages"], 1)
        self.assertEqual(st.batch_exists(keys + ["k9"]), 3)
        self.assertEqual(st.batch_exists(["k9"] + keys), 0)  # consecutive from the start
        view = mem.view(LAYERS, PAGES, -1)
        want = view[:, 0:3].clone()
        view[:, 4:7] = 0
        self.assertEqual(st.batch_get_v1(keys + ["k9"], slots([4, 5, 6, 7])), [True, True, True, False])
        self.assertTrue(torch.equal(view[:, 4:7], want))
        self.assertEqual(st.stats["restored_bytes"], 3 * LAYERS * pool.orbitkv_buffer.page_bytes)

    def test_a_plain_pool_goes_through_staging(self):
        pool = FakeHostPool()
        st = self.storage(pool)
        self.assertFalse(st.zero_copy)
        self.assertEqual(st.batch_set_v1(["a", "b"], slots([1, 2])), [True, True])
        want = pool.kv[:, :, PAGE:3 * PAGE].clone()
        pool.kv[:, :, 5 * PAGE:7 * PAGE] = 0
        self.assertEqual(st.batch_get_v1(["a", "b"], slots([5, 6])), [True, True])
        self.assertTrue(torch.equal(pool.kv[:, :, 5 * PAGE:7 * PAGE], want))

    def test_bad_calls_raise_clearly(self):
        st = OrbitKVStorage(storage_config(self.sock), {})
        self.addCleanup(st.close)
        with self.assertRaises(RuntimeError):
            st.batch_exists(["k"])
        st.register_mem_pool_host(self.buffer_pool()[0])
        with self.assertRaises(ValueError):
            st.batch_get_v1(["a", "b"], slots([0]))   # 2 keys, 1 page of slots
        with self.assertRaises(ValueError):
            st.batch_exists([""])

    def test_a_dead_manager_is_a_miss_and_a_restarted_one_serves_again(self):
        pool, _ = self.buffer_pool()
        st = self.storage(pool)
        self.assertEqual(st.batch_set_v1(["a"], slots([0])), [True])
        self.manager.kill()
        with support.hang_guard(60):
            self.assertEqual(st.batch_exists(["a"]), 0)
            self.assertEqual(st.batch_get_v1(["a"], slots([1])), [False])
            self.assertEqual(st.batch_set_v1(["b"], slots([1])), [False])
            self.manager = self.start()
            self.assertEqual(st.batch_exists(["a"]), 0)  # a new, empty Manager
            self.assertEqual(st.batch_set_v1(["a"], slots([0])), [True])
            self.assertEqual(st.batch_get_v1(["a"], slots([2])), [True])
        self.assertEqual(len(set(st.session.epochs)), 2)


if __name__ == "__main__":
    unittest.main()
