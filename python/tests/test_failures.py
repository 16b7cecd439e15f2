"""Failures around the Manager: nothing at the socket, a Manager that is not
running, a Manager killed between calls. Every case ends in a clear error
within a bound, never a hang (each body runs under support.hang_guard)."""

from __future__ import annotations

import errno
import os
import socket
import tempfile
import time
import unittest

from . import support

orbitkv = support.import_orbitkv()
from orbitkv import BlockHashes, CacheManagerClient, EngineBuffer, QueryFlags  # noqa: E402

BOUND_S = 30  # a hang guard: far above any expected wait


class TestNoManager(unittest.TestCase):
    def test_an_unknown_socket_path_fails_at_once_naming_the_path(self):
        path = os.path.join(tempfile.gettempdir(), "orbitkv-no-such-dir", "okv.sock")
        start = time.monotonic()
        with support.hang_guard(BOUND_S):
            with self.assertRaises(orbitkv.NativeOSError) as cm:
                CacheManagerClient(socket_path=path, timeout_ms=2000)
        self.assertLess(time.monotonic() - start, 5)
        e = cm.exception
        self.assertIsInstance(e, OSError)
        self.assertEqual(e.errno, errno.ENOENT)
        self.assertEqual(e.status, "ENOENT")
        self.assertIn(path, str(e))

    def test_a_socket_nobody_listens_on_is_refused(self):
        with tempfile.TemporaryDirectory(prefix="orbitkv-pytest-") as d:
            path = os.path.join(d, "okv.sock")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)  # the file of a Manager that exited
            s.close()
            with support.hang_guard(BOUND_S):
                with self.assertRaises(orbitkv.NativeOSError) as cm:
                    CacheManagerClient(socket_path=path, timeout_ms=2000)
            self.assertEqual(cm.exception.errno, errno.ECONNREFUSED)
            self.assertIn(path, str(cm.exception))

    def test_a_manager_address_derives_the_socket_path(self):
        self.assertEqual(orbitkv.socket_path_for("127.0.0.1:7470"), "/tmp/orbitkv-127.0.0.1-7470.sock")
        self.assertEqual(orbitkv.socket_path_for("[::1]:007470"), "/tmp/orbitkv-::1-7470.sock")
        with support.hang_guard(BOUND_S):
            with self.assertRaises(orbitkv.NativeOSError) as cm:
                CacheManagerClient(manager_addr="127.0.0.1:1", timeout_ms=2000)
        self.assertIn("/tmp/orbitkv-127.0.0.1-1.sock", str(cm.exception))

    def test_bad_connect_arguments_are_refused(self):
        cases = {
            "both": dict(socket_path="/tmp/x.sock", manager_addr="127.0.0.1:7470"),
            "bad address": dict(manager_addr="no-port"),
            "timeout zero": dict(socket_path="/tmp/x.sock", timeout_ms=0),
            "timeout over an hour": dict(socket_path="/tmp/x.sock", timeout_ms=3_600_001),
            "instance id too long": dict(socket_path="/tmp/x.sock", instance_id="x" * 65),
        }
        for name, kwargs in cases.items():
            with self.subTest(name):
                with self.assertRaises(orbitkv.BadArgument):
                    CacheManagerClient(**kwargs)


class TestManagerKilled(unittest.TestCase):
    """A Manager SIGKILLed while a client is connected: the next call says
    ManagerDied (or Closed once the session is known to be over)."""

    def setUp(self):
        # Cleanups run in reverse order, also when setUp fails half-way.
        self.manager = support.Manager()
        self.addCleanup(self.manager.kill)
        self.buf = EngineBuffer(1, 4096, 4)
        self.addCleanup(self.buf.close)
        self.client = CacheManagerClient(socket_path=self.manager.socket, timeout_ms=2000)
        self.addCleanup(self.close_client)
        self.bid = self.client.register_buffer(self.buf)
        self.ns = orbitkv.CacheIdentity("killed", "r", "bf16", "l", 16, 0, 1, 0, 1).namespace()
        self.hashes = [orbitkv.block_hash16(i) for i in range(2)]
        self.assertEqual(self.client.publish(self.ns, self.bid, self.hashes, [0, 1]), (2, 0))

    def close_client(self):
        with support.hang_guard(BOUND_S):
            self.client.close()

    def assertSessionOver(self, call, name):
        start = time.monotonic()
        with support.hang_guard(BOUND_S):
            with self.assertRaises((orbitkv.ManagerDied, orbitkv.Closed), msg=name) as cm:
                call()
        self.assertLess(time.monotonic() - start, 10, name)
        return cm.exception

    def test_channel_calls_after_the_kill_report_the_death_then_closed(self):
        self.manager.kill()
        first = self.assertSessionOver(lambda: self.client.ping(), "ping")
        self.assertIsInstance(first, orbitkv.ManagerDied)
        self.assertIn("exited", str(first))
        calls = {
            "ping": lambda: self.client.ping(),
            "lookup": lambda: self.client.lookup(self.ns, self.hashes),
            "publish": lambda: self.client.publish(self.ns, self.bid, self.hashes, [0, 1]),
            "start_restore": lambda: self.client.start_restore(1, self.bid, [(0, 0)]),
            "release": lambda: self.client.release(1),
        }
        for name, call in calls.items():
            with self.subTest(name):
                self.assertSessionOver(call, name)

    def test_publish_after_the_kill_never_waits_forever(self):
        self.manager.kill()
        self.assertSessionOver(lambda: self.client.publish(self.ns, self.bid, self.hashes, [0, 1]), "publish")

    def test_health_after_the_kill_fails_within_the_timeout(self):
        self.manager.kill()
        start = time.monotonic()
        with support.hang_guard(BOUND_S):
            with self.assertRaises(orbitkv.OrbitKVError):
                self.client.health()
        self.assertLess(time.monotonic() - start, 10)

    def test_a_ticket_wait_ends_when_the_manager_dies(self):
        t = self.client.query(self.ns, BlockHashes(self.hashes), flags=QueryFlags.PREPARE)
        self.assertTrue(t.live)
        self.manager.kill()
        self.assertSessionOver(lambda: self.client.poll(t), "poll")
        self.assertSessionOver(lambda: self.client.wait(t, 5), "wait")
        self.client.retire(t)

    def test_a_restore_wait_ends_when_the_manager_dies(self):
        answer = self.client.lookup(self.ns, self.hashes)
        op = self.client.start_restore(answer.lease_id, self.bid, [(0, 2), (1, 3)])
        self.manager.kill()
        # The restore may have completed before the kill; once the death is
        # seen, every wait ends with ManagerDied or Closed.
        try:
            with support.hang_guard(BOUND_S):
                self.client.wait_restore(op, 5)
        except (orbitkv.ManagerDied, orbitkv.Closed):
            pass
        self.assertSessionOver(lambda: self.client.wait_restore(op, 5), "wait_restore")


if __name__ == "__main__":
    unittest.main()
