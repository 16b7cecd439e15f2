"""The client's fork safety (a forked child never touches the
parent's session), session-ending errors after a Manager restart, and
argument checks (NUL in a socket path, numpy pages, buffer indices)."""

from __future__ import annotations

import json
import logging
import os
import time
import unittest

from . import support

orbitkv = support.import_orbitkv()
from orbitkv import BlockHashes, CacheIdentity, CacheManagerClient, EngineBuffer, block_hash16  # noqa: E402
from orbitkv._abi import Code  # noqa: E402
from orbitkv.errors import TimedOut  # noqa: E402

NS = CacheIdentity("fork/model", "r", "float32", "test", 16, 0, 1, 0, 1).namespace()
HASHES = [block_hash16(("fork", i)) for i in range(4)]


def setUpModule():
    logging.getLogger("orbitkv").setLevel(logging.ERROR)


def in_child(body) -> dict:
    """Run body() in a forked child; returns what it returned (a JSON dict),
    or {"error": ...}. The child leaves with os._exit after body, and, the
    way a real child would, after collecting garbage (so __del__ runs)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        os.close(r)
        try:
            out = body()
        except BaseException as e:
            out = {"error": f"{type(e).__name__}: {e}"}
        import gc
        gc.collect()
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    return json.loads(data.decode())


class ManagerCase(unittest.TestCase):
    def setUp(self):
        self.manager = support.Manager()
        self.addCleanup(self.manager.kill)


class TestFork(ManagerCase):
    def published_client(self):
        c = CacheManagerClient(socket_path=self.manager.socket, timeout_ms=2000)
        self.addCleanup(c.close)
        buf = EngineBuffer(2, 4096, 8)
        bid = c.register_buffer(buf)
        for i in range(4):
            for l in range(2):
                buf.page(l, i)[:] = bytes([i + 1]) * 4096
        c.publish(NS, bid, HASHES, list(range(4)))
        return c, buf, bid

    def test_every_call_in_a_forked_child_raises_closed_naming_the_parent(self):
        c, buf, bid = self.published_client()
        parent = os.getpid()

        def body():
            out = {"closed": c.closed}
            for name, f in (("ping", lambda: c.ping(2)), ("health", c.health),
                            ("lookup", lambda: c.lookup(NS, HASHES, timeout_s=2)),
                            ("publish", lambda: c.publish(NS, bid, HASHES[:1], [0])),
                            ("epoch", lambda: c.epoch)):
                t0 = time.monotonic()
                try:
                    f()
                    out[name] = "no error"
                except orbitkv.Closed as e:
                    out[name] = str(e)
                except Exception as e:
                    out[name] = f"{type(e).__name__}: {e}"
                out[name + "_s"] = time.monotonic() - t0
            c.close()
            c.close()
            out["closed_after"] = c.closed
            return out

        with support.hang_guard(60):
            out = in_child(body)
        self.assertTrue(out["closed"])
        for name in ("ping", "health", "lookup", "publish", "epoch"):
            self.assertIn(f"connected by process {parent}", out[name], name)
            self.assertIn("forked child", out[name], name)
            self.assertLess(out[name + "_s"], 0.5, name)
        self.assertTrue(out["closed_after"])
        # The parent's session is intact.
        self.assertEqual(c.ping(7), 7)
        a = c.lookup(NS, HASHES, timeout_s=5)
        self.assertEqual((a.status, a.hit_count), ("Ok", 4))
        c.release(a.lease_id)
        self.assertEqual(self.manager.health()["sessions"], 1)

    def test_a_child_that_exits_and_collects_the_client_leaves_the_parent_session_alone(self):
        c, buf, bid = self.published_client()
        t = c.query(NS, HASHES, flags=orbitkv.QueryFlags.PREPARE)  # a live ticket the child inherits
        hashes = BlockHashes(HASHES)

        def body():
            # What a helper process does: drop everything, collect, exit.
            nonlocal t
            retire = None
            try:
                c.retire(t)
            except Exception as e:
                retire = f"{type(e).__name__}: {e}"
            t = None
            hashes.close()
            buf_closed = None
            try:
                buf.close()  # the client counts as closed in the child
                buf_closed = buf.closed
            except Exception as e:
                buf_closed = f"{type(e).__name__}: {e}"
            c.__del__()
            return {"retire": retire, "buf_closed": buf_closed}

        with support.hang_guard(60):
            out = in_child(body)
        self.assertEqual(out, {"retire": None, "buf_closed": True})
        self.assertEqual(c.ping(9), 9)
        self.assertTrue(t.live)              # the child's free sent no cancel
        c.retire(t)
        self.assertEqual(len(hashes), 4)
        a = c.lookup(NS, hashes, timeout_s=5)
        self.assertEqual(a.hit_count, 4)
        c.release(a.lease_id)
        self.assertEqual(self.manager.health()["sessions"], 1)

    def test_an_adapter_in_a_forked_child_connects_its_own_session(self):
        from orbitkv.vllm.session import Session
        s = Session(self.manager.socket, "test", who="t", instance_id="fork", role=orbitkv.Role.WORKER,
                    timeout_ms=2000, reconnect_interval_s=0)
        self.addCleanup(s.close)
        epoch = s.client.epoch

        def body():
            c = s.get()
            return {"ping": c.ping(5) if c is not None else None, "same": c is not None and c.epoch == epoch,
                    "sessions": self.manager.health()["sessions"] if c is not None else None}

        with support.hang_guard(60):
            out = in_child(body)
        self.assertEqual(out["ping"], 5)          # the child's own client
        self.assertEqual(out["sessions"], 2)      # parent's + child's
        self.assertEqual(s.client.ping(6), 6)     # the parent's client still works


class TestSessionEnding(ManagerCase):
    def test_health_and_register_buffer_after_a_manager_restart_raise_closed(self):
        c = CacheManagerClient(socket_path=self.manager.socket, timeout_ms=2000)
        self.addCleanup(c.close)
        self.manager.kill()
        self.manager = support.Manager()
        for name, f in (("health", c.health), ("register_buffer", lambda: c.register_buffer(EngineBuffer(1, 64, 1))),
                        ("ping", lambda: c.ping(1))):
            with support.hang_guard(30):
                with self.assertRaises((orbitkv.Closed, orbitkv.ManagerDied), msg=name) as cm:
                    f()
            self.assertNotIsInstance(cm.exception, orbitkv.NativeOSError, name)

    def test_a_control_call_timeout_ends_an_adapter_session_but_a_ticket_wait_does_not(self):
        from orbitkv.vllm.session import Session
        s = Session(self.manager.socket, "test", who="t", instance_id="to", role=orbitkv.Role.WORKER,
                    timeout_ms=2000, reconnect_interval_s=0)
        self.addCleanup(s.close)
        wait_to = TimedOut("wait", Code.ETIMEDOUT, "still Loading")
        wait_to.no_reply = False
        self.assertFalse(s.fail(wait_to))
        self.assertIsNotNone(s.client)
        self.assertTrue(s.fail(TimedOut("ping", Code.ETIMEDOUT, "no reply")))
        self.assertIsNone(s.client)
        self.assertIsNotNone(s.get())  # reconnects


class TestArguments(unittest.TestCase):
    def test_a_nul_in_the_socket_path_is_a_bad_argument(self):
        with self.assertRaises(orbitkv.BadArgument) as cm:
            CacheManagerClient(socket_path="/tmp/a\0b")
        self.assertIn("NUL", str(cm.exception))

    def test_buffer_indices_must_be_ints_and_a_closed_buffer_refuses_pages(self):
        b = EngineBuffer(2, 64, 2)
        with self.assertRaises(TypeError):
            b.offset(0.5, 0)
        with self.assertRaises(TypeError):
            b.page(0, "1")
        b.close()
        with self.assertRaises(orbitkv.Closed):
            b.page(0, 0)
        with self.assertRaises(orbitkv.Closed):
            b.offset(0, 0)

    def test_numpy_pages_are_taken_as_ints_or_refused_naming_the_page(self):
        try:
            import numpy as np
        except ImportError:  # pragma: no cover
            self.skipTest("numpy not installed")
        from orbitkv import _check
        self.assertEqual(list(_check.u32_array("publish", "page", np.array([3, 4]))), [3, 4])
        for bad in (np.array([0, 2 ** 40], dtype=np.uint64), np.array([0, -1])):
            with self.assertRaises(orbitkv.BadArgument) as cm:
                _check.u32_array("publish", "page", bad)
            self.assertIn("page 1", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
