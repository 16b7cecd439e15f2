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
INCLUDE_DIR = os.path.join(REPO, "native", "include")

if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)


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


def _die_with_parent() -> None:
    """In the Manager child: SIGKILL it when the test process dies, so a
    test run killed by hang_guard leaves no Manager behind (prctl(2)
    PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1


class Manager:
    """An orbitkv-manager process on a temporary bootstrap socket.

    Started with --bootstrap-socket <tmp>/okv.sock --http-addr "" --ram-capacity
    64MiB --hugepages off plus `extra` flags; ready once its stderr says
    "orbitkv-manager serving". stop() sends SIGTERM (SIGKILL after 10 s);
    kill() sends SIGKILL and waits."""

    READY = "orbitkv-manager serving"

    def __init__(self, *extra: str, ram: str = "64MiB"):
        if not os.access(MANAGER_BIN, os.X_OK):
            raise unittest.SkipTest(f"{MANAGER_BIN} not built (run `make go`)")
        self.dir = tempfile.mkdtemp(prefix="orbitkv-pytest-")
        self.socket = os.path.join(self.dir, "okv.sock")
        self.log: list[str] = []
        self._ready = threading.Event()
        args = [MANAGER_BIN, "--bootstrap-socket", self.socket, "--http-addr", "", "--ram-capacity", ram,
                "--hugepages", "off", *extra]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 20
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError("orbitkv-manager did not start:\n" + "".join(self.log))

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.log.append(line)
            if self.READY in line:
                self._ready.set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._cleanup()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._cleanup()

    def _cleanup(self) -> None:
        self._reader.join(5)
        if self.proc.stderr:
            self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)
