"""An engine process that uses liborbitkv is not dumpable (docs/security.md
"Engine processes are not dumpable"): okv_connect clears the dumpable
attribute, so another process of the engine's own uid, without
CAP_SYS_PTRACE, cannot open the engine's KV buffer through
/proc/<engine>/fd/<n>. ORBITKV_DUMPABLE=1 keeps the process dumpable;
any value other than unset, "", "0" or "1" fails the connect.

Every engine here is a fresh exec'd interpreter: a process starts
dumpable after execve, while a forked child that changed its uid would
already be non-dumpable for that reason alone and prove nothing."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import unittest

from . import support

support.import_orbitkv()

# The engine: start a Manager as this process's uid, connect, allocate and
# register a KV buffer, then let a second process of the same uid (a fresh
# exec, not ptrace-related to the engine in any way /proc checks) try to
# open the buffer's memfd read-write through /proc/<engine>/fd. Prints one
# JSON line: {"dumpable": 0|1, "open": "opened" | errno name}.
ENGINE = r"""
import ctypes, json, os, shutil, subprocess, sys, tempfile
sys.path.insert(0, sys.argv[1])
from orbitkv.testing.manager import ManagerProcess
import orbitkv

ATTACK = '''
import errno, os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDWR))
    print("opened")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
'''
d = tempfile.mkdtemp(prefix="orbitkv-dumpable-")
m = ManagerProcess(sys.argv[2], os.path.join(d, "okv.sock"), None, ram="16MiB")
try:
    c = orbitkv.CacheManagerClient(socket_path=os.path.join(d, "okv.sock"))
    buf = orbitkv.EngineBuffer(1, 4096, 4)
    c.register_buffer(buf)
    dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
    path = "/proc/%d/fd/%d" % (os.getpid(), buf.fd)
    got = subprocess.run([sys.executable, "-c", ATTACK, path], capture_output=True, text=True, timeout=30)
    print(json.dumps({"dumpable": dumpable, "open": got.stdout.strip() or got.stderr.strip()}))
    c.close()
finally:
    m.kill()
    shutil.rmtree(d, ignore_errors=True)
"""

# Connect only (no buffer), then report PR_GET_DUMPABLE, or the error.
CONNECT = r"""
import ctypes, json, os, shutil, sys, tempfile
sys.path.insert(0, sys.argv[1])
from orbitkv.testing.manager import ManagerProcess
import orbitkv

d = tempfile.mkdtemp(prefix="orbitkv-dumpable-")
m = ManagerProcess(sys.argv[2], os.path.join(d, "okv.sock"), None, ram="16MiB")
try:
    before = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
    try:
        orbitkv.CacheManagerClient(socket_path=os.path.join(d, "okv.sock")).close()
        err = ""
    except orbitkv.OrbitKVError as e:
        err = str(e)
    print(json.dumps({"before": before, "after": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), "error": err}))
finally:
    m.kill()
    shutil.rmtree(d, ignore_errors=True)
"""


def _env(**extra: str) -> dict:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONDONTWRITEBYTECODE": "1",
           "HOME": "/nonexistent"}
    if "ORBITKV_LIB" in os.environ:
        env["ORBITKV_LIB"] = os.environ["ORBITKV_LIB"]
    env.update(extra)
    return env


def _run(script: str, env: dict, prefix: list[str] = ()) -> dict:
    got = subprocess.run([*prefix, sys.executable, "-c", script, support.PYTHON_DIR, support.MANAGER_BIN],
                         capture_output=True, text=True, env=env, timeout=120)
    if got.returncode != 0:
        raise AssertionError(f"engine exited {got.returncode}:\n{got.stdout}{got.stderr}")
    return json.loads(got.stdout.strip().splitlines()[-1])


def _need_manager() -> None:
    if not os.access(support.MANAGER_BIN, os.X_OK):
        raise unittest.SkipTest(f"{support.MANAGER_BIN} not built (run `make go`)")


class ConnectClearsDumpable(unittest.TestCase):
    def setUp(self):
        _need_manager()

    def test_a_process_that_connected_is_not_dumpable(self):
        r = _run(CONNECT, _env())
        self.assertEqual((r["before"], r["after"], r["error"]), (1, 0, ""), r)

    def test_ORBITKV_DUMPABLE_1_leaves_the_process_dumpable(self):
        r = _run(CONNECT, _env(ORBITKV_DUMPABLE="1"))
        self.assertEqual((r["before"], r["after"], r["error"]), (1, 1, ""), r)

    def test_ORBITKV_DUMPABLE_0_and_empty_are_the_default(self):
        for v in ("0", ""):
            with self.subTest(value=v):
                r = _run(CONNECT, _env(ORBITKV_DUMPABLE=v))
                self.assertEqual((r["after"], r["error"]), (0, ""), r)

    def test_another_ORBITKV_DUMPABLE_value_fails_the_connect_naming_it(self):
        r = _run(CONNECT, _env(ORBITKV_DUMPABLE="yes"))
        self.assertIn('ORBITKV_DUMPABLE is "yes"', r["error"])
        self.assertIn("want 0 or 1", r["error"])
        self.assertEqual(r["after"], 1, "a refused connect changes nothing")


class BufferAllocNamesABadOptOut(unittest.TestCase):
    def test_a_bad_ORBITKV_DUMPABLE_fails_EngineBuffer_naming_it(self):
        code = ("import orbitkv\n"
                "try:\n    orbitkv.EngineBuffer(1, 4096, 1)\nexcept Exception as e:\n    print(e)\n")
        env = dict(_env(ORBITKV_DUMPABLE="true"), PYTHONPATH=support.PYTHON_DIR)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertIn("ORBITKV_DUMPABLE is 'true': want 0 or 1", out.stdout + out.stderr)


class SameUidProcessCannotOpenEngineFds(unittest.TestCase):
    """As a throwaway non-root user (useradd; needs root): the engine and
    the prober share that uid and hold no capabilities."""

    def setUp(self):
        _need_manager()
        if os.geteuid() != 0:
            raise unittest.SkipTest("creating a throwaway user needs root")
        for tool in ("useradd", "userdel", "setpriv"):
            if shutil.which(tool) is None:
                raise unittest.SkipTest(f"{tool} not found")
        self.user = "orbitkv-t" + secrets.token_hex(4)
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", self.user], check=True,
                       capture_output=True)
        self.addCleanup(subprocess.run, ["userdel", self.user], capture_output=True)
        pw = pwd.getpwnam(self.user)
        self.as_user = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups",
                        "--inh-caps=-all"]

    def test_the_engine_buffer_cannot_be_opened_through_proc(self):
        r = _run(ENGINE, _env(), self.as_user)
        self.assertEqual(r["dumpable"], 0, r)
        self.assertIn(r["open"], ("EACCES", "EPERM"), r)

    def test_with_ORBITKV_DUMPABLE_1_it_can(self):
        # The control: the probe does reach the fd when the engine opts out,
        # so the refusal above is the dumpable attribute's doing.
        r = _run(ENGINE, _env(ORBITKV_DUMPABLE="1"), self.as_user)
        self.assertEqual((r["dumpable"], r["open"]), (1, "opened"), r)


if __name__ == "__main__":
    unittest.main()
