"""An orbitkv-manager process for the gate, and its failpoint controls.

``ManagerProcess(binary, socket, http_port)`` starts the Manager with
``--bootstrap-socket SOCKET --http-addr 127.0.0.1:PORT --ram-capacity 256MiB
--hugepages off`` and waits for its "orbitkv-manager serving" line. With a
binary built with ``-tags failpoints`` the HTTP address serves
``/debug/failpoints/{arm,wait,resume}`` (gocore/failpoint/on.go):
``arm(name)``, ``wait_paused(name, timeout_s)``, ``resume(name)``, and the
hold points ``/debug/failpoints/{hold,held}``: ``hold(name, on)``,
``held(name, timeout_s)`` (``restore-done``: restore copies complete but
their terminal state is withheld while every other request is served).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

__all__ = ["ManagerProcess", "free_port"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


class ManagerProcess:
    READY = "orbitkv-manager serving"

    def __init__(self, binary: str, sock: str, http_port: int | None, ram: str = "256MiB",
                 timeout_s: float = 20, extra: tuple[str, ...] = ()):
        """http_port None: no HTTP address (--http-addr ""); extra: more
        Manager flags. Raises FileNotFoundError (no binary) or RuntimeError
        (it did not print the ready line within timeout_s seconds)."""
        if not os.access(binary, os.X_OK):
            raise FileNotFoundError(f"{binary}: no Manager binary (build it: make e2e builds it)")
        self.sock, self.port = sock, http_port
        self.log: list[str] = []
        self._ready = threading.Event()
        http = "" if http_port is None else f"127.0.0.1:{http_port}"
        self.proc = subprocess.Popen(
            [binary, "--bootstrap-socket", sock, "--http-addr", http, "--ram-capacity", ram,
             "--hugepages", "off", *extra], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("orbitkv-manager did not start:\n" + "".join(self.log[-20:]))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.log.append(line)
            if self.READY in line:
                self._ready.set()

    def _http(self, method: str, path: str, timeout_s: float = 30) -> int:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def health(self) -> dict:
        """GET /health: the Manager-wide figures (sessions, blocks, leases,
        pins, reserved_bytes, operations, tickets, lookups, ...) that a
        session's own Health frame does not show. Needs an HTTP port;
        raises RuntimeError without one, OSError when it does not answer."""
        if self.port is None:
            raise RuntimeError("this Manager has no HTTP address: Manager-wide figures come only from GET /health")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=10) as r:
            return json.load(r)

    def arm(self, name: str) -> None:
        code = self._http("POST", f"/debug/failpoints/arm?name={name}")
        if code != 200:
            raise RuntimeError(f"arming failpoint {name}: HTTP {code} (is this the -tags failpoints build?)")

    def wait_paused(self, name: str, timeout_s: float = 20) -> bool:
        return self._http("GET", f"/debug/failpoints/wait?name={name}&timeout={int(timeout_s)}s",
                          timeout_s + 5) == 200

    def resume(self, name: str) -> None:
        self._http("POST", f"/debug/failpoints/resume?name={name}")

    def hold(self, name: str, on: bool) -> None:
        code = self._http("POST", f"/debug/failpoints/hold?name={name}&on={1 if on else 0}")
        if code != 200:
            raise RuntimeError(f"hold point {name} on={on}: HTTP {code} (is this the -tags failpoints build?)")

    def held(self, name: str, timeout_s: float = 20) -> bool:
        return self._http("GET", f"/debug/failpoints/held?name={name}&timeout={int(timeout_s)}s",
                          timeout_s + 5) == 200

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._close()

    def _close(self) -> None:
        self._reader.join(5)
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.proc.stderr.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._close()
