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
        # All three answered from the shared-memory discovery index, no round trip.
        self.assertEqual((st.stats["local_exists"], st.stats["exists_calls"]), (3, 3))
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


class BigHostPool(FakeHostPool):
    """FakeHostPool with 64 pages."""

    def __init__(self):
        super().__init__()
        self.kv = torch.zeros(2, LAYERS, 64 * PAGE, HEADS, DIM)

    def fill(self, page, value):
        self.kv[:, :, page * PAGE:(page + 1) * PAGE] = value

    def holds(self, page, value):
        return bool(torch.all(self.kv[:, :, page * PAGE:(page + 1) * PAGE] == value))


class TestConcurrencyAndFailures(unittest.TestCase):
    """HiCache's prefetch and backup threads call one backend at once; a
    failed publish; the older calls; key hashing."""

    setUp = TestStorage.setUp
    storage = TestStorage.storage
    buffer_pool = TestStorage.buffer_pool

    def test_concurrent_get_and_set_through_staging_never_mix_pages(self):
        import threading
        import time
        pool = BigHostPool()
        st = OrbitKVStorage(storage_config(self.sock, **{"orbitkv.staging_pages": 4}), {})
        self.addCleanup(st.close)
        st.register_mem_pool_host(pool)
        self.assertFalse(st.zero_copy)
        N = 8
        for p in range(N):
            pool.fill(p, float(p + 1))
        self.assertEqual(st.batch_set_v1([f"A{i}" for i in range(N)], slots(range(N))), [True] * N)
        stop = time.monotonic() + 1.5
        wrong, published, errors = [], [], []

        def getter():
            try:
                while time.monotonic() < stop:
                    for p in range(16, 16 + N):
                        pool.fill(p, -1.0)
                    ok = st.batch_get_v1([f"A{i}" for i in range(N)], slots(range(16, 16 + N)))
                    wrong.extend(i for i, good in enumerate(ok) if good and not pool.holds(16 + i, float(i + 1)))
            except BaseException as e:  # pragma: no cover
                errors.append(e)

        def setter():
            try:
                j = 0
                while time.monotonic() < stop:
                    j += 1
                    base = 32 + (j % 2) * N
                    for p in range(N):
                        pool.fill(base + p, 1000.0 + j)
                    published.append((j, st.batch_set_v1([f"B{j}-{i}" for i in range(N)], slots(range(base, base + N)))))
            except BaseException as e:  # pragma: no cover
                errors.append(e)

        with support.hang_guard(60):
            threads = [threading.Thread(target=getter), threading.Thread(target=setter)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        self.assertEqual(errors, [])
        self.assertEqual(wrong, [], "pages reported True hold another page's bytes")
        self.assertGreater(len(published), 2)
        poisoned = 0
        for j, res in published[-10:]:
            for p in range(48, 48 + N):
                pool.fill(p, -5.0)
            ok = st.batch_get_v1([f"B{j}-{i}" for i in range(N)], slots(range(48, 48 + N)))
            for i in range(N):
                if res[i] and ok[i] and not pool.holds(48 + i, 1000.0 + j):
                    poisoned += 1
        self.assertEqual(poisoned, 0, "wrong bytes published under a key")

    def test_a_publish_that_fails_reports_false_for_its_pages(self):
        pool, _ = self.buffer_pool()
        st = self.storage(pool)
        self.assertEqual(st.batch_set_v1(["a"], slots([0])), [True])
        self.manager.kill()   # the session still holds its client: publish itself fails
        with support.hang_guard(60):
            self.assertEqual(st.batch_set_v1(["b", "c"], slots([1, 2])), [False, False])
        self.assertEqual(st.stats["set_failed_pages"], 2)

    def test_legacy_calls_fail_softly_naming_interface_v1_once(self):
        pool, _ = self.buffer_pool()
        st = self.storage(pool)
        with self.assertLogs("orbitkv.sglang", level="WARNING") as logs:
            self.assertIsNone(st.get("a"))
            self.assertEqual(st.batch_get(["a", "b"]), [None, None])
            self.assertFalse(st.set("a", torch.zeros(4)))
            self.assertFalse(st.batch_set(["a"], [torch.zeros(4)]))
        self.assertEqual(len(logs.output), 1)
        self.assertIn("interface_v1", logs.output[0])
        self.assertFalse(st.exists("nothing"))

    def test_keys_differing_only_late_map_to_different_hashes(self):
        from orbitkv.sglang import key_hash
        a, b = "0123456789abcdef" * 4, "0123456789abcdef" * 3 + "0123456789abcdee"
        self.assertNotEqual(key_hash(a), key_hash(b))
        pool, _ = self.buffer_pool()
        st = self.storage(pool)
        self.assertEqual(st.batch_set_v1([a], slots([0])), [True])
        self.assertEqual(st.batch_exists([b]), 0)


class TestRevision(unittest.TestCase):
    def test_a_missing_revision_is_derived_from_a_local_model_directory(self):
        from orbitkv.revision import derive_revision, resolve_revision
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(derive_revision(d), "")   # no config.json
            with open(os.path.join(d, "config.json"), "w") as f:
                f.write('{"hidden_size": 64}')
            r1 = resolve_revision("", d)
            self.assertTrue(r1.startswith("sha256:"))
            with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
                f.write('{"weight_map": {}}')
            r2 = resolve_revision(None, d)
            self.assertNotEqual(r1, r2)
            self.assertEqual(resolve_revision("abc", d), "abc")
        with self.assertLogs("orbitkv.adapter", level="WARNING") as logs:
            self.assertEqual(resolve_revision("", "some-org/some-model-xyz"), "")
        self.assertIn("could be reused", logs.output[0])


if __name__ == "__main__":
    unittest.main()
