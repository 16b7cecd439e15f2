"""CacheManagerClient against a real orbitkv-manager: the cache round trip,
tickets, errors that name what failed, and closing."""

from __future__ import annotations

import gc
import os
import selectors
import threading
import time
import unittest

from . import support

orbitkv = support.import_orbitkv()
from orbitkv import BlockHashes, CacheIdentity, CacheManagerClient, EngineBuffer, QueryFlags  # noqa: E402

LAYERS, PAGE, PAGES = 3, 4096, 16


def identity(name: str, **change) -> CacheIdentity:
    fields = dict(model_id=f"test/{name}", revision="r1", dtype="bfloat16", kv_layout="test-layout",
                  block_tokens=16, tp_rank=0, tp_size=1, pp_rank=0, pp_size=1)
    fields.update(change)
    return CacheIdentity(**fields)


def engine_hashes(name: str, n: int) -> list[bytes]:
    return [orbitkv.block_hash16((name, i)) for i in range(n)]


class ManagerTest(unittest.TestCase):
    """One Manager for the class, one client and buffer per test."""

    manager_flags: tuple[str, ...] = ()

    @classmethod
    def setUpClass(cls):
        cls.manager = support.Manager(*cls.manager_flags)

    @classmethod
    def tearDownClass(cls):
        cls.manager.stop()

    def setUp(self):
        # Cleanups run in reverse order (client before its buffer), also
        # when setUp fails half-way.
        self.buf = EngineBuffer(LAYERS, PAGE, PAGES)
        self.addCleanup(self.buf.close)
        self.client = CacheManagerClient(socket_path=self.manager.socket, instance_id=self.id()[-64:])
        self.addCleanup(self.client.close)
        self.bid = self.client.register_buffer(self.buf)
        self.ns = identity(self.id()).namespace()

    def fill(self, pages) -> None:
        for layer in range(LAYERS):
            for p in pages:
                self.buf.page(layer, p)[:] = os.urandom(PAGE)

    def publish(self, n: int, name: str | None = None) -> list[bytes]:
        hs = engine_hashes(name or self.id(), n)
        self.fill(range(n))
        self.assertEqual(self.client.publish(self.ns, self.bid, hs, list(range(n))), (n, 0))
        return hs

    def assertIdle(self, client=None):
        # The session's own figures, and the whole Manager's (GET /health):
        # a session's Health shows only its own, so no tenant sees another's.
        h = (client or self.client).health()
        self.assertEqual((h["leases"], h["pins"], h["reserved_bytes"], h["tickets"]), (0, 0, 0, 0), h)
        m = self.manager.health()
        self.assertEqual((m["leases"], m["pins"], m["reserved_bytes"], m["tickets"]), (0, 0, 0, 0), m)


class TestSession(ManagerTest):
    def test_connect_ping_and_health_report_every_field(self):
        c = self.client
        self.assertEqual(c.ping(0xDEADBEEF), 0xDEADBEEF)
        h = c.health()
        self.assertEqual(set(h), {name for name, _ in orbitkv._abi.Health._fields_})
        self.assertEqual(h["status"], "serving")
        self.assertEqual(h["epoch"], c.epoch)
        self.assertEqual(h["manager_pid"], self.manager.pid)
        # Manager-wide figures are the operator's (GET /health), not a session's.
        self.assertEqual((h["sessions"], h["blocks"], h["lookups"]), (0, 0, 0))
        self.assertGreaterEqual(self.manager.health()["sessions"], 1)
        self.assertEqual(h["ram_capacity_bytes"], 64 << 20)
        # The reply's extension record (up to 64 bytes) and the Health
        # frame (struct okv_health.version: up to 31 bytes) agree.
        self.assertTrue(c.manager_version)
        self.assertEqual(c.manager_version[:31], h["version"])
        self.assertIsInstance(h["service_id"], bytes)
        self.assertEqual(len(h["service_id"]), 16)
        self.assertGreater(c.max_query_hashes, 0)
        self.assertGreater(c.max_restore_entries, 0)
        self.assertGreater(c.max_publish_entries, 0)

    def test_publish_lookup_restore_release_round_trips_the_bytes(self):
        n = 6
        hs = self.publish(n)
        self.assertEqual(self.client.publish(self.ns, self.bid, hs, list(range(n))), (0, n))
        bh = BlockHashes(hs + engine_hashes("not published", 2))
        answer = self.client.lookup(self.ns, bh)
        self.assertEqual(answer.status, "Ok")
        self.assertEqual(answer.hit_count, n)
        self.assertEqual(answer.block_bytes, LAYERS * PAGE)
        self.assertEqual(answer.lease_bytes, n * LAYERS * PAGE)
        self.assertNotEqual(answer.lease_id, 0)
        dest = [8 + i for i in range(n)]
        op = self.client.start_restore(answer.lease_id, self.bid, list(zip(range(n), dest)))
        self.client.wait_restore(op, timeout_s=10)
        for layer in range(LAYERS):
            for i in range(n):
                self.assertEqual(bytes(self.buf.page(layer, dest[i])), bytes(self.buf.page(layer, i)),
                                 f"layer {layer} block {i}")
        self.client.release(answer.lease_id)
        self.assertIdle()

    def test_a_prefix_view_looks_up_only_its_hashes(self):
        hs = self.publish(5)
        bh = BlockHashes(hs)
        answer = self.client.lookup(self.ns, bh[:3])
        self.assertEqual((answer.status, answer.hit_count), ("Ok", 3))
        self.client.release(answer.lease_id)

    def test_namespaces_of_two_identities_differ_and_share_nothing(self):
        a = identity("shared-model", tp_rank=0, tp_size=2)
        b = identity("shared-model", tp_rank=1, tp_size=2)
        self.assertNotEqual(a.namespace(), b.namespace())
        hs = engine_hashes(self.id(), 3)
        self.fill(range(3))
        self.assertEqual(self.client.publish(a.namespace(), self.bid, hs, [0, 1, 2]), (3, 0))
        other = self.client.lookup(b.namespace(), hs)
        self.assertEqual((other.status, other.hit_count, other.lease_id), ("Miss", 0, 0))
        mine = self.client.lookup(a.namespace(), hs)
        self.assertEqual((mine.status, mine.hit_count), ("Ok", 3))
        self.client.release(mine.lease_id)

    def test_a_terminal_ticket_is_retired_and_wait_returns_its_answer(self):
        hs = self.publish(2)
        t = self.client.query(self.ns, BlockHashes(hs), request_id=7, group=3)
        self.assertFalse(t.live)
        self.assertEqual(t.answer.status, "Ok")
        self.assertEqual(self.client.wait(t, 1.0), t.answer)
        self.assertEqual(self.client.poll(t), t.answer)  # answered locally, nothing sent
        self.assertFalse(self.client.cancel(t))
        self.client.retire(t)
        self.client.retire(t)
        self.client.release(t.answer.lease_id)
        self.assertIdle()

    def test_discover_and_recovery_queries(self):
        hs = self.publish(4)
        bh = BlockHashes(hs)
        found = self.client.lookup(self.ns, bh, flags=QueryFlags.DISCOVER)
        self.assertEqual((found.status, found.hit_count, found.lease_id), ("Candidates", 4, 0))
        rec = self.client.lookup(self.ns, bh, recovery=(1, 2))
        self.assertEqual((rec.status, rec.first, rec.hit_count), ("Ok", 1, 2))
        self.client.release(rec.lease_id)
        with self.assertRaises(ValueError):
            self.client.query(self.ns, bh, recovery=(3, 2))
        with self.assertRaises(ValueError):
            self.client.query(self.ns, bh, flags=QueryFlags.RECOVERY)

    def test_untracked_query(self):
        hs = self.publish(2)
        a = self.client.query_untracked(self.ns, BlockHashes(hs))
        self.assertEqual((a.status, a.hit_count), ("Ok", 2))
        self.client.release(a.lease_id)
        miss = self.client.query_untracked(self.ns, engine_hashes("nothing", 1))
        self.assertEqual((miss.status, miss.lease_id), ("Miss", 0))


class TestTickets(ManagerTest):
    def test_poll_claim_and_cancel_of_prepare_tickets(self):
        hs = self.publish(3)
        bh = BlockHashes(hs)
        t = self.client.query(self.ns, bh, flags=QueryFlags.PREPARE)
        self.assertTrue(t.live)
        answer = self.client.poll(t)
        self.assertEqual((answer.status, answer.lease_id), ("Candidates", 0))
        self.assertTrue(t.live)
        self.assertTrue(t.ready)
        self.assertEqual(self.client.wait(t, 5), answer)
        claimed = self.client.claim(t)
        self.assertEqual((claimed.status, claimed.hit_count), ("Ok", 3))
        self.assertFalse(t.live)
        self.assertEqual(self.client.poll(t), claimed)
        with self.assertRaises(orbitkv.InvalidRequest):
            self.client.claim(t)
        self.client.release(claimed.lease_id)

        t2 = self.client.query(self.ns, bh, flags=QueryFlags.PREPARE)
        self.assertTrue(self.client.cancel(t2))
        self.assertFalse(t2.live)
        self.assertFalse(self.client.cancel(t2))
        with self.assertRaises(orbitkv.InvalidRequest) as cm:
            self.client.poll(t2)
        self.assertIn("cancelled", str(cm.exception))
        with self.assertRaises(orbitkv.InvalidRequest):
            self.client.claim(t2)
        self.assertIdle()

    def test_revise_with_an_identical_view_sends_no_new_revision(self):
        hs = self.publish(4)
        bh = BlockHashes(hs)
        t = self.client.query(self.ns, bh[:4], flags=QueryFlags.PREPARE)
        self.assertEqual(t.revision, 1)
        before = self.client.health()["requests"]
        self.client.revise(t, bh.view())      # same batch, same length
        self.client.revise(t, bh[:4])
        self.assertEqual(t.revision, 1)
        self.assertIs(t.view.batch, bh)
        answer = self.client.revise(t, bh[:2])
        self.assertEqual(t.revision, 2)
        self.assertEqual(answer.revision, 2)
        self.assertEqual(answer.hit_count, 2)
        self.assertEqual(t.view, bh[:2])
        same_bytes = BlockHashes(hs)          # equal hashes, another batch: a new revision
        self.client.revise(t, same_bytes[:2])
        self.assertEqual(t.revision, 3)
        claimed = self.client.claim(t)
        self.assertEqual((claimed.status, claimed.hit_count, claimed.revision), ("Ok", 2, 3))
        self.client.release(claimed.lease_id)
        self.assertGreater(self.client.health()["requests"], before)

    def test_a_revise_that_changes_flags_is_refused_and_the_revision_stays(self):
        bh = BlockHashes(self.publish(2))
        t = self.client.query(self.ns, bh, flags=QueryFlags.PREPARE)
        with self.assertRaises(orbitkv.InvalidRequest) as cm:
            self.client.revise(t, bh[:1], flags=QueryFlags.DISCOVER)
        self.assertEqual(cm.exception.field, "desc_flags")
        self.assertEqual(t.revision, 1)
        self.assertTrue(t.live)
        self.client.retire(t)
        self.assertFalse(t.live)

    def test_a_dropped_live_ticket_is_cancelled_on_the_next_call(self):
        bh = BlockHashes(self.publish(1))
        t = self.client.query(self.ns, bh, flags=QueryFlags.PREPARE)
        self.assertEqual(self.client.health()["tickets"], 1)
        del t
        gc.collect()
        self.client.ping()
        self.assertIdle()

    def test_close_cancels_live_tickets(self):
        bh = BlockHashes(self.publish(1))
        other = CacheManagerClient(socket_path=self.manager.socket)
        t = other.query(self.ns, bh, flags=QueryFlags.PREPARE)
        other.close()
        self.assertFalse(t.live)
        with self.assertRaises(orbitkv.Closed):
            other.poll(t)
        other.retire(t)
        deadline = time.monotonic() + 5
        while self.client.health()["tickets"] and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertIdle()


class TestThreads(ManagerTest):
    def test_calls_from_several_threads_on_one_client_are_serialised(self):
        hs = self.publish(4)
        bh = BlockHashes(hs)
        errors = []

        def work(k: int) -> None:
            try:
                for i in range(40):
                    self.assertEqual(self.client.ping(k * 1000 + i), k * 1000 + i)
                    a = self.client.lookup(self.ns, bh[:1 + (i % 4)])
                    self.assertEqual(a.hit_count, 1 + (i % 4))
                    self.client.release(a.lease_id)
            except Exception as e:  # reported below: a thread's failure must fail the test
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        with support.hang_guard(120):
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        self.assertEqual(errors, [])
        self.assertIdle()


class TestRestoreNotification(ManagerTest):
    def test_notification_fd_works_with_selectors_while_a_restore_completes(self):
        n = 4
        hs = self.publish(n)
        answer = self.client.lookup(self.ns, hs)
        self.assertEqual(answer.hit_count, n)
        fd = self.client.notification_fd()
        try:
            os.read(fd, 8)  # drain what earlier operations signalled
        except BlockingIOError:
            pass
        op = self.client.start_restore(answer.lease_id, self.bid, [(i, 8 + i) for i in range(n)])
        notified = done = False
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            deadline = time.monotonic() + 10
            while not done and time.monotonic() < deadline:
                for _key, _ev in sel.select(timeout=0.5):
                    notified = True
                    try:
                        os.read(fd, 8)
                    except BlockingIOError:
                        pass
                done = self.client.poll_restore(op)
        self.assertTrue(done, "restore did not complete within 10 s")
        self.assertTrue(notified, "the session eventfd never became readable")
        with self.assertRaises(orbitkv.InvalidRequest) as cm:
            self.client.poll_restore(op)  # consumed
        self.assertEqual(cm.exception.field, "op_id")
        for layer in range(LAYERS):
            for i in range(n):
                self.assertEqual(bytes(self.buf.page(layer, 8 + i)), bytes(self.buf.page(layer, i)))
        self.client.release(answer.lease_id)


class TestBadInput(ManagerTest):
    def test_publish_to_a_buffer_not_registered_names_the_buffer(self):
        hs = engine_hashes(self.id(), 1)
        with self.assertRaises(ValueError) as cm:
            self.client.publish(self.ns, 77, hs, [0])
        self.assertIn("buffer_id 77", str(cm.exception))
        self.assertIn("not registered", str(cm.exception))

    def test_restore_into_a_buffer_not_registered_is_refused_naming_the_field(self):
        answer = self.client.lookup(self.ns, self.publish(1))
        with self.assertRaises(orbitkv.InvalidRequest) as cm:
            self.client.start_restore(answer.lease_id, 77, [(0, 0)])
        self.assertEqual(cm.exception.field, "buffer_id")
        self.assertEqual(cm.exception.status, "Invalid")
        self.assertIn("buffer 77", str(cm.exception))
        self.client.release(answer.lease_id)

    def test_a_page_out_of_range_names_the_field_and_entry(self):
        answer = self.client.lookup(self.ns, self.publish(2))
        with self.assertRaises(orbitkv.InvalidRequest) as cm:
            self.client.start_restore(answer.lease_id, self.bid, [(0, 5), (1, PAGES)])
        self.assertEqual((cm.exception.field, cm.exception.entry), ("page", 1))
        self.assertIn("field page, entry 1", str(cm.exception))
        with self.assertRaises(orbitkv.InvalidRequest) as cm:
            self.client.publish(self.ns, self.bid, engine_hashes("x", 3), [0, 1, PAGES + 3])
        self.assertEqual((cm.exception.field, cm.exception.entry), ("page", 2))
        self.assertTrue(str(cm.exception).startswith("publish to buffer"), str(cm.exception))
        self.client.release(answer.lease_id)
        with self.assertRaises(orbitkv.InvalidRequest) as cm:
            self.client.release(answer.lease_id)
        self.assertEqual(cm.exception.field, "lease_id")

    def test_hashes_of_the_wrong_width_name_the_index(self):
        hs = engine_hashes(self.id(), 3)
        hs[2] = hs[2][:15]
        with self.assertRaises(ValueError) as cm:
            self.client.publish(self.ns, self.bid, hs, [0, 1, 2])
        self.assertIn("hash 2", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            self.client.query(self.ns, hs)
        self.assertIn("hash 2", str(cm.exception))

    def test_arguments_out_of_range_are_refused_before_sending(self):
        hs = engine_hashes(self.id(), 2)
        cases = [
            ("pages and hashes differ", lambda: self.client.publish(self.ns, self.bid, hs, [0])),
            ("negative page", lambda: self.client.publish(self.ns, self.bid, hs, [0, -1])),
            ("short namespace", lambda: self.client.query(b"short", hs)),
            ("empty view", lambda: self.client.query(self.ns, BlockHashes(hs)[:0])),
            ("no entries", lambda: self.client.start_restore(1, self.bid, [])),
            ("entry not a pair", lambda: self.client.start_restore(1, self.bid, [(1, 2, 3)])),
            ("unknown flag bits", lambda: self.client.query(self.ns, hs, flags=0x40)),
            ("zero timeout", lambda: self.client.wait_restore(1, 0)),
        ]
        for name, call in cases:
            with self.subTest(name):
                with self.assertRaises(ValueError):
                    call()
        self.assertEqual(self.client.publish(self.ns, self.bid, [], []), (0, 0))
        self.client.ping()

    def test_a_registered_buffer_cannot_be_closed_before_its_client(self):
        buf = EngineBuffer(1, 64, 4)
        client = CacheManagerClient(socket_path=self.manager.socket)
        client.register_buffer(buf)
        with self.assertRaises(orbitkv.BufferInUse):
            buf.close()
        client.close()
        buf.close()
        with self.assertRaises(ValueError):
            self.client.register_buffer(buf)

    def test_every_call_after_close_raises_closed(self):
        c = CacheManagerClient(socket_path=self.manager.socket)
        buf = EngineBuffer(1, 64, 2)
        bid = c.register_buffer(buf)
        bh = BlockHashes(engine_hashes(self.id(), 1))
        t = c.query(self.ns, bh, flags=QueryFlags.PREPARE)
        c.close()
        c.close()
        self.assertTrue(c.closed)
        calls = {
            "ping": lambda: c.ping(),
            "health": lambda: c.health(),
            "epoch": lambda: c.epoch,
            "notification_fd": lambda: c.notification_fd(),
            "max_query_hashes": lambda: c.max_query_hashes,
            "register_buffer": lambda: c.register_buffer(EngineBuffer(1, 64, 1)),
            "query": lambda: c.query(self.ns, bh),
            "poll": lambda: c.poll(t),
            "revise": lambda: c.revise(t, bh[:1]),
            "claim": lambda: c.claim(t),
            "cancel": lambda: c.cancel(t),
            "wait": lambda: c.wait(t, 1),
            "lookup": lambda: c.lookup(self.ns, bh),
            "query_untracked": lambda: c.query_untracked(self.ns, bh),
            "publish": lambda: c.publish(self.ns, bid, [bh[0]], [0]),
            "start_restore": lambda: c.start_restore(1, bid, [(0, 0)]),
            "poll_restore": lambda: c.poll_restore(1),
            "wait_restore": lambda: c.wait_restore(1, 1),
            "release": lambda: c.release(1),
        }
        for name, call in calls.items():
            with self.subTest(name):
                with self.assertRaises(orbitkv.Closed) as cm:
                    call()
                self.assertEqual(cm.exception.status, "Closed")
                self.assertIn("closed", str(cm.exception))
        c.retire(t)  # retire works on a closed client
        buf.close()


class TestUnadmitted(ManagerTest):
    manager_flags = ("--max-ops-per-session", "1")

    def test_a_query_beyond_the_operation_bound_is_unadmitted(self):
        bh = BlockHashes(self.publish(2))
        t = self.client.query(self.ns, bh, flags=QueryFlags.PREPARE)  # holds the one operation
        self.assertTrue(t.live)
        with self.assertRaises(orbitkv.Unadmitted) as cm:
            self.client.query(self.ns, bh)
        self.assertEqual(cm.exception.status, "Unadmitted")
        self.assertTrue(str(cm.exception).startswith("query: "), str(cm.exception))
        with self.assertRaises(orbitkv.Unadmitted):
            self.client.lookup(self.ns, bh)
        claimed = self.client.claim(t)
        self.assertEqual(self.client.lookup(self.ns, bh, flags=QueryFlags.DISCOVER).hit_count, 2)
        op = self.client.start_restore(claimed.lease_id, self.bid, [(0, 4)])  # the restore holds it now
        with self.assertRaises(orbitkv.Unadmitted):
            self.client.query(self.ns, bh)
        self.client.wait_restore(op, 10)
        self.client.release(claimed.lease_id)
        self.assertIdle()


class TestByteBudgetWait(ManagerTest):
    # Blocks of LAYERS * PAGE = 12 KiB (one 16 KiB RAM chunk each); the
    # lease budget holds two, so a third waits (Loading) for a release.
    manager_flags = ("--lease-budget", "24KiB")

    def test_wait_times_out_then_wakes_when_budget_is_released(self):
        hs = self.publish(3)
        first = self.client.lookup(self.ns, hs[:2])
        self.assertEqual(first.hit_count, 2)
        t = self.client.query(self.ns, [hs[2]])
        self.assertTrue(t.live)
        self.assertEqual(t.answer.status, "Loading")
        start = time.monotonic()
        with self.assertRaises(orbitkv.TimedOut) as cm:
            self.client.wait(t, 0.3)
        self.assertGreaterEqual(time.monotonic() - start, 0.29)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertTrue(t.live)
        releaser = threading.Timer(0.2, self.client.release, args=(first.lease_id,))
        releaser.start()
        with support.hang_guard(60):
            answer = self.client.wait(t, 10)
        releaser.join()
        self.assertEqual((answer.status, answer.hit_count), ("Ok", 1))
        self.assertFalse(t.live)
        self.client.release(answer.lease_id)
        self.assertIdle()

    def test_close_from_another_thread_ends_a_wait_with_closed(self):
        hs = self.publish(3)
        first = self.client.lookup(self.ns, hs[:2])
        client = CacheManagerClient(socket_path=self.manager.socket)
        t = client.query(self.ns, [hs[2]])  # waits for budget held by self.client's lease
        self.assertTrue(t.live)
        closer = threading.Timer(0.2, client.close)
        closer.start()
        with support.hang_guard(60):
            with self.assertRaises(orbitkv.Closed):
                client.wait(t, 10)
        closer.join()
        self.assertFalse(t.live)
        self.client.release(first.lease_id)
        deadline = time.monotonic() + 5
        while self.client.health()["tickets"] and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertIdle()


if __name__ == "__main__":
    unittest.main()
