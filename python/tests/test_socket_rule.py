"""The default bootstrap socket rule (docs/operating.md "Socket paths"):
``orbitkv.resolve_socket_path`` (the option, ``ORBITKV_BOOTSTRAP_SOCKET``,
a socket at ``<runtime_dir>/manager.sock``, the path derived from
``ORBITKV_LISTEN`` or 127.0.0.1:7470), ``orbitkv.runtime_dir_owner``
against a /run-like directory made in /tmp, and the client and the vLLM
and SGLang adapters connecting by ``ORBITKV_BOOTSTRAP_SOCKET`` alone. The
same cases are in gocore/lifecycle (socketrule_test.go) and
native/tests/test_socket_rule.c. The ownership cases chown to another uid
and need root; without it they are skipped saying so."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import unittest

from . import support

orbitkv = support.import_orbitkv()
from orbitkv import CacheManagerClient, resolve_socket_path, runtime_dir_owner  # noqa: E402
from orbitkv.errors import BadArgument, NativeOSError  # noqa: E402
from orbitkv.sglang.options import options as sglang_options  # noqa: E402
from orbitkv.vllm.options import parse_options  # noqa: E402
from orbitkv.vllm.session import Session  # noqa: E402

OTHER_UID = 12345
ENV = ("ORBITKV_BOOTSTRAP_SOCKET", "ORBITKV_LISTEN")


class _Env:
    """Set the rule's variables for a test (None: unset) and restore them."""

    def __init__(self, **values: str | None):
        self.values = values

    def __enter__(self):
        self.old = {k: os.environ.get(k) for k in ENV}
        for k in ENV:
            v = self.values.get(k)
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return self

    def __exit__(self, *exc):
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _rundir(test: unittest.TestCase) -> str:
    """A /run-like parent (0755) holding a runtime directory ``orbitkv``
    (0755); removed after the test. Returns the runtime directory."""
    parent = tempfile.mkdtemp(prefix="okvrule-")
    test.addCleanup(shutil.rmtree, parent, True)
    os.chmod(parent, 0o755)
    d = os.path.join(parent, "orbitkv")
    os.mkdir(d, 0o755)
    os.chmod(d, 0o755)
    return d


class ResolveTest(unittest.TestCase):
    def setUp(self):
        self.dir = _rundir(self)
        self.sock = os.path.join(self.dir, "manager.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(self.listener.close)
        self.listener.bind(self.sock)
        self.empty = _rundir(self)

    def test_the_order(self):
        cases = [
            ("an explicit path comes first", dict(socket_path="/x/y.sock"), {"ORBITKV_BOOTSTRAP_SOCKET": "/e.sock"},
             self.dir, "/x/y.sock", "option"),
            ("an explicit address comes before the environment", dict(manager_addr="10.0.0.1:7471"),
             {"ORBITKV_BOOTSTRAP_SOCKET": "/e.sock"}, self.dir, "/tmp/orbitkv-10.0.0.1-7471.sock", "option"),
            ("ORBITKV_BOOTSTRAP_SOCKET comes before the runtime directory", {}, {"ORBITKV_BOOTSTRAP_SOCKET": "/e.sock"},
             self.dir, "/e.sock", "ORBITKV_BOOTSTRAP_SOCKET"),
            ("the runtime directory's socket comes before the derived path", {}, {"ORBITKV_LISTEN": "h:1"},
             self.dir, self.sock, "runtime directory"),
            ("no socket there: the path of ORBITKV_LISTEN", {}, {"ORBITKV_LISTEN": "[::1]:7471"}, self.empty,
             "/tmp/orbitkv-::1-7471.sock", "derived"),
            ("without ORBITKV_LISTEN the path of 127.0.0.1:7470", {}, {}, self.empty,
             "/tmp/orbitkv-127.0.0.1-7470.sock", "derived"),
        ]
        for name, kw, env, runtime, want, source in cases:
            with self.subTest(name), _Env(**env):
                got = resolve_socket_path(runtime_dir=runtime, **kw)
                self.assertEqual((got.path, got.source), (want, source))
                if source != "runtime directory":
                    self.assertIsNone(got.vouched_uid)

    def test_the_runtime_directory_owner_is_vouched_for_only_under_a_root_parent(self):
        with _Env():
            got = resolve_socket_path(runtime_dir=self.dir)
        if os.geteuid() == 0:
            self.assertEqual(got.vouched_uid, 0)   # the parent is root's and 0755
        else:
            self.assertIsNone(got.vouched_uid)     # the parent is this uid's, not root's

    def test_a_file_named_manager_sock_is_not_a_socket(self):
        open(os.path.join(self.empty, "manager.sock"), "w").close()
        with _Env():
            self.assertEqual(resolve_socket_path(runtime_dir=self.empty).source, "derived")

    def test_bad_inputs_are_refused_naming_them(self):
        cases = [
            ("a bad ORBITKV_LISTEN", {}, {"ORBITKV_LISTEN": "nope"}, "ORBITKV_LISTEN 'nope'"),
            ("a bad address", dict(manager_addr="a/b:1"), {}, "manager_addr 'a/b:1'"),
            ("an ORBITKV_BOOTSTRAP_SOCKET of 108 bytes", {}, {"ORBITKV_BOOTSTRAP_SOCKET": "/" + "s" * 107},
             "ORBITKV_BOOTSTRAP_SOCKET '/sss"),
            ("an explicit path of 108 bytes", dict(socket_path="/" + "s" * 107), {}, "at most 107 bytes"),
            ("a NUL in a path", dict(socket_path="/a\0b"), {}, "socket_path"),
        ]
        for name, kw, env, want in cases:
            with self.subTest(name), _Env(**env), self.assertRaises(BadArgument) as cm:
                resolve_socket_path(runtime_dir=self.empty, **kw)
            self.assertIn(want, str(cm.exception))
        self.assertEqual(len(resolve_socket_path(socket_path="/" + "s" * 106).path), 107)


class RuntimeDirOwnerTest(unittest.TestCase):
    def test_missing_and_relative_directories_are_not_vouched_for(self):
        self.assertIsNone(runtime_dir_owner("/nonexistent/orbitkv"))
        self.assertIsNone(runtime_dir_owner("orbitkv"))

    def test_the_conditions(self):
        if os.geteuid() != 0:
            self.skipTest(f"chown to another uid needs root; euid is {os.geteuid()}")
        cases = [
            ("a root-owned 0755 parent vouches for a 0750 directory's owner", 0, 0o755, 0o750, True),
            ("a 1755 parent (sticky, not writable) vouches too", 0, 0o1755, 0o700, True),
            ("a parent owned by another uid is refused", OTHER_UID, 0o755, 0o750, False),
            ("a group-writable parent is refused", 0, 0o775, 0o750, False),
            ("an other-writable sticky parent (like /tmp) is refused", 0, 0o1777, 0o750, False),
            ("a group-writable runtime directory is refused", 0, 0o755, 0o770, False),
            ("an other-writable runtime directory is refused", 0, 0o755, 0o757, False),
        ]
        for name, parent_uid, parent_mode, dir_mode, ok in cases:
            with self.subTest(name):
                d = _rundir(self)
                parent = os.path.dirname(d)
                os.chown(d, OTHER_UID, OTHER_UID)
                os.chmod(d, dir_mode)
                os.chown(parent, parent_uid, 0)
                os.chmod(parent, parent_mode)
                self.assertEqual(runtime_dir_owner(d), OTHER_UID if ok else None)

    def test_a_symbolic_link_is_refused(self):
        d = _rundir(self)
        link = os.path.join(os.path.dirname(d), "link")
        os.symlink(d, link)
        self.assertIsNone(runtime_dir_owner(link))
        self.assertIsNone(runtime_dir_owner(link + "/"))


class ConnectByTheEnvironmentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.manager = support.Manager()

    @classmethod
    def tearDownClass(cls):
        cls.manager.stop()

    def test_the_client_connects_by_ORBITKV_BOOTSTRAP_SOCKET(self):
        with _Env(ORBITKV_BOOTSTRAP_SOCKET=self.manager.socket), CacheManagerClient(instance_id="env") as c:
            self.assertEqual(c.socket_path, self.manager.socket)
            self.assertGreater(c.epoch, 0)

    def test_the_derived_default_is_named_when_nobody_serves_it(self):
        if resolve_socket_path().source == "runtime directory":
            self.skipTest(f"{orbitkv.RUNTIME_DIR}/manager.sock is a socket on this host: it is the default")
        with _Env(ORBITKV_LISTEN="127.0.0.1:1"), self.assertRaises(NativeOSError) as cm:
            CacheManagerClient(timeout_ms=500)
        self.assertIn("/tmp/orbitkv-127.0.0.1-1.sock", str(cm.exception))

    def test_a_path_and_an_address_together_are_refused(self):
        with self.assertRaisesRegex(BadArgument, "at most one of socket_path and manager_addr"):
            CacheManagerClient(socket_path=self.manager.socket, manager_addr="127.0.0.1:7470")

    def test_the_adapters_default_to_the_rule_at_each_connect(self):
        self.assertIsNone(parse_options({}).socket_for(0)[0])
        self.assertIsNone(sglang_options({}, 1)["bootstrap_socket"])
        with _Env(ORBITKV_BOOTSTRAP_SOCKET=self.manager.socket):
            s = Session(None, "orbitkv.bootstrap_socket", who="test", instance_id="session-default", role=0)
            try:
                self.assertEqual(s.socket_path, self.manager.socket)
                self.assertIsNotNone(s.get())
            finally:
                s.close()

    def test_an_unserved_default_is_named_by_the_session(self):
        with _Env(ORBITKV_BOOTSTRAP_SOCKET=os.path.join(self.manager.dir, "none.sock")), \
                self.assertRaises(NativeOSError) as cm:
            Session(None, "orbitkv.bootstrap_socket", who="test", instance_id="session-none", role=0, timeout_ms=500)
        self.assertIn("orbitkv.bootstrap_socket unset (default '" + os.path.join(self.manager.dir, "none.sock"),
                      str(cm.exception))


if __name__ == "__main__":
    unittest.main()
