"""Shared helpers of the orbitkv tests: repository paths, importing the
package (a missing liborbitkv skips with the reason), and a real Manager
process on a temporary socket."""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PYTHON_DIR = os.path.join(REPO, "python")
MANAGER_BIN = os.path.join(REPO, "bin", "orbitkv-manager")
# The failpoint build (-tags failpoints; make test-python builds it).
FP_MANAGER_BIN = os.path.join(REPO, "bin", "orbitkv-manager-fp")
INCLUDE_DIR = os.path.join(REPO, "native", "include")

if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)


def load_testing_module(name: str):
    """orbitkv/testing/<name>.py loaded by path: the modules loaded so need
    only the standard library, and importing them through the package would
    load liborbitkv (whose absence import_orbitkv turns into a skip)."""
    import importlib.util
    path = os.path.join(PYTHON_DIR, "orbitkv", "testing", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_orbitkv_test_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_manager = load_testing_module("manager")
ManagerProcess, free_port = _manager.ManagerProcess, _manager.free_port


def import_orbitkv():
    """The orbitkv package, or unittest.SkipTest naming why liborbitkv
    could not be loaded (module-level use skips the whole module)."""
    try:
        import orbitkv
    except ImportError as e:
        raise unittest.SkipTest(f"liborbitkv not loadable (run `make native`): {e}")
    return orbitkv


@contextlib.contextmanager
def hang_guard(seconds: float):
    """Kill the test process with a traceback of every thread if the body
    runs longer than `seconds` (a C call blocked forever cannot be
    interrupted from Python; a hang must fail, not stall the suite).
    Not nestable: faulthandler keeps one timer per process."""
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


class DumpableEngine:
    """Keeps this test process dumpable while the CUDA driver double is the
    engine's driver: the double's "IPC handle" is opened by the Manager
    through /proc/<this pid>/fd (native/tests/cuda_double/cuda_double.c),
    which a non-dumpable process refuses to a Manager without
    CAP_SYS_PTRACE. start() sets ORBITKV_DUMPABLE=1 (liborbitkv then leaves
    the attribute alone) and makes the process dumpable again; stop()
    restores both as they were."""

    def start(self) -> None:
        self._old = os.environ.get("ORBITKV_DUMPABLE")
        os.environ["ORBITKV_DUMPABLE"] = "1"
        self._was = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE

    def stop(self) -> None:
        if self._old is None:
            del os.environ["ORBITKV_DUMPABLE"]
        else:
            os.environ["ORBITKV_DUMPABLE"] = self._old
        ctypes.CDLL(None).prctl(4, self._was, 0, 0, 0)


class Manager(ManagerProcess):
    """An orbitkv-manager process on a temporary bootstrap socket
    (orbitkv.testing.manager.ManagerProcess with a free loopback HTTP port,
    whose GET /health, ``health()``, gives the Manager-wide figures).

    Started with --bootstrap-socket <tmp>/okv.sock --http-addr 127.0.0.1:PORT
    --ram-capacity 64MiB --hugepages off plus `extra` flags; ready once its stderr says
    "orbitkv-manager serving"; ``binary`` is the Manager to run (default
    bin/orbitkv-manager; FP_MANAGER_BIN for failpoint tests). stop() sends SIGTERM (SIGKILL after 10 s);
    kill() sends SIGKILL and waits; both remove the temporary directory."""

    def __init__(self, *extra: str, ram: str = "64MiB", binary: str = MANAGER_BIN):
        if not os.access(binary, os.X_OK):
            raise unittest.SkipTest(f"{binary} not built (run `make go`; the failpoint build: `make test-python`)")
        self.dir = tempfile.mkdtemp(prefix="orbitkv-pytest-")
        self.socket = os.path.join(self.dir, "okv.sock")
        try:
            super().__init__(binary, self.socket, free_port(), ram=ram, extra=extra)
        except RuntimeError as e:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise AssertionError(str(e)) from None

    def _close(self) -> None:
        super()._close()
        shutil.rmtree(self.dir, ignore_errors=True)
