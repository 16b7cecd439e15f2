"""CacheManagerClient.discover_local against a real orbitkv-manager: the
resident prefix read from the mapped discovery index (docs/discover.md)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import unittest

from . import support
from .test_client import ManagerTest, engine_hashes, identity

orbitkv = support.import_orbitkv()
from orbitkv import BlockHashes, OrbitKVError, errors  # noqa: E402


class TestDiscoverLocal(ManagerTest):
    def test_the_count_is_the_resident_prefix(self):
        hs = self.publish(5)
        missing = engine_hashes(self.id() + "/missing", 1)
        c = self.client
        self.assertEqual(c.discover_local(self.ns, hs), 5)
        self.assertEqual(c.discover_local(self.ns, hs + missing), 5)
        self.assertEqual(c.discover_local(self.ns, missing + hs), 0)
        self.assertEqual(c.discover_local(self.ns, []), 0)
        self.assertEqual(c.discover_local(self.ns, hs[:3]), 3)

    def test_a_ram_only_manager_marks_a_local_miss_final(self):
        self.assertTrue(self.client.discover_complete(self.ns))

    def test_batches_and_views_are_read_in_place(self):
        hs = self.publish(4)
        batch = BlockHashes(hs + engine_hashes(self.id() + "/tail", 2))
        self.assertEqual(self.client.discover_local(self.ns, batch), 4)
        self.assertEqual(self.client.discover_local(self.ns, orbitkv.HashView(batch, 2)), 2)

    def test_the_answer_agrees_with_the_leased_query(self):
        hs = self.publish(6)
        local = self.client.discover_local(self.ns, hs)
        a = self.client.query_untracked(self.ns, hs)
        self.assertEqual(local, a.hit_count)
        if a.lease_id:
            self.client.release(a.lease_id)
        self.assertIdle()

    def test_another_namespace_sees_none_of_these_blocks(self):
        hs = self.publish(3)
        other = identity(self.id() + "/other").namespace()
        self.assertEqual(self.client.discover_local(other, hs), 0)

    def test_a_bad_namespace_is_refused_before_any_call(self):
        with self.assertRaises(errors.BadArgument):
            self.client.discover_local(b"short", [])
        with self.assertRaises(OrbitKVError):
            self.client.discover_open(bytes(16))


class TestDiscoverWithAnSSDTier(ManagerTest):
    @classmethod
    def setUpClass(cls):
        # Under build/ (ignored, on the checkout's filesystem): /tmp may be a
        # tmpfs, which not every kernel opens with O_DIRECT.
        build = os.path.join(os.path.dirname(__file__), "..", "..", "build")
        os.makedirs(build, exist_ok=True)
        cls.ssd = tempfile.mkdtemp(prefix="pytest-ssd-", dir=build)
        cls.manager_flags = ("--ssd-dir", cls.ssd, "--ssd-capacity", "8MiB", "--ssd-slot-bytes", "64KiB")
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.ssd, ignore_errors=True)

    def test_a_local_miss_is_not_final_below_an_ssd_tier(self):
        self.assertFalse(self.client.discover_complete(self.ns))


class TestDiscoverBudget(ManagerTest):
    # 64 MiB of 16 KiB chunks: 4,096 blocks, a table of 256 KiB and 64
    # bytes; 300 KiB holds one, which each test's filler namespace takes.
    manager_flags = ("--discover-bytes", "300KiB")

    def setUp(self):
        super().setUp()
        # An earlier test's session gives its table back when the Manager
        # tears it down, which may come a moment after its close.
        filler = identity(self.id() + "/filler").namespace()
        deadline = time.monotonic() + 30
        while True:
            try:
                self.client.discover_open(filler)
                return
            except OrbitKVError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def test_an_index_past_the_budget_is_refused_naming_the_flag(self):
        with self.assertRaises(OrbitKVError) as cm:
            self.client.discover_open(self.ns)
        self.assertIn("--discover-bytes", str(cm.exception))
        # The session stays usable: the round trip still answers.
        hs = self.publish(2)
        a = self.client.query_untracked(self.ns, hs)
        self.assertEqual(a.hit_count, 2)
        self.client.release(a.lease_id)

    def test_a_refusal_is_answered_again_from_memory_without_a_round_trip(self):
        # The vLLM scheduler asks discover_complete/discover_local per shard
        # per request: after a refusal the client must not send MapDiscovery
        # (~140 us) on each; it repeats the Manager's answer for 1 s.
        with self.assertRaises(OrbitKVError) as first:
            self.client.discover_local(self.ns, [])
        for call in ("discover_complete", "discover_local", "discover_open"):
            with self.subTest(call=call):
                args = (self.ns, []) if call == "discover_local" else (self.ns,)
                with self.assertRaises(type(first.exception)) as cm:
                    getattr(self.client, call)(*args)
                self.assertIn("--discover-bytes", str(cm.exception))
                self.assertIn("ms ago; asked again 1000 ms after it", str(cm.exception))


class TestDiscoverBusy(unittest.TestCase):
    def test_a_stalled_bucket_is_its_own_error_not_a_lost_reply(self):
        # okv_discover_local's OKV_EDISCOVER_BUSY: nothing was sent, so it
        # must not read as TimedOut (which the adapters treat as a wedged
        # session and end it).
        e = errors.error_from_code("discover_local", orbitkv._abi.Code.EDISCOVER_BUSY)
        self.assertIsInstance(e, errors.IndexBusy)
        self.assertNotIsInstance(e, errors.TimedOut)
        self.assertEqual(e.status, "IndexBusy")
        self.assertIn("mid-update", str(e))
        self.assertIn("nothing was sent", str(e))


class TestDiscoverDisabled(ManagerTest):
    manager_flags = ("--discover-bytes", "0")

    def test_a_manager_serving_no_index_refuses_with_the_reason(self):
        hs = self.publish(2)
        with self.assertRaises(OrbitKVError) as cm:
            self.client.discover_local(self.ns, hs)
        self.assertIn("serves no discovery indexes", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
